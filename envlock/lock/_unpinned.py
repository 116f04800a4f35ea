"""The ``environment.yml`` conda-lock is handed when ``lock -c`` replaces the file's channels
and a conda executable solves (issue 23): the same ``channel::`` pins are dropped as on the
py-rattler path (:func:`envlock.lock._spec.unpin_channels`), so that both solvers are asked the
same question — conda-lock has no option to drop them, and with ``--channel`` overriding the
file's channels a ``pytorch::`` pin would make the conda executable find no candidate."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["unpinned_spec", "unpin_text"]


def unpin_text(text: str, dropped: Sequence[str]) -> str:
    """``text`` (an ``environment.yml``) with each ``channel::spec`` of ``dropped`` written as
    ``spec``, wherever it stands as a whole list item (block ``- pin`` or flow ``[pin, …]``,
    quoted or not); comments, selectors (``# [linux]``) and layout are kept, so conda-lock
    applies its own selector rule to the text as before.

    :param dropped: match specs as written in the file (:func:`unpin_channels`' second value).
    """
    for pin in sorted(set(dropped), key=len, reverse=True):
        rest = pin.split("::", 1)[1]
        where = re.compile(r"(?<![^\s'\"\[,\-])" + re.escape(pin) + r"(?=\s*(?:$|#|['\"\],]))",
                           re.MULTILINE)
        text = where.sub(rest.replace("\\", "\\\\"), text)
    return text


@contextlib.contextmanager
def unpinned_spec(spec: Path, platforms: Sequence[str], channels: Sequence[str]
                  ) -> Iterator[tuple[Path, list[str]]]:
    """The spec file to hand conda-lock for ``-c channels``, and the pins dropped (in the
    file's order, each once): ``spec`` itself when none is, else a rewritten copy beside it
    (so its relative paths, ``-r``/``-e`` lines, resolve as before; in the temporary directory
    when ``spec``'s directory is not writable), removed on exit.

    :raises ManifestError, UntrustedValueError: as :func:`envlock.lock._spec.read_environment_yml`.
    """
    from envlock.lock._spec import _channel_url, read_environment_yml, unpin_channels

    urls = tuple(_channel_url(c, Path.cwd()) for c in channels)
    dropped: list[str] = []
    # the pins each platform's selectors keep; with no -c the file's channels stand, pins too
    for platform in platforms if channels else ():
        for pin in unpin_channels(read_environment_yml(spec, platform).conda, urls)[1]:
            if pin not in dropped:
                dropped.append(pin)
    if not dropped:
        yield spec, dropped
        return
    from envlock._io import write_file

    text = unpin_text(spec.read_text(encoding="utf-8"), dropped)
    with tempfile.TemporaryDirectory(prefix="envlock-unpinned-") as tmp:
        beside = spec.parent / f".envlock-{os.getpid()}-{os.urandom(4).hex()}-{spec.name}"
        try:  # create-or-fail, never through a link (envlock._io)
            name = write_file(beside, text)
        except OSError:  # the spec's directory is not writable
            name = write_file(Path(tmp) / spec.name, text)
        try:
            yield name, dropped
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name)
