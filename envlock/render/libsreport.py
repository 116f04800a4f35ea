"""Text rendering of ``envlock libs`` reports (:class:`envlock.libs.analysis.LibsReport`).

:func:`render_text` draws the tree of requests per extension file, the run-time loads and the
findings; :func:`render_why` lists every place tried for one name.  Both are iterative (a
NEEDED chain thousands deep renders) and pure: they return text.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from envlock.libs.config import describe_tunables

if TYPE_CHECKING:
    from envlock.libs.analysis import LibEntry, LibsReport

__all__ = ["fit", "render_text", "render_why"]

_RULE_TEXT = {
    "rpath": "RPATH",
    "runpath": "RUNPATH",
    "ld_library_path": "LD_LIBRARY_PATH",
    "ld.so.cache": "ld.so.cache",
    "default": "default dirs",
    "slash": "by path",
    "preload": "LD_PRELOAD",
    "already-loaded": "already loaded",
}


def _label(o: LibEntry) -> str:
    owner = f"  {o.owner}" if o.owner else "  (no package)"
    return owner


def render_text(report: LibsReport, *, check: dict[str, Any] | None = None) -> str:
    """The human-readable answer: a tree per extension file, run-time loads, findings."""
    lines = _header(report)
    lines += _tree(report)
    lines += _runtime(report)
    if report.errors:
        lines.append("")
        lines += [f"error: {e}" for e in report.errors]
    lines.append("")
    lines += _findings(report)
    if check is not None:
        lines += _check(check)
    return "\n".join(lines) + "\n"


def _header(report: LibsReport) -> list[str]:
    """The target, the loader's configuration, the interpreter's start-up objects."""
    lines: list[str] = []
    cfg = report.config
    wrapper = f"; started by the wrapper {report.launcher}" if report.launcher else ""
    if report.target == report.python:
        lines.append(f"target: {report.python} (the interpreter itself, as the main program{wrapper})")
    else:
        lines.append(f"target: {report.python} importing {report.target}"
                     + (f" ({wrapper[2:]})" if wrapper else ""))
    env_bits = [f"LD_LIBRARY_PATH={cfg.ld_library_path}" if cfg.ld_library_path else "LD_LIBRARY_PATH unset",
                f"LD_PRELOAD={cfg.ld_preload}" if cfg.ld_preload else "LD_PRELOAD unset"]
    if cfg.secure:
        env_bits = ["secure mode (AT_SECURE: LD_LIBRARY_PATH and LD_PRELOAD ignored, $ORIGIN restricted)"]
    lines.append(f"loader: glibc {'.'.join(map(str, cfg.glibc))}, {', '.join(env_bits)}, "
                 f"default dirs {':'.join(cfg.system_dirs)}")
    note = describe_tunables(cfg)
    if note:
        lines.append(f"tunables: {note}")
    startup = [o for o in report.objects if o.stage == "startup" and o.kind not in ("executable",)]
    if startup:
        lines.append("interpreter start-up: " + ", ".join(os.path.basename(o.path) for o in startup))
    lines.append("")
    return lines


#: A node of the drawn tree: (text, children).
_Node = tuple[str, list[Any]]


class _Tree:
    """The request tree of one report.  Nodes are built depth-first (the first request of an
    object expands it) and drawn afterwards, so that the connector of the last child *drawn*
    is └── even when later requests are not drawn.  Both walks are iterative: a NEEDED chain
    thousands deep renders, in time linear in the number of requests."""

    def __init__(self, report: LibsReport) -> None:
        self.by_id = {o.id: o for o in report.objects}
        self.children: dict[str, list[Any]] = {}
        seen_req: set[tuple[str, str]] = set()
        for r in report.requests:
            # The loader walks the DT_NEEDED of every object in each breadth-first pass, so the
            # same request repeats; the tree shows the first one.
            if r.kind == "needed" and (r.requester, r.name) not in seen_req:
                seen_req.add((r.requester, r.name))
                self.children.setdefault(r.requester, []).append(r)
        self.expanded: set[int] = set()

    def visit(self, r: Any) -> tuple[str, list[Any]] | None:
        """The line for request ``r`` and the requests to show under it (``None``: not
        shown).  Marks the object expanded, as a depth-first walk would, before its
        children are visited."""
        o = self.by_id.get(r.object_id) if r.object_id is not None else None
        if o is None:
            return (f"{r.name} => NOT FOUND ({r.error})", [])
        first = o.id not in self.expanded and o.name == r.name and o.requested_by == (r.requester or None) \
            and r.rule != "already-loaded"
        rule = _RULE_TEXT.get(r.rule or "", r.rule or "")
        if o.kind == "preload" and r.kind == "preload":
            rule = "LD_PRELOAD"
        shown = r.name if r.name == o.path else f"{r.name} => {o.path}"
        if not first:
            if o.stage == "startup" or o.kind == "interpreter" or o.rule in ("ld.so.cache", "default"):
                return None  # system libraries seen before: not repeated (see --why or JSON)
            how = "already loaded" if r.rule == "already-loaded" else f"{rule}, same file already loaded"
            return (f"{shown}  [{how}]", [])
        self.expanded.add(o.id)
        return (f"{shown}  [{rule}]{_label(o)}", self.children.get(o.path, []))

    def grow(self, requests: list[Any]) -> list[_Node]:
        """The tree under ``requests``, built with an explicit stack."""
        top: list[_Node] = []
        stack: list[tuple[list[_Node], Any]] = [(top, iter(requests))]
        while stack:
            kids, it = stack[-1]
            r = next(it, None)
            if r is None:
                stack.pop()
                continue
            got = self.visit(r)
            if got is None:
                continue
            text, below = got
            mine: list[_Node] = []
            kids.append((text, mine))
            if below:
                stack.append((mine, iter(below)))
        return top

    @staticmethod
    def draw(nodes: list[_Node], prefix: str) -> list[str]:
        lines: list[str] = []
        stack: list[tuple[list[_Node], int, str]] = [(nodes, 0, prefix)]
        while stack:
            level, i, pre = stack.pop()
            if i >= len(level):
                continue
            text, kids = level[i]
            last = i == len(level) - 1
            lines.append(f"{pre}{'└── ' if last else '├── '}{text}")
            stack.append((level, i + 1, pre))
            if kids:
                stack.append((kids, 0, pre + ("    " if last else "│   ")))
        return lines


def _tree(report: LibsReport) -> list[str]:
    """``import MODULE`` and the tree of what each extension file loads (or the main
    program's tree), with torch's notes."""
    lines: list[str] = []
    objs = report.objects
    tree = _Tree(report)
    roots = [r for r in report.requests if r.kind == "dlopen" and r.requester and
             not any(r is rt.resolution for rt in report.runtime)]
    stage_of = {o.id: o for o in objs}
    import_roots = [r for r in roots if r.object_id is not None and stage_of[r.object_id].stage == "import"
                    or r.object_id is None]
    if import_roots:
        lines.append(f"import {report.target}")
        lines += tree.draw(tree.grow(import_roots), "")
        notes = list(dict.fromkeys(o.via for o in objs if o.stage == "import" and o.via))
        for n in notes:
            lines.append(f"  note: {n}")
    elif report.files and objs:
        main = objs[0]
        lines.append(f"{main.path}")
        lines += tree.draw(tree.grow(tree.children.get(main.path, [])), "")
    if not report.files and not report.errors:
        lines.append(f"{report.target} has no extension modules: importing it loads no shared "
                     "object beyond the interpreter's (name an extension module to see its own).")
    return lines


def _runtime(report: LibsReport) -> list[str]:
    """The run-time dlopens, one line each."""
    if not report.runtime:
        return []
    by_id = {o.id: o for o in report.objects}
    lines = ["", "loaded later with dlopen (run-time, from the table in envlock.libs.runtime):"]
    for rt in report.runtime:
        r = rt.resolution
        caller = os.path.basename(rt.caller)
        if r.path is None:
            lines.append(f"  {rt.name} <- {caller} ({rt.when}): NOT FOUND")
        else:
            o = by_id.get(r.object_id) if r.object_id is not None else None
            owner = _label(o) if o else ""
            lines.append(f"  {rt.name} <- {caller} ({rt.when}): {r.path}  "
                         f"[{_RULE_TEXT.get(r.rule or '', r.rule)}]{owner}")
    return lines


def _findings(report: LibsReport) -> list[str]:
    """Each finding: its severity, id and title, then cause, evidence and fixes."""
    if not report.findings:
        return ["findings: none"]
    lines = [f"findings ({len(report.findings)}):"]
    for f in report.findings:
        then = "then (not reached by ld.so): " if f.consequence_of else ""
        lines.append(f"  {then}{f.severity} [{f.id}] {f.title}")
        lines.append(f"      cause: {f.cause}")
        for e in f.evidence:
            lines.append(f"      evidence: {e}")
        for x in f.fix:
            lines.append(f"      fix: {x}")
    return lines


def _check(check: dict[str, Any]) -> list[str]:
    """``--runtime``'s comparison of ``/proc/self/maps`` with the model."""
    lines = ["", f"--runtime: {check['status']}" + (f" ({check['error']})" if check.get("error") else ""),
             f"  {len(check['matched'])} files as predicted, {len(check['explained'])} explained, "
             f"{len(check['unexplained'])} unexplained"]
    for x in check["explained"]:
        lines.append(f"  explained: {x['path']}: {x['why']}")
    for x in check["unexplained"]:
        lines.append(f"  UNEXPLAINED: {x['path']}: {x['why']}")
    return lines


def render_why(report: LibsReport, name: str) -> str:
    """Every request of ``name``, with every place tried in order and the outcome."""
    reqs = report.requests_for(name)
    if not reqs:
        return f"{name}: never requested by {report.target} (not in any DT_NEEDED or known dlopen)\n"
    lines = []
    note = describe_tunables(report.config)
    if note:
        lines += [f"tunables: {note}", ""]
    by_id = {o.id: o for o in report.objects}
    runtime = {id(rt.resolution): rt for rt in report.runtime}
    for r in reqs:
        who = r.requester or "LD_PRELOAD"
        o = by_id.get(r.object_id) if r.object_id is not None else None
        why = ""
        if id(r) in runtime:
            why = f" ({runtime[id(r)].when})"
        elif r.kind == "dlopen" and o is not None and o.resolution_is(r) and o.via:
            why = f" ({o.via})"
        lines.append(f"{r.name} ({r.kind}) requested by {who}{why}:")
        if r.rule == "already-loaded":
            lines.append(f"  already loaded: {r.source}; nothing is searched")
        for i, a in enumerate(r.tried, 1):
            lines.append(f"  {i:3d}. {a.path}  [{a.source}]  {a.outcome}")
        if r.path:
            lines.append(f"  => {r.path}  (rule: {_RULE_TEXT.get(r.rule or '', r.rule)})")
        else:
            lines.append(f"  => not loaded: {r.error}")
        lines.append("")
    return "\n".join(lines)


_GUIDE = re.compile(r"^[│├└─ ]*")


def fit(text: str, width: int) -> str:
    """``text`` with each line wider than ``width`` columns folded, as a log needs it: after a
    space or a ``/`` (a path breaks between its directories), the continuation indented under
    its tree guides (``├── `` continues as ``│       ``, or ``│   │   `` when children follow).
    A piece with no break point is cut.

    :param width: columns (the terminal's, or 80 when the output is a file or pipe, as
        :func:`shutil.get_terminal_size` and rich's console decide it).
    """
    out: list[str] = []
    lines = text.split("\n")
    for n, line in enumerate(lines):
        if len(line) <= width:
            out.append(line)
            continue
        guide = _GUIDE.match(line).group(0)  # type: ignore[union-attr]
        nxt = _GUIDE.match(lines[n + 1]) if n + 1 < len(lines) else None
        below = nxt.group(0) if nxt else ""
        hang = guide.replace("├──", "│  ").replace("└──", "   ").replace("─", " ") + (
            "│   " if guide and len(below) > len(guide) else "    ")  # its children's guide goes on
        if len(hang) > width // 2:
            hang = "    "
        pieces = re.findall(r"[^ /]*[ /]|[^ /]+$", line[len(guide):])
        cur = guide
        for piece in pieces:
            while len(piece) > width - len(hang):  # no break point: cut
                room = width - len(cur)
                cur, piece = cur + piece[:room], piece[room:]
                out.append(cur.rstrip())
                cur = hang
            if len(cur) + len(piece.rstrip()) > width and cur.strip(" │"):
                out.append(cur.rstrip())
                cur = hang
            cur += piece
        out.append(cur.rstrip())
    return "\n".join(out)
