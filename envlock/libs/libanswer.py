"""The loader's answer as a manifest records it (``[libraries.answer]``), and its reuse.

``envlock snapshot`` runs the loader model for torch; ``envlock verify --manifest`` in the job's
prologue would run it again for the same question.  So the snapshot records, beside
``[libraries]``, the loader's findings in full with two digests: of the question
(:func:`envlock.libs.cachekey.answer_key` — module, interpreter and its signature, ``sys.path``,
prefix, root, working directory, host, CPU flags, uid, the loader's variables — with envlock's
version and code, :func:`envlock.cache.key_digest`) and of the signature of every input
(:func:`envlock.cache.files_digest`: device, inode, size, mtime, ctime, or absent).  verify
reuses the findings only while both digests are the same now: the rule of envlock's cache
(``docs/cache.md``), "faster, never different".

The inputs are those of the cache's entries (:func:`envlock.libs.cachekey.witness_paths`), less
each file tried and not found whose directory is an input too (creating, renaming or linking a
file into a directory changes the directory's mtime and ctime).  Only the paths the loader's
report alone names (:func:`~envlock.libs.cachekey.report_paths`) are written; the others
(:func:`~envlock.libs.cachekey.context_paths`) follow from the question and are listed again.
An answer whose inputs changed while it was computed (:func:`envlock.cache.racy`), or that
redaction would change (the manifest writer redacts, verify's fresh answer would not be), is
not recorded.  Importing this module loads no part of the loader model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from envlock import cache as _cache
from envlock.libs.cachekey import answer_key
from envlock.libs.cachekey import context_paths
from envlock.libs.cachekey import report_paths

if TYPE_CHECKING:
    from envlock.manifest.librariestable import LibraryAnswer, LibraryFinding

__all__ = ["NAMESPACE", "question_digest", "record_answer", "reusable_findings"]

#: The namespace of the question's digest (:func:`envlock.cache.key_digest`).
NAMESPACE = "libraries-answer"


def question_digest(*, module: str, exe: str, sys_path: Sequence[str], prefix: str | None, root: str,
                    environ: Mapping[str, str]) -> str:
    """The hex digest naming the loader's question for ``module`` (:func:`answer_key`, with
    envlock's version and code); the parameters are :func:`answer_key`'s."""
    key = answer_key(module=module, exe=exe, sys_path=sys_path, prefix=prefix, root=root,
                     environ=environ, purpose=NAMESPACE)
    return _cache.key_digest(NAMESPACE, key)


def record_answer(report: Any, *, module: str, exe: str, sys_path: Sequence[str], prefix: str | None,
                  root: str, environ: Mapping[str, str], started_ns: int) -> LibraryAnswer | None:
    """``[libraries.answer]`` for the loader's ``report`` on ``module`` (the other parameters
    are the question's, as :func:`question_digest`), or ``None`` when it cannot vouch for
    itself: an input changed at most :data:`envlock.cache.RACY_NS` before ``started_ns``
    (:func:`time.time_ns` when the analysis started) or later, or redaction would change it."""
    from envlock.cachesecrets import redaction_changes
    from envlock.manifest import _model
    from envlock.manifest.librariestable import LibraryAnswer

    context = context_paths(module, sys_path, prefix, root)
    named = report_paths(report) - context
    every = named | context
    kept = sorted(p for p in named
                  if not (_cache.signature(p) is None and os.path.dirname(p) in every))
    digest, witnesses = _cache.files_digest([*kept, *context])
    if _cache.racy(witnesses, started_ns):
        return None
    answer = LibraryAnswer(
        key=question_digest(module=module, exe=exe, sys_path=sys_path, prefix=prefix, root=root,
                            environ=environ),
        inputs=digest, paths=tuple(kept), findings=tuple(_finding(f) for f in report.findings))
    if redaction_changes(_model.to_dict(answer)):
        return None
    return answer


def _finding(f: Any) -> LibraryFinding:
    from envlock.manifest.librariestable import LibraryFinding

    fix = getattr(f, "fix", ())
    return LibraryFinding(
        id=f.id, severity=f.severity, title=getattr(f, "title", "") or "", cause=f.cause,
        evidence=tuple(getattr(f, "evidence", ()) or ()),
        fix=tuple(fix) if not isinstance(fix, str) else (fix,),
        library=getattr(f, "library", None), requester=getattr(f, "requester", None),
        consequence_of=getattr(f, "consequence_of", None))


def reusable_findings(answer: LibraryAnswer | None, *, module: str, exe: str, sys_path: Sequence[str],
                      prefix: str | None, root: str,
                      environ: Mapping[str, str]) -> tuple[LibraryFinding, ...] | None:
    """The findings of ``answer`` (a manifest's ``[libraries.answer]``) when it answers this
    question (the parameters are :func:`question_digest`'s) and every input it was computed
    from is unchanged, else ``None`` (no answer recorded — an older manifest —, another
    question, a changed input: the model must run).  The inputs are recorded for the
    :func:`envlock.cache.memo` computation running in this thread, if any."""
    if answer is None:
        return None
    if answer.key != question_digest(module=module, exe=exe, sys_path=sys_path, prefix=prefix, root=root,
                                     environ=environ):
        return None
    paths = [*answer.paths, *context_paths(module, sys_path, prefix, root)]
    digest, _witnesses = _cache.files_digest(paths)
    if digest != answer.inputs:
        return None
    outer = _cache.current()
    if outer is not None:
        outer.files(paths)
    return answer.findings
