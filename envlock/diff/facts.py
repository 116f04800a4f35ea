"""Flatten a manifest (or a partial one read from a foreign format) into comparable *facts*.

A fact is ``(area, key) → value``: ``("package", "numpy") → Pkg("1.26.4", build=…)``,
``("cpu", "isa") → frozenset({"avx2", …})``, ``("env", "OMP_NUM_THREADS") → "1"``,
``("gpu", "compute-capability") → frozenset({"8.6"})``, ``("frameworks", "torch.cuda") →
"13.0"``, ``("blas", "numpy") → Impl("openblas", "0.3.27")``.

Extractors read the *raw dict* of each table, not the dataclasses, so a table written by a
newer envlock, by another branch of this one, or by a foreign reader is compared as far as
its keys are known; a table with no extractor is flattened generically.  A table that an
input lacks, or whose ``status`` is not ``"ok"``, makes that area "not compared" with the
reason, never "removed".

Fields that differ between any two machines without meaning anything (times, host names,
paths of the snapshot itself, job ids) are not facts at all.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from envlock.diff import processfacts, stackfacts
from envlock.diff.factset import (
    FactSet,
    Impl,
    Lib,
    Pkg,
    Sink,
    display,
    normalize_name,
    put_fact,
    same,
    str_or_none,
)
from envlock._kinds import STACK_AREAS
from envlock._names import is_metapackage
from envlock.redact import redact_variable

__all__ = ["Pkg", "Impl", "Lib", "FactSet", "extract", "normalize_name", "display", "same", "areas_of",
           "put_fact", "str_or_none"]


def _python(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    put_fact(out, "python", "version", str_or_none(t.get("version")))
    put_fact(out, "python", "implementation", str_or_none(t.get("implementation")))


def _subdir(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """The conda platform (subdir) a lockfile or conda listing is for (``linux-64``)."""
    put_fact(out, "subdir", "platform", str_or_none(t.get("subdir")))


def _platform(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    os_ = " ".join(x for x in (str_or_none(t.get("os-id")), str_or_none(t.get("os-version"))) if x)
    put_fact(out, "platform", "os", os_ or None)
    for key in ("kernel", "machine", "glibc"):
        put_fact(out, "platform", key, str_or_none(t.get(key)))



def _cpu(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    for key in ("vendor", "model", "logical-cores", "usable-cores", "memory"):
        put_fact(out, "cpu", key, t.get(key))
    flags = t.get("flags")
    if isinstance(flags, list):
        put_fact(out, "cpu", "isa", frozenset(str(f).lower() for f in flags))


#: (name, value) → the value :func:`envlock.redact.redact_variable` makes of it, a pure
#: function: a fleet's node manifests hold the same variables, redacted once (at most
#: :data:`_MAX_REDACTED` kept, then it starts again)
_REDACTED: dict[tuple[str, str], str] = {}
_MAX_REDACTED = 100_000


def _env(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    variables = t.get("vars")
    if isinstance(variables, Mapping):
        seen = _REDACTED
        for name, value in variables.items():  # a foreign manifest may hold what we redact
            key = (str(name), str(value))
            shown = seen.get(key)
            if shown is None:
                if len(seen) >= _MAX_REDACTED:
                    seen.clear()
                shown = seen[key] = redact_variable(*key)[0]
            put_fact(out, "env", key[0], shown)


def _git_state(scope: str, g: Mapping[str, Any], out: Sink) -> None:
    if g.get("status", "ok") != "ok":
        return
    put_fact(out, "code", f"{scope}.commit", str_or_none(g.get("commit")))
    put_fact(out, "code", f"{scope}.branch", str_or_none(g.get("branch")))
    if g.get("dirty") is not None or g.get("diff-sha256"):
        diff = g.get("diff-sha256")
        put_fact(out, "code", f"{scope}.uncommitted", f"sha256:{diff}" if diff else (
            "dirty (no hash)" if g.get("dirty") else "none"))
    if isinstance(g.get("untracked"), int):
        put_fact(out, "code", f"{scope}.untracked", g["untracked"])


def _git(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    _git_state("repository", t, out)


def _conda_keys(pkgs: list[Mapping[str, Any]], aliases: Mapping[str, str]) -> list[str]:
    """The fact key of each conda package.  conda names are exact (``cached_property`` and
    ``cached-property`` are two conda packages): the PyPI-normalised name (or its alias) is the
    key unless two packages of one input share it, and then only the one spelled that way keeps
    it; the others keep their own conda name.  A metapackage (``pytorch-gpu``, ``*_mutex``) is
    never aliased: it never stands in for the package it selects.

    Where the record names the dist-info it installs (``python-dist``, read from conda-meta's
    ``files``), the project name in that directory's name is the key: it is the name Python
    and pip see (conda's ``pytables`` ships ``tables-3.9.2.dist-info``), ahead of the alias
    table, which is for inputs that do not say (an ``environment.yml``)."""
    wanted = []
    alias = aliases.get
    for p in pkgs:
        raw = str(p["name"])
        norm = raw if raw.startswith("_") else normalize_name(raw)  # `_libgcc_mutex`: conda only
        meta = p.get("metapackage") or is_metapackage(raw)  # also in a manifest's [conda]
        dist = p.get("python-dist")
        if dist is not None:
            dist = _dist_project(dist)
        wanted.append(raw if meta else dist or alias(norm, norm))
    taken: dict[str, int] = {}
    for i, (p, key) in enumerate(zip(pkgs, wanted, strict=True)):
        j = taken.get(key)
        if j is None or (str(p["name"]) == key and str(pkgs[j]["name"]) != key):
            taken[key] = i
    return [key if taken.get(key) == i else str(p["name"])
            for i, (p, key) in enumerate(zip(pkgs, wanted, strict=True))]


def _dist_project(path: Any) -> str | None:
    """The PEP 503 name of the project in a ``*.dist-info`` / ``*.egg-info`` directory's name
    (``…/site-packages/scikit_learn-1.4.1.post1.dist-info`` → ``scikit-learn``): the part
    before the version, which has no ``-`` (the recording-installed-packages spec, PEP 376/627:
    ``{name}-{version}.dist-info``; an egg-info may add ``-py3.11``)."""
    if not isinstance(path, str) or not path:
        return None
    base = path.rstrip("/").rsplit("/", 1)[-1]
    for suffix in (".dist-info", ".egg-info"):
        if base.endswith(suffix):
            stem = re.sub(r"-py\d+(\.\d+)?$", "", base[: -len(suffix)])
            name = stem.rsplit("-", 1)[0] if "-" in stem else ""
            return normalize_name(name) if name else None
    return None


def _constraint(p: Mapping[str, Any]) -> tuple[str, str, str] | None:
    c = p.get("constraint")
    if not isinstance(c, Mapping):
        return None
    return (str(c.get("kind", "")), str(c.get("version") or ""), str(c.get("build") or ""))


#: ``Pkg``'s fields in order, without its Python-level ``__new__`` (what ``Pkg._make`` does).
_pkg = tuple.__new__


def _conda(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    pkgs = [p for p in t.get("packages") or () if isinstance(p, Mapping) and "name" in p]
    for p, key in zip(pkgs, _conda_keys(pkgs, aliases), strict=True):
        raw = str(p["name"])
        version = str(p.get("pip-version") or p.get("version") or "")
        build, channel = p.get("build"), p.get("channel")
        out[("package", key)] = _pkg(Pkg, (
            version, None if build is None or build == "" else str(build),
            None if channel is None or channel == "" else str(channel), "conda", raw,
            _constraint(p) if "constraint" in p else None))


def _pip(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    # One pass, a few dictionary look-ups per package: a pip freeze may list millions.
    for p in t.get("packages") or ():
        if not (type(p) is dict or isinstance(p, Mapping)) or "name" not in p:
            continue
        raw = str(p["name"])
        norm = raw if p.get("unnamed") else normalize_name(raw)  # a URL or path: as written
        key = aliases.get(norm, norm)
        if p.get("marker"):  # listed once per environment marker set (uv export, pylock)
            key = f"{key} ; {p['marker']}"
        version = str(p.get("version") or "")
        prior = out.get(("package", key))
        if prior is not None and isinstance(prior, Pkg) and prior.manager == "conda" and (
            p.get("origin") == "conda" or p.get("conda-package") or prior.version == version
        ):
            pass  # conda's record (with its build string) describes the same files
        else:
            if isinstance(prior, Pkg) and prior.manager == "conda" and prior.constraint is None \
                    and "constraint" not in p:
                _two_builds(out, key, prior, raw, version)
            out[("package", key)] = _pkg(Pkg, (version, None, None, "pip", raw,
                                               _constraint(p) if "constraint" in p else None))
        git = p.get("git")
        if isinstance(git, Mapping):
            _git_state(key, git, out)
        elif p.get("vcs") and p.get("commit"):
            put_fact(out, "code", f"{key}.commit", str(p["commit"]))
        elif p.get("vcs") and p.get("url"):  # a branch or tag, or no ref: the URL says which
            put_fact(out, "code", f"{key}.url", str(p["url"]))


#: the area of the sentences :func:`_two_builds` leaves for :func:`extract`'s notes
_NOTE = "_note"


def _two_builds(out: Sink, key: str, conda: Pkg, pip_name: str, pip_version: str) -> None:
    """An input that lists one distribution twice, as a conda package and as a pip one of
    another version (a conda-lock.yml with conda ``pytorch`` 1.13.1 and pip ``torch`` 2.3.1):
    two facts, not one.  conda's moves to ``"<key> (conda)"``; pip's keeps the key (conda-lock
    installs pip entries after conda's, over them).  An installed environment never comes here:
    a snapshot records conda's package as overwritten, with pip's version (``pip-version``)."""
    out[("package", f"{key} (conda)")] = conda
    built = f" {conda.build}" if conda.build else ""
    out[(_NOTE, key)] = (
        f"two builds of {key}: conda {conda.name} {conda.version}{built} and pip {pip_name} "
        f"{pip_version}; compared as two packages ({key} (conda) and {key}); installed in order, "
        "pip's replaces conda's files")


def _lockfiles(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    for f in t.get("files") or ():
        if isinstance(f, Mapping) and f.get("path"):
            name = str(f["path"]).rsplit("/", 1)[-1]
            put_fact(out, "lockfiles", name, f"sha256:{str(f.get('sha256', ''))[:16]}")


_SHADOWED = re.compile(r"\[shadowed\] (\S+) is shadowed: (\S+) is loaded instead of (\S+)")


def _libraries(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
    """One fact per resolved SONAME: which package's copy the loader picks (its version is a
    package fact already), or the file itself when no package owns it (case C01: a module
    tree on ``LD_LIBRARY_PATH``), as a :class:`Lib` that also keeps the loader model's rule.
    A ``shadowed`` finding (``libpython3.11.so.1.0 is shadowed: X is loaded instead of Y``)
    names a library the loader takes from elsewhere than its owner expects: it is a fact too,
    moved through ``LD_LIBRARY_PATH`` when X lies in one of its directories.  Paths inside the
    two environments' own prefixes differ on every machine and are not compared."""
    for r in t.get("resolved") or ():
        if not isinstance(r, Mapping) or not r.get("soname"):
            continue
        soname = str(r["soname"])
        rule = str_or_none(r.get("rule"))
        if r.get("path") is None and r.get("realpath") is None:
            put_fact(out, "libraries", soname, Lib("not found", rule))
            continue
        owner = r.get("owner")
        kind = r.get("owner-kind")
        where = f"{kind} package {owner}" if owner else f"unowned file {r.get('realpath') or r.get('path')}"
        put_fact(out, "libraries", soname, Lib(where, rule))
    dirs = {d.rstrip("/") for d in str(t.get("ld-library-path") or "").split(":") if d}
    for line in t.get("findings") or ():
        m = _SHADOWED.search(str(line))
        if m and ("libraries", m.group(1)) not in out:
            loaded = m.group(2)
            via = "ld_library_path" if loaded.rsplit("/", 1)[0] in dirs else "shadowed"
            out[("libraries", m.group(1))] = Lib(f"unowned file {loaded}", via)


#: keys never compared by the generic flattener: they differ without meaning anything.
_NOISE = frozenset({"status", "source", "error", "path", "paths", "location", "created",
                    "duration", "host", "command", "filepath", "job-id", "node", "nodelist",
                    "submit-dir", "uuid", "prefix", "executable"})


def _generic(area: str) -> Callable[[Mapping[str, Any], Sink, Mapping[str, str]], None]:
    def flatten(t: Mapping[str, Any], out: Sink, aliases: Mapping[str, str]) -> None:
        _flatten(area, "", t, out, 0)

    return flatten


def _flatten(area: str, prefix: str, value: Any, out: Sink, depth: int) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            if k not in _NOISE and depth < 4:
                _flatten(area, f"{prefix}.{k}" if prefix else str(k), v, out, depth + 1)
    elif isinstance(value, list):
        if all(isinstance(v, Mapping) for v in value) and value:
            for i, v in enumerate(value):
                name = v.get("name") or v.get("soname") or v.get("id") or v.get("index", i)
                _flatten(area, f"{prefix}[{name}]" if prefix else str(name), v, out, depth + 1)
        else:
            put_fact(out, area, prefix or area, frozenset(map(str, value)))
    elif prefix:
        put_fact(out, area, prefix, value)


Extractor = Callable[[Mapping[str, Any], Sink, Mapping[str, str]], None]

#: table name → (area its facts go to, extractor).  Tables not listed are flattened generically.
EXTRACTORS: dict[str, tuple[str, Extractor]] = {
    "python": ("python", _python),
    "platform": ("platform", _platform),
    "cpu": ("cpu", _cpu),
    "env": ("env", _env),
    "git": ("code", _git),
    "conda": ("package", _conda),
    "pip": ("package", _pip),
    "lockfiles": ("lockfiles", _lockfiles),
    "subdir": ("subdir", _subdir),
    "libraries": ("libraries", _libraries),
}


for _name in (a.name for a in STACK_AREAS if a.facts):
    EXTRACTORS[_name] = (_name, getattr(stackfacts, _name))
EXTRACTORS.update(processfacts.EXTRACTORS)  # [process] (envlock.record) and [run] (run.toml)

#: tables that describe the file rather than the environment.
_SKIP = frozenset({"envlock", "target"})


#: ``memo(table, body, compute)``: ``compute()`` (the facts of one table read alone, a dict
#: the caller must not change) or what an earlier ``compute()`` of this very body returned.
TableMemo = Callable[[str, Mapping[str, Any], Callable[[], Sink]], Sink]


def _alone(fn: Extractor, body: Mapping[str, Any], aliases: Mapping[str, str]) -> Sink:
    out: Sink = {}
    fn(body, out, aliases)
    return out


def extract(data: Mapping[str, Any], *, label: str, path: str, kind: str = "manifest",
            aliases: Mapping[str, str] | None = None, listing: str = "complete",
            memo: TableMemo | None = None) -> FactSet:
    """Flatten a manifest dict (kebab-case keys, as read from TOML) into a :class:`FactSet`.

    :param data: the parsed manifest, or a partial manifest built by :mod:`envlock.diff.foreign`.
    :param aliases: normalized package name → canonical name (conda ``pytorch`` → ``torch``).
    :param memo: remembers the facts of a table by its body (:data:`TableMemo`; ``envlock
        find`` reads the tables thousands of files share once).  Asked only for tables whose
        extractor reads nothing but the table (every one, except ``[pip]`` beside a ``[conda]``
        table: pip's entries of conda's packages keep conda's); their facts are then added as
        the extractor would have written them.  It must be used with one ``aliases``.
    :returns: the facts; tables whose ``status`` is not ``"ok"`` make their area not compared.
    """
    aliases = aliases or {}
    fs = FactSet(label=label, path=path, kind=kind, listing=listing)
    target = data.get("target")
    if isinstance(target, Mapping) and target.get("kind"):
        fs.facts[("target", "kind")] = str(target["kind"])
        fs.areas["target"] = ""
    # conda before pip: pip entries of conda-owned files keep conda's build string.
    order = sorted(data, key=lambda k: (k != "conda", k))
    for table in order:
        body = data[table]
        if table in _SKIP or not isinstance(body, Mapping):
            continue
        if table not in EXTRACTORS:
            fs.generic.add(table)
        area, fn = EXTRACTORS.get(table, (table, _generic(table)))
        status = body.get("status", "ok")
        if status not in ("ok", "absent"):
            reason = f"{table} {status}" + (f": {body['error']}" if body.get("error") else "")
            if table == "git":  # editable checkouts are still compared; say the repo failed
                fs.facts[("code", "repository.state")] = reason
                fs.areas.setdefault(area, "")
            elif area == "package" and area in fs.areas:  # conda ok, pip failed: what is
                fs.listing = "conda" if status == "not recorded" else "partial"  # known is
                fs.areas.setdefault("pip", reason)        # compared, absence is not
            else:
                fs.areas.setdefault(area, reason)
            continue
        if fs.areas.get(area):  # a sibling table failed (conda error, pip ok): keep facts
            fs.areas[area] = ""
            fs.listing = "partial"
        fs.areas.setdefault(area, "")
        if status != "ok":
            continue
        if memo is not None and (table != "pip" or "conda" not in data):
            fs.facts.update(memo(table, body, functools.partial(_alone, fn, body, aliases)))
        else:
            fn(body, fs.facts, aliases)
    for k in [k for k in fs.facts if k[0] == _NOTE]:
        fs.notes.append(f"{label}: {fs.facts.pop(k)}")
    _scheduler_vars(fs)
    # conda's python package and [python] say the same: keep one fact, the interpreter's
    py = fs.facts.pop(("package", "python"), None)
    if isinstance(py, Pkg) and ("python", "version") not in fs.facts and fs.areas.get(
            "python", "") == "" and (py.version[:1].isdigit() or py.constraint):
        # a spec's constraint (`python=3.10`) stays a constraint: satisfied or violated
        fs.facts[("python", "version")] = py if py.constraint else py.version
    for area, _ in fs.facts:
        fs.areas.setdefault(area, "")
    return fs


#: environment variables of batch schedulers: facts of the ``slurm`` area (one area for the
#: allocation, whether [slurm] or [env] recorded it).
SCHEDULER_PREFIXES = ("SLURM_", "PBS_", "LSB_", "SGE_")


#: the variables the ``[slurm]`` table reads into a field of its own (envlock.probes.slurm).
_PARSED_BY_SLURM_TABLE = {
    "SLURM_CPUS_ON_NODE": "cpus-on-node", "SLURM_CPUS_PER_TASK": "cpus-per-task",
    "SLURM_MEM_PER_NODE": "mem-per-node", "SLURM_MEM_PER_CPU": "mem-per-cpu",
    "SLURM_JOB_NUM_NODES": "num-nodes", "SLURM_NNODES": "num-nodes", "SLURM_NTASKS": "ntasks",
    "SLURM_GPUS_ON_NODE": "gpus-on-node", "SLURM_JOB_PARTITION": "partition",
    "SLURM_CLUSTER_NAME": "cluster",
}


def _scheduler_vars(fs: FactSet) -> None:
    """Move ``env:SLURM_*``/``PBS_*``/``LSB_*``/``SGE_*`` facts to the ``slurm`` area, so that
    the allocation is one area (and one explanation), not one per variable in two areas."""
    moved = [k for k in fs.facts if k[0] == "env" and k[1].startswith(SCHEDULER_PREFIXES)]
    for key in moved:
        parsed = _PARSED_BY_SLURM_TABLE.get(key[1])
        if parsed is not None and ("slurm", parsed) in fs.facts:
            del fs.facts[key]  # the [slurm] table's reading of it is the fact: once, not twice
            continue
        fs.facts[("slurm", key[1])] = fs.facts.pop(key)
    if moved and fs.areas.get("env") == "":
        fs.areas.setdefault("slurm", "")
    elif moved and "slurm" in fs.areas and fs.areas["slurm"] != "":
        fs.areas["slurm"] = ""  # the table failed (not in a job) but the variables say more


def areas_of(sets: Iterable[FactSet]) -> list[str]:
    """Every area any of ``sets`` has, in a stable reading order."""
    order = ["code", "subdir", "package", "python", "frameworks", "blas", "cuda", "gpu", "cpu", "env",
             "threads", "platform", "toolchain", "slurm", "target", "lockfiles"]
    seen = {a for s in sets for a in s.areas}
    return [a for a in order if a in seen] + sorted(seen - set(order))
