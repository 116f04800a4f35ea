"""Helpers shared by the CLI commands: error handling and target options."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click
import math

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["handle_errors", "target_options", "fail", "Finite", "will_exit", "pipe_safe",
           "Interrupted"]

#: the exit status a command has decided on before it writes its output (:func:`will_exit`)
_DECIDED: list[int] = []


class Interrupted(Exception):
    """Ctrl-C (SIGINT) during a command, carried past click (which would print an empty line
    before its own ``Abort``) to :func:`envlock.cli.main`, which says ``Error: interrupted``."""


def will_exit(code: int) -> int:
    """Say the exit status before writing the output: if the reader of stdout goes away
    (``envlock diff a b | head -1``), envlock still exits with it, not with a write error.

    :returns: ``code``.
    """
    _DECIDED[:] = [code]
    return code


def pipe_safe(console: Any) -> Any:
    """A :class:`rich.console.Console` that, when stdout's reader goes away, exits with the
    status the command decided on (:func:`will_exit`) instead of rich's own ``SystemExit(1)``
    (``Console.on_broken_pipe``, which rich documents for overriding).

    :returns: ``console``.
    """
    console.on_broken_pipe = _reader_gone
    return console


def _reader_gone() -> None:
    """stdout's reader closed the pipe: send the rest of the output, and Python's final flush,
    to /dev/null, and exit with the status the command decided on (0 when it decided none)."""
    from envlock._io import null_fd

    try:
        null_fd(sys.stdout.fileno(), inheritable=True)
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(_DECIDED[0] if _DECIDED else 0)


class Finite(click.ParamType):
    """A finite float in ``[low, high]``: ``nan``, ``inf`` and ``1e400`` (which float() reads
    as ``inf``) are refused with a usage error, as a value out of range is.

    :param low, high: the bounds, inclusive (seconds for a timeout, a ratio for a tolerance).
    """

    name = "float"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x) or not self.low <= x <= self.high:
            self.fail(f"{value} is not a finite number in the range {self.low:g} to {self.high:g}",
                      param, ctx)
        return x


def fail(message: str, code: int = 2) -> None:
    """Print ``Error: message`` on stderr and exit with ``code`` (2: envlock could not run)."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


def handle_errors(func: F) -> F:
    """Turn :class:`~envlock.errors.EnvlockError` and ``OSError`` into one line and exit 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from envlock.errors import EnvlockError

        try:
            result = func(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return result
        except BrokenPipeError:
            _reader_gone()
        except KeyboardInterrupt:
            raise Interrupted from None
        except EnvlockError as exc:
            fail(str(exc), getattr(exc, "exit_code", 2))
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            fail(f"{where}{exc.strerror or exc}")
        return None

    return wrapper  # type: ignore[return-value]


#: ``restore``'s words for the selection options: the install to make, not the one made
_INSTALL_HELP = {
    "no_dev": "Leave out the dev group (uv sync --no-dev, poetry install --without dev).",
    "all_groups": "Install every dependency group of the lock (pdm: -G :all).",
    "all_extras": "Install every extra of the lock (pdm: -G :all).",
    "groups": "Also install this dependency group (uv sync --group, poetry install --with, "
              "pdm install -G); repeatable.",
    "extras": "Also install this extra (uv sync --extra, poetry install -E, pdm install -G); "
              "repeatable. Without any of these: what the lock's own tool installs with no option.",
}


def selection_options(func: F | None = None, *, installs: bool = False) -> Any:
    """Add ``uv sync``'s ``--extra NAME`` (also ``-E``/``--extras``, as ``conda-lock install``
    takes it), ``--group NAME`` (repeatable), ``--all-extras``, ``--all-groups`` and
    ``--no-dev``: which install of a lock to compare with (``installs=True``: to make, as
    ``restore`` takes them, ``@selection_options(installs=True)``); the
    command gets one ``requested`` (:class:`envlock.formats.markers.Requested`)."""
    if func is None:
        return functools.partial(selection_options, installs=installs)
    @functools.wraps(func)
    def wrapper(*args: Any, extras: tuple[str, ...] = (), groups: tuple[str, ...] = (),
                all_extras: bool = False, all_groups: bool = False, no_dev: bool = False,
                **kwargs: Any) -> Any:
        from envlock._selection import Requested

        kwargs["requested"] = Requested(tuple(extras), tuple(groups), all_extras, all_groups,
                                        no_dev)
        return func(*args, **kwargs)

    said = _INSTALL_HELP if installs else {  # each tool's install docs: formats/lockchoice.py
        "no_dev": "The install left out the dev group(s): uv sync --no-dev, pdm install --prod "
                  "(every dev group), poetry install --without dev, conda-lock install --no-dev.",
        "all_groups": "The install took every dependency group of the lock (pdm install -G "
                      ":all, poetry install --all-groups).",
        "all_extras": "The install took every extra of the lock (pdm install -G :all, poetry "
                      "install --all-extras).",
        "groups": "A dependency group the install took (uv sync --group, pdm install -G, poetry "
                  "install --with); repeatable. Each lock's own defaults come too: uv's default "
                  "groups, pdm's dev groups, poetry's main and non-optional groups.",
        "extras": "An extra or optional category the install took (uv sync --extra, pdm "
                  "install -G, poetry install -E, conda-lock install -E); repeatable. Without "
                  "any of these: a uv, pdm or poetry lock's install is inferred from what is "
                  "installed, and said; conda-lock's is main and dev.",
    }
    opts = [
        click.option("--no-dev", "no_dev", is_flag=True, help=said["no_dev"]),
        click.option("--all-groups", "all_groups", is_flag=True, help=said["all_groups"]),
        click.option("--all-extras", "all_extras", is_flag=True, help=said["all_extras"]),
        click.option("--group", "groups", multiple=True, metavar="NAME", help=said["groups"]),
        click.option("--extra", "-E", "--extras", "extras", multiple=True, metavar="NAME",
                     help=said["extras"]),
    ]
    out: Any = wrapper
    for opt in opts:
        out = opt(out)
    return cast(F, out)


def target_options(func: F) -> F:
    """Add ``--python PATH`` and ``--prefix DIR`` (mutually exclusive) to a command."""
    func = click.option(
        "--prefix",
        "prefix",
        type=click.Path(file_okay=False, path_type=str),
        help="A conda prefix or venv directory to observe.",
    )(func)
    func = click.option(
        "--python",
        "python",
        type=click.Path(dir_okay=False, path_type=str),
        help="The interpreter of the environment to observe.",
    )(func)
    return func


def index_admission_options(who: str) -> Callable[[F], F]:
    """Add ``--allow-index URL`` (repeatable) and ``--trust-lockfile-indexes``: the indexes a
    file from elsewhere may bring and that the user's own configuration does not name
    (docs/trust.md).  ``who`` begins each help text ("Let a lockfile use")."""
    def add(func: F) -> F:
        func = click.option("--trust-lockfile-indexes", is_flag=True,
                            help=f"{who} every index it names (see docs/trust.md).")(func)
        return click.option("--allow-index", "allow_index", multiple=True, metavar="URL",
                            help=f"{who} this index (or --find-links page, or --trusted-host "
                                 "host of this URL) that your own pip/uv configuration does not "
                                 "name (repeatable; see docs/trust.md).")(func)
    return add

