"""How a command that has finished ends the process: at once, without the interpreter's
teardown, when envlock runs as the program (issue 26).

A command whose output is written and flushed, with nothing left to run (no file to close, no
child, no clean-up), says so with :func:`finished`; :func:`envlock.cli.main`, run as the console
script or ``python -m envlock`` (not called with an ``argv`` by a program), then ends the
process with that status by :func:`os._exit` once stdout and stderr flush
(:func:`end_at_once`): freeing every object of a 10,000-package diff one by one, and every
module, is the interpreter's work that no one waits for.  ``diff`` and ``envlock --help`` say
it; the other commands exit as Python does.
"""

from __future__ import annotations

import os
import sys

__all__ = ["FINISHED", "finished", "end_at_once"]

#: the status of the command that said it has finished (:func:`finished`), else empty
FINISHED: list[int] = []


def finished(code: int) -> int:
    """Say that the command's output is written and flushed and nothing is left to run.

    :returns: ``code``.
    """
    FINISHED[:] = [code]
    return code


def end_at_once(code: object) -> None:
    """End the process with ``code`` now when the command said it has finished with this
    status and stdout and stderr flush; else return (the normal exit follows).

    :param code: the status the process would exit with (``SystemExit.code``; ``None`` is 0).
    """
    status = 0 if code is None else code
    if not isinstance(status, int) or FINISHED != [status]:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return  # a closed pipe: the normal exit says it as it always did
    os._exit(status)
