"""The state of a git checkout: commit, branch, dirty flag, a hash of the uncommitted diff.

Runs ``git`` through :func:`envlock._run.run` (each call with a timeout) with
``GIT_OPTIONAL_LOCKS=0`` so that observing a repository never takes its index lock, and with
``GIT_DIR``/``GIT_WORK_TREE`` removed so the caller's settings cannot redirect it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping

from envlock._io import read_head
from envlock._run import Runner, RunResult, run
from envlock.manifest import GitInfo, GitRemote, Status
from envlock.probes.world import World
from envlock.redact import redact_url
from envlock._io import InputError, read_bytes
from envlock.redact import printable

__all__ = ["GIT_TIMEOUT", "git_env", "probe_git", "untracked_files"]

#: Seconds allowed for each git command.
GIT_TIMEOUT = 5.0

_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")


def git_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment envlock runs git with: no redirection, no locks, C locale, no prompts."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if k not in _DROP}
    env.update({"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})
    return env


#: The first bytes of a file envlock wrote: a manifest or run record (TOML, JSON), a
#: ``--save-patch`` file.  Such a file is envlock's output about the code, never the code.
_OWN_HEADS = (b"[envlock]", b'{"envlock"', b"[run]", b"# envlock --save-patch")
_OWN_SUFFIXES = (".toml", ".json", ".patch")


def _envlock_output(top: str, name: str) -> bool:
    """Whether the untracked file ``name`` (relative to ``top``) is one envlock wrote: a
    manifest, run record or patch by its first bytes, or a run directory's lock file."""
    if os.path.basename(name) == ".envlock-run.lock":
        return True
    if not name.endswith(_OWN_SUFFIXES):
        return False
    head = read_head(os.path.join(top, name), 64)
    return head is not None and head.lstrip().startswith(_OWN_HEADS)


def untracked_files(top: str, status_z: str) -> list[str]:
    """The untracked, not ignored files of ``git status --porcelain=v2 -z --untracked-files=all``
    output (every file, as ``git ls-files --others --exclude-standard`` lists them), less those
    envlock wrote (:func:`_envlock_output`): a second snapshot does not see the first
    manifest as a change of the code.  ``[git] untracked`` and the ``--save-patch`` header
    count this one list.

    :param top: the top of the work tree (git's paths are relative to it).
    :param status_z: git's NUL-separated status records.
    :returns: the file names, sorted.
    """
    names = (rec[2:] for rec in status_z.split("\0") if rec.startswith("? "))
    return sorted(n for n in names if not _envlock_output(top, n))


def _status(result_status: str) -> Status:
    return "timeout" if result_status == "timeout" else ("absent" if result_status == "absent" else "error")


def probe_git(world: World, *, path: str | os.PathLike[str]) -> GitInfo:
    """Describe the git checkout containing ``path``.

    :param world: what is observed: git runs through ``world.runner`` with ``world.environ``
        (less the ``GIT_DIR``-style redirections, see :func:`git_env`), each command given
        ``world.timeout`` seconds (the snapshot's world: :data:`GIT_TIMEOUT`).
    :param path: any directory inside the working tree.
    :returns: :class:`GitInfo`; ``status="absent"`` when ``path`` is not in a git work tree or
        git is not installed (``error`` says which), ``"timeout"``/``"error"`` when git failed.
    """
    env = git_env(world.environ)
    runner, timeout = world.runner, world.timeout
    where = str(path)
    if not os.path.isdir(where):
        return GitInfo(status="absent", source="git", error=f"{where}: no such directory")

    def git(*args: str) -> RunResult:
        return runner(["git", "-C", where, *args], timeout=timeout, env=env)

    top = git("rev-parse", "--show-toplevel")
    if top.status == "absent":
        return GitInfo(status="absent", source="git", error="git is not installed")
    if top.status == "failed":
        detail = top.detail
        if "not a git repository" in (top.stderr or ""):
            return GitInfo(status="absent", source="git", error=f"{where}: not a git repository")
        return GitInfo(status="error", source="git", error=detail)
    if not top.ok:
        return GitInfo(status=_status(top.status), source="git", error=top.detail)
    toplevel = top.stdout.strip()

    st = git("status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all")
    if not st.ok:
        return GitInfo(status=_status(st.status), source="git", path=toplevel, error=st.detail)
    commit = branch = None
    dirty = False
    for record in st.stdout.split("\0"):
        if record.startswith("# branch.oid "):
            oid = record.split(" ", 2)[2]
            commit = None if oid == "(initial)" else oid
        elif record.startswith("# branch.head "):
            head = record.split(" ", 2)[2]
            branch = None if head == "(detached)" else head
        elif record.startswith(("1 ", "2 ", "u ")):
            dirty = True
    untracked = len(untracked_files(toplevel, st.stdout))

    describe = None
    if commit:
        # Not ``--dirty``: that refreshes and rewrites the index even with GIT_OPTIONAL_LOCKS=0.
        d = git("describe", "--tags", "--always")
        describe = (d.stdout.strip() + ("-dirty" if dirty else "")) if d.ok else None
    diff_sha = None
    if dirty and commit:
        diff = git("diff", "HEAD", "--binary", "--no-color", "--no-ext-diff")
        if diff.ok:
            diff_sha = hashlib.sha256(diff.stdout.encode("utf-8")).hexdigest()
    remotes: list[GitRemote] = []
    r = git("config", "--get-regexp", r"^remote\..*\.url$")
    if r.ok:
        for line in r.stdout.splitlines():
            key, _, url = line.partition(" ")
            name = key[len("remote."):-len(".url")]
            remotes.append(GitRemote(name=name, url=redact_url(url.strip())))
    return GitInfo(
        status="ok",
        source="git",
        path=toplevel,
        commit=commit,
        branch=branch,
        describe=describe,
        dirty=dirty,
        untracked=untracked,
        diff_sha256=diff_sha,
        remotes=tuple(sorted(remotes, key=lambda x: x.name)),
    )


#: Largest uncommitted diff ``--save-patch`` writes, in bytes (32 MiB); a larger one is not
#: written (a cut patch cannot be applied) and the patch file says why.
PATCH_CAP = 32 * 1024 * 1024


def make_patch(
    top: str,
    commit: str | None,
    *,
    runner: Runner = run,
    environ: Mapping[str, str] | None = None,
    cap: int = PATCH_CAP,
    timeout: float = 30.0,
) -> tuple[bytes, str | None]:
    """The ``--save-patch`` file for the checkout ``top``: a ``#`` header (commit, how to apply,
    the untracked file names), then ``git diff HEAD --binary`` byte for byte.

    ``git apply`` skips the lines before the first ``diff --git``, so the file applies as it
    is: ``git checkout <commit> && git apply --binary manifest.patch``.  Untracked files are
    listed by name only (their content is not in a diff).

    :param cap: the largest diff written, bytes; over it the diff is left out and the header
        says so.
    :returns: ``(file bytes, note)``; ``note`` says why the patch is incomplete, else ``None``.
    """
    import tempfile


    env = git_env(environ)
    note = None
    body = b""
    header = [f"# envlock --save-patch: the uncommitted changes of {top}",
              f"# against commit {commit or '(none yet)'}; apply to a checkout of it with:",
              "#   git apply --binary <this file>"]
    if commit is None:
        note = "the repository has no commit yet: there is no HEAD to diff against"
    else:
        with tempfile.TemporaryDirectory(prefix="envlock-patch-") as tmp:
            out = os.path.join(tmp, "diff")
            res = runner(["git", "-C", top, "diff", "HEAD", "--binary", "--no-color",
                          "--no-ext-diff", f"--output={out}"], timeout=timeout, env=env)
            if not res.ok:
                note = f"git diff failed: {res.detail}"
            else:
                size = os.path.getsize(out) if os.path.exists(out) else 0
                if size > cap:
                    note = (f"the diff is {size} bytes, over the cap of {cap} bytes: not saved "
                            "(commit or stash the changes)")
                else:
                    try:
                        body = read_bytes(out, limit=cap) if size else b""
                    except InputError as exc:
                        note = str(exc)
    untracked: list[str] = []
    res = runner(["git", "-C", top, "status", "--porcelain=v2", "-z", "--untracked-files=all"],
                 timeout=timeout, env=env)
    if res.ok:
        untracked = untracked_files(top, res.stdout)
    header.append(f"# untracked files (names only, not in the diff): {len(untracked)}")
    header += [f"#   {printable(n)}" for n in untracked]
    if note:
        header.append(f"# INCOMPLETE: {note}")
    head = ("\n".join(header) + "\n").encode("utf-8", "backslashreplace")
    return head + body, note
