"""What ``envlock show`` prints for a file that is not a manifest (an ``environment.yml``, a
lockfile, requirements, a ``Pipfile``), read as an :class:`envlock.formats.Reading`: its summary
(:func:`foreign_lines`, with a lockfile's own :func:`lock_summary_lines`), every package
(``--all``) or the reading as JSON (``--format json``), in the layout of
:mod:`envlock.render.showreport`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envlock.render.showreport import print_rows, wrap

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["foreign_json", "foreign_lines", "foreign_rows", "lock_summary_lines", "render_foreign"]


def _built_text(built: list[Any]) -> str:
    """`` (1 built from source: child-package 0.1.0)``: a pixi.lock's conda source packages,
    which rattler counts as packages (:attr:`envlock.formats.locks.LockFile.sources`)."""
    if not built:
        return ""
    return f" ({len(built)} built from source: " + ", ".join(
        f"{x.name} {x.version}" for x in built) + ")"


def lock_summary_lines(lock: Any, *, path: str = "") -> list[str]:
    """The summary of a lockfile ``show`` was given instead of a manifest
    (:class:`envlock.formats.locks.LockFile`): its kind, then per platform how many conda
    and pip packages it locks (a ``pixi.lock`` platform with its subdir and virtual packages),
    the groups only some installs take, and the project entries."""
    lines = [f"{lock.kind}: {path}" if path else lock.kind]
    pixi = {q.name: q for q in getattr(lock, "pixi_platforms", ())}
    plats = list(lock.platforms) or [None]
    for plat in plats:
        pkgs = [x for x in lock.packages if plat is None or x.platform == plat]
        conda = sum(1 for x in pkgs if x.manager == "conda")
        pip = len(pkgs) - conda
        label = f"platform {plat}" if plat else "packages"
        built = [x for x in getattr(lock, "sources", ()) if plat is None or x.platform == plat]
        text = (f"{conda + len(built)} conda{_built_text(built)}, {pip} pip"
                if conda or built else f"{pip} pip")
        q = pixi.get(plat) if plat else None
        if q is not None and (q.subdir != q.name or q.virtual_packages):
            text += f" (subdir {q.subdir}" + (f"; virtual packages {', '.join(q.virtual_packages)}"
                                                if q.virtual_packages else "") + ")"
        lines.append(f"{label}: {text}")
    groups: dict[str, set[str]] = {}
    for x in lock.packages:
        for g, _ in x.groups:
            if g:
                groups.setdefault(g, set()).add(x.name)
    if groups:
        lines.append("optional: " + ", ".join(f"{g.replace('extra:', 'extra ')} ({len(n)})"
                                               for g, n in sorted(groups.items())))
    if lock.projects:
        lines.append(f"project: {', '.join(lock.projects)}")
    return lines


#: what each listing of :class:`envlock.formats.Reading` means, in a reader's words.
_LISTINGS = {"complete": "a complete listing (a package it does not list is absent)",
             "partial": "a spec: what someone asked for (unlisted packages are not compared)",
             "conda": "complete for conda packages; says nothing about pip packages",
             "pip": "complete for Python distributions; says nothing about conda packages"}


def _python_of(reading: Any) -> str:
    """The Python a reading names: the conda ``python`` package, the lock's requires-python,
    a Pipfile's ``[requires]``, else ``"not stated"``."""
    py = reading.data.get("python") or {}
    conda_py = next((p for p in (reading.data.get("conda") or {}).get("packages", ())
                     if p.get("name") == "python"), None)
    if py.get("version"):
        return f"{py.get('implementation', 'cpython')} {py['version']} (the conda python package)"
    if conda_py is not None:
        spec = (conda_py.get("constraint") or {}).get("version") or conda_py.get("version")
        return f"python {spec or 'any version'} (a conda constraint)"
    req = reading.meta.get("requires") or {}
    pin = req.get("python_full_version") or req.get("python_version")
    if pin:
        return f"{pin} (the Pipfile's [requires])"
    rp = getattr(reading.lock, "requires_python", None)
    if rp:
        return f"requires-python {rp}"
    pip = (reading.data.get("pip") or {}).get("packages", ())
    marked = any("python_version" in str(p.get("marker", "")) or "python_full_version" in str(
        p.get("marker", "")) for p in pip)
    return "not stated" + (" (entries carry python_version markers)" if marked else "")


def chosen_name(plats: list[str]) -> str | None:
    """The platform whose packages a reading of a lock counts (:func:`envlock.formats.read`
    without ``platform``: ``linux-64`` when locked, else the first)."""
    return "linux-64" if "linux-64" in plats else (plats[0] if plats else None)


def foreign_lines(reading: Any, *, path: str = "") -> list[str]:
    """The summary of a file that is not a manifest, as ``label: text`` lines: its kind and
    what its listing means, platforms, package counts (conda, pip; per platform for a lock of
    several), Python, channels or indexes, and what the format records besides
    (``Pipfile.lock``: its ``_meta`` hash, sources, categories).

    :param reading: an :class:`envlock.formats.Reading`.
    """
    out = [path or reading.kind, f"kind: {reading.kind}, {_LISTINGS.get(reading.listing, reading.listing)}"]
    lock = reading.lock
    plats = list(reading.platforms)
    chosen = (reading.data.get("subdir") or {}).get("subdir")
    if plats:
        out.append("platforms: " + ", ".join(plats) + (
            f" (the counts below are {chosen}'s)" if chosen and len(plats) > 1 else ""))
    elif lock is not None:
        envs = getattr(lock, "environments", ())
        out.append("platforms: any (entries carry PEP 508 markers)" + (
            "; environments " + "; ".join(envs) if envs else ""))
    else:
        out.append("platforms: not stated")
    conda_t = reading.data.get("conda") or {}
    pip_t = reading.data.get("pip") or {}
    n_conda = len(conda_t.get("packages") or ())
    n_pip = len(pip_t.get("packages") or ())
    pip_text = (f"not recorded ({pip_t.get('error')})" if pip_t.get("status") not in (None, "ok")
                else str(n_pip))
    # a pixi.lock's conda source packages of the platform counted (``_reading``'s choice)
    counted = chosen_name(plats) if lock is not None else None
    built = [x for x in getattr(lock, "sources", ()) if x.platform in (counted, None)]
    line = f"packages: {n_conda + len(built)} conda{_built_text(built)}, {pip_text} pip"
    if lock is not None and len(plats) > 1:
        line += f"; {len(lock.packages)} entries on all {len(plats)} platforms"
    constraints = sum(1 for t in (conda_t, pip_t) for p in t.get("packages") or ()
                      if "constraint" in p)
    if constraints:
        line += f"; {constraints} of them constraints, not pins"
    pkgs = pip_t.get("packages") or ()
    unnamed = [p["url"] for p in pkgs if p.get("unnamed") and not p.get("local")]
    named = [p["name"] for p in pkgs if p.get("named-by") == "url"]
    local = [f"{p['name']} ({p['url']})" for p in pkgs if p.get("local") and not p.get("unnamed")]
    unnamed_local = [p["url"] for p in pkgs if p.get("unnamed") and p.get("local")]
    if named:
        line += "; named from their URL: " + ", ".join(named)
    if unnamed:
        line += "; unnamed (a URL only): " + ", ".join(unnamed)
    if local:
        line += "; local paths: " + _first(local)
    if unnamed_local:
        line += "; unnamed local paths (no project name found there): " + _first(unnamed_local)
    out.append(line + " (--all lists every one)")
    out.append(f"python: {_python_of(reading)}")
    out += _two_builds_lines(reading)
    if conda_t.get("channels"):
        out.append("channels: " + ", ".join(str(c) for c in conda_t["channels"]))
    meta = reading.meta
    if meta.get("sources"):
        out.append("indexes: " + ", ".join(
            f"{s.get('name') or '?'} {s.get('url')}" + ("" if s.get("verify_ssl", True)
                                                         else " (TLS not verified)")
            for s in meta["sources"]))
    if meta.get("categories"):
        counts: dict[str, int] = {}
        for p in pip_t.get("packages") or ():
            counts[p.get("category", "?")] = counts.get(p.get("category", "?"), 0) + 1
        if lock is not None:  # a lock's own counts: an entry in two categories counts in both
            counts = {}
            for x in lock.packages:
                for g, _ in x.groups:
                    counts[g or "default"] = counts.get(g or "default", 0) + 1
        out.append("categories: " + ", ".join(f"{c} {counts.get(c, 0)}" for c in meta["categories"]))
    if meta.get("sha256"):
        out.append(f"locked from: the Pipfile of sha256 {meta['sha256']}")
    if lock is not None:  # per platform, the groups some installs take, the projects
        # (a lock of no platform: its one count is the packages line above already)
        out += [ln for ln in lock_summary_lines(lock)[1:] if not ln.startswith("packages: ")]
    return out


def _two_builds_lines(reading: Any) -> list[str]:
    """``two builds: …`` for each distribution the file lists as a conda package and as a pip
    one of another version — the sentence diff reads the file with (:mod:`envlock.diff.facts`),
    so show and diff say the same; none when the file has not both."""
    if not (reading.data.get("conda") or {}).get("packages") or not (
            reading.data.get("pip") or {}).get("packages"):
        return []
    from envlock.diff.facts import extract
    from envlock.diff.impact import load_kb

    fs = extract(reading.data, label="", path="", kind=reading.kind,
                 aliases=load_kb(()).aliases, listing=reading.listing)
    return [f"two builds: {n.removeprefix(': ').removeprefix('two builds of ')}"
            for n in fs.notes if "two builds of " in n]


def _first(items: list[str], limit: int = 5) -> str:
    """The first ``limit`` of ``items``, and how many more (``--all`` lists them all)."""
    return ", ".join(items[:limit]) + (f", … {len(items) - limit} more" if len(items) > limit
                                       else "")


def foreign_rows(reading: Any) -> list[tuple[str, str, str]]:
    """Every package of a reading as ``(name, version, from)``: conda ``channel build``, pip
    with its marker or URL; constraints show their spec."""
    rows = []
    for p in (reading.data.get("conda") or {}).get("packages") or ():
        c = p.get("constraint")
        rows.append((p["name"], (c or {}).get("version") or p.get("version") or "(any)",
                     "conda " + " ".join(str(x) for x in (p.get("channel"), p.get("build")) if x)
                     + (" (constraint)" if c else "")))
    for p in (reading.data.get("pip") or {}).get("packages") or ():
        where = "pip" + (f" {p['url']}" if p.get("url") else "") + (
            f" ; {p['marker']}" if p.get("marker") else "") + (
            " (constraint)" if p.get("constraint") else "")
        rows.append((str(p["name"]), str(p.get("version") or "(any)"), where))
    return sorted(rows)


def foreign_json(reading: Any) -> dict[str, Any]:
    """``show --format json`` of a file that is not a manifest: ``kind``, ``listing``,
    ``platforms``, ``meta`` and ``data`` (the partial manifest it reads as)."""
    return {"kind": reading.kind, "listing": reading.listing, "platforms": list(reading.platforms),
            "meta": reading.meta, "data": reading.data}


def render_foreign(reading: Any, console: Console, *, path: str = "", show_all: bool = False) -> None:
    """Print :func:`foreign_lines` wrapped to the console, then (``--all``) every package."""
    for line in foreign_lines(reading, path=path):
        for part in wrap(line, console.width):
            console.print(part, markup=False, highlight=False, soft_wrap=True)
    if show_all:
        rows = foreign_rows(reading)
        console.print(f"every package ({len(rows)})", markup=False)
        if rows:
            print_rows(console, rows)
