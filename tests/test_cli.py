"""The CLI: snapshot output options, show, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli

GOLDEN = Path(__file__).parent / "data" / "manifest.example.toml"


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def test_snapshot_to_stdout_json(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["snapshot", "--python", sys.executable, "-o", "-", "--format", "json", "-q"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["envlock"]["schema"] == 1
    assert data["target"]["chosen-by"] == "--python"


def test_snapshot_refuses_to_overwrite(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "m.toml"
    out.write_text("precious")
    res = runner.invoke(cli, ["snapshot", "--python", sys.executable, "-o", str(out)])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines()[-1] == f"Error: {out} exists; use --force to replace it"
    assert out.read_text() == "precious"
    res = runner.invoke(cli, ["snapshot", "--python", sys.executable, "-o", str(out), "--force"])
    assert res.exit_code == 0
    assert out.read_text().startswith("[envlock]")


def test_placeholders(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "123456")
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(cli, ["snapshot", "--python", sys.executable, "-o", "nodes/{host}-{job}.toml"])
    assert res.exit_code == 0, res.output
    import socket

    assert (tmp_path / "nodes" / f"{socket.gethostname().split('.')[0]}-123456.toml").exists()
    res = runner.invoke(cli, ["snapshot", "--python", sys.executable, "-o", "{nope}.toml"])
    assert res.exit_code == 2
    assert "unknown placeholder" in res.stderr


def test_target_reported(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["snapshot", "--python", sys.executable, "-o", str(tmp_path / "m.toml")])
    assert res.exit_code == 0
    assert "chosen by --python" in res.stderr
    assert "wrote" in res.stderr


def test_bad_target_one_line(runner: CliRunner, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "manifest.toml").write_text("")  # the README's first step leaves one behind
    for args in ([], ["-o", "manifest.toml"]):
        res = runner.invoke(cli, ["snapshot", "--prefix", "/nonexistent/env", *args])
        assert res.exit_code == 2
        # the wrong target is the error, not the existing output file
        assert res.stderr.strip() == "Error: --prefix /nonexistent/env: no such directory"


def test_show_golden(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["show", str(GOLDEN)])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "taken 2026-11-29T12:00:00Z on node17" in out
    assert "target: conda /opt/conda/envs/md (chosen by CONDA_PREFIX)" in out
    assert "Intel(R) Xeon(R) Gold 6248R" in out
    assert "3 Python distributions, 3 conda packages" in out
    rows = [line.split() for line in out.splitlines()]
    assert ["numpy", "1.26.4", "conda", "(numpy)"] in rows
    assert ["libblas", "3.9.0", "conda", "conda-forge", "21_linux64_openblas"] in rows
    assert "overwritten by pip" in out


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("not = [valid", "malformed TOML"),
        ("", "empty file"),
        # show reads any format: a TOML file of none of them is "unknown format"
        ("[project]\nname='x'\n", "unknown format (expected an envlock manifest"),
        ("[envlock]\nschema = 9\n", "manifest schema 9 is newer"),
    ],
    ids=["bad-toml", "empty", "not-manifest", "newer"],
)
def test_show_bad_files_exit_2_one_line(runner: CliRunner, tmp_path: Path, content: str, fragment: str) -> None:
    p = tmp_path / "m.toml"
    p.write_text(content)
    res = runner.invoke(cli, ["show", str(p)])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0]
    assert "Traceback" not in res.output


def test_show_missing_file(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["show", "/nonexistent.toml"])
    assert res.exit_code == 2
    assert res.stderr.strip() == "Error: /nonexistent.toml: no such file"


def test_python_dash_m_and_console_script(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "envlock", "--help"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert out.returncode == 0
    assert "snapshot" in out.stdout and "show" in out.stdout


def test_the_help_text_is_clicks_rendering() -> None:
    """``envlock._helptext`` (what ``envlock --help`` writes without click) is what click
    renders now: regenerate it with ``python -m envlock._helpgen`` when the CLI changes."""
    from envlock import _helpgen, _helptext

    assert _helptext.WIDTH == _helpgen.WIDTH
    assert _helptext.HELP == _helpgen.render(), "run: python -m envlock._helpgen"
    assert Path(_helptext.__file__).read_text() == _helpgen.source()


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]])
def test_help_and_version_without_click(args: list[str]) -> None:
    """The console script answers ``--help``/``-h``/``--version`` at 80 columns without
    importing click, with click's own bytes and status; ``| head -1`` ends quietly."""
    code = ("import sys\nsys.argv = ['envlock', *sys.argv[1:]]\n"
            "import atexit\natexit.register(lambda: print(sorted(m for m in sys.modules "
            "if m.startswith('click')), file=sys.stderr))\n"
            "from envlock._entry import main\nmain()\n")
    env = {**os.environ, "COLUMNS": "80"}
    ours = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=60, env=env)
    clicks = subprocess.run([sys.executable, "-c", "import sys; from envlock.cli import cli; "
                             f"cli.main({args!r}, prog_name='envlock')"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert ours.returncode == clicks.returncode == 0
    assert ours.stdout == clicks.stdout and ours.stdout.startswith(("Usage: envlock", "envlock, "))
    assert ours.stderr == ""  # no teardown ran, and click was never imported
    piped = subprocess.run(f"{sys.executable!s} -m envlock {args[0]} | head -c 5",
                           shell=True, capture_output=True, text=True, timeout=60, env=env)
    assert piped.stdout in ("Usage", "envlo") and piped.stderr == ""


def test_help_imports_nothing_heavy() -> None:
    """`envlock --help` must not import rich, elftools, tomli_w, packaging or the probes."""
    code = (
        "import sys\nfrom envlock.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('rich', 'elftools', 'tomli_w', 'packaging', 'yaml') or m.startswith('envlock.probes')]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "80"})
    assert "HEAVY []" in out.stdout, out.stdout


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["snapshot", "--bogus"], "Error: No such option '--bogus'. (see 'envlock snapshot --help')"),
        (["nosuch"], "Error: No such command 'nosuch'. (see 'envlock --help')"),
        (["show", "/"], "Error: Invalid value for 'MANIFEST': File '/' is a directory. (see 'envlock show --help')"),
    ],
    ids=["option", "command", "directory"],
)
def test_usage_errors_are_one_line(args: list[str], line: str) -> None:
    out = subprocess.run([sys.executable, "-m", "envlock", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [line]
    assert out.stdout == ""


def test_interrupt_is_one_line(tmp_path: Path) -> None:
    """SIGINT (Ctrl-C, a scheduler's signal) while the target interpreter hangs: one line, exit 130."""
    import signal
    import time

    hang = tmp_path / "env" / "bin" / "python"
    hang.parent.mkdir(parents=True)
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-m", "envlock", "snapshot", "--python", str(hang), "-o", "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert [ln for ln in err.splitlines() if ln.strip()] == ["Error: interrupted"]


@pytest.mark.parametrize(("args", "message"), [
    (["verify", "--timeout", "1e400"], "'--timeout': 1e400 is not a finite number in the range 0.1 to 86400"),
    (["verify", "--timeout", "nan"], "'--timeout': nan is not a finite number"),
    (["verify", "--timeout", "-1"], "'--timeout': -1 is not a finite number"),
    (["bisect", "a", "b", "--rtol", "inf", "--", "true"], "'--rtol': inf is not a finite number"),
    (["bisect", "a", "b", "--repeat", "99999999999999999999999", "--", "true"],
     "'--repeat': 99999999999999999999999 is not in the range 1<=x<=1000"),
])
def test_numbers_that_are_not_finite_are_usage_errors(runner: CliRunner, args, message) -> None:
    """``float("1e400")`` is inf and nan compares false with every bound: both were accepted
    (a traceback from time_t, every check "not within nan s"); now one usage line, exit 2."""
    res = runner.invoke(cli, args)
    assert res.exit_code == 2
    assert message in res.stderr and "Traceback" not in res.output


@pytest.mark.parametrize("command", [["diff", "m.toml", "copy.toml"], ["show", "--all", "m.toml"],
                                     ["diff", "--format", "markdown", "m.toml", "copy.toml"]])
def test_a_reader_that_stops_early_does_not_change_the_exit_status(tmp_path: Path, command) -> None:
    """`envlock diff a a | head -1` under `set -o pipefail`: identical is still exit 0 (rich's
    own broken-pipe handling exits 1, which reads as "different")."""
    from envlock.manifest import PipPackage
    from envlock.manifest import _toml
    from tests.diff.conftest import SITE, build_manifest

    many = [PipPackage(name=f"pkg-{i}", version="1.0", location=SITE) for i in range(4000)]
    text = _toml.dumps(build_manifest(extra_pip=many))
    (tmp_path / "m.toml").write_text(text)
    (tmp_path / "copy.toml").write_text(text)
    p = subprocess.Popen([sys.executable, "-m", "envlock", *command], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline()
    p.stdout.close()  # the reader goes away after one line, as `head -1` does
    _out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert b"Traceback" not in err and b"Error" not in err


def test_ctrl_c_in_verify_is_one_line(tmp_path: Path) -> None:
    """click prints an empty line before its own Abort; envlock's commands say one line."""
    import signal
    import time

    pidfile = tmp_path / "pid"
    hang = tmp_path / "env" / "bin" / "python"
    hang.parent.mkdir(parents=True)
    hang.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nsleep 30\n")
    hang.chmod(0o755)
    p = subprocess.Popen([sys.executable, "-m", "envlock", "verify", "--python", str(hang)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    _out, err = p.communicate(timeout=30)
    assert p.returncode == 130
    assert err.splitlines() == ["Error: interrupted"]


@pytest.mark.parametrize("program", ["/bin/true", "script"])
def test_snapshot_of_a_program_that_is_not_python_is_an_error(runner: CliRunner, tmp_path: Path,
                                                              program: str) -> None:
    """It runs, but does not answer as Python: a manifest of it would describe another
    environment ("system /" before)."""
    if program == "script":
        p = tmp_path / "env" / "bin" / "python"
        p.parent.mkdir(parents=True)
        p.write_text("#!/bin/sh\necho hello\n")
        p.chmod(0o755)
        program = str(p)
    res = runner.invoke(cli, ["snapshot", "--python", program, "-o", "-"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"Error: --python {program}: not a working Python interpreter (")


def test_empty_or_wrong_output_paths_are_one_usage_line(runner: CliRunner, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(cli, ["snapshot", "-o", ""])  # the click group: main() makes it one line
    assert res.exit_code == 2 and res.stderr.strip().splitlines()[-1] == (
        "Error: -o needs a file name (or - for standard output)")
    os.mkfifo(tmp_path / "fifo")
    for where, message in (("fifo", "Error: --dir fifo: exists and is not a directory"),
                           ("", "Error: --dir: an empty directory name")):
        res = runner.invoke(cli, ["run", "--dir", where, "--", "true"])
        assert res.exit_code == 2 and res.stderr.strip() == message


def test_verify_reads_conda_lock_s_explicit_lock_as_diff_and_restore_do(runner: CliRunner) -> None:
    explicit = (Path(__file__).parent / "formats" / "foreign"
                / "pangeo-data__pangeo-docker-images__pytorch-notebook_conda-linux-64.lock")
    res = runner.invoke(cli, ["verify", "--lock", str(explicit), "--python", sys.executable,
                              "--format", "json"])
    doc = json.loads(res.stdout)
    assert "unknown lockfile kind" not in res.output
    assert [f["title"] for f in doc["findings"] if f["id"] == "packages.missing"] == [
        f"lockfile {explicit.name} holds conda packages but the target is not a conda environment"]


@pytest.mark.parametrize("columns", [None, "30", "60", "100", "abc", "-5"])
def test_help_width_is_clicks_own(columns: str | None) -> None:
    """``envlock --help`` computes click's help width without :mod:`shutil`
    (``cli._help_width``); the text is what click lays out itself, in a child whose stdout is
    a pipe, and in one whose stdout is a real terminal of 97 and 45 columns (a pty)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    clicks = [sys.executable, "-c", "import sys; from envlock.cli import cli; "
              "cli.main(['--help'], prog_name='envlock')"]
    ours = [sys.executable, "-m", "envlock", "--help"]
    got = subprocess.run(ours, capture_output=True, text=True, timeout=60, env=env)
    want = subprocess.run(clicks, capture_output=True, text=True, timeout=60, env=env)
    assert got.returncode == want.returncode == 0
    assert got.stdout == want.stdout
    if columns is None:
        for cols in (97, 45):
            assert _in_pty(ours, cols, env) == _in_pty(clicks, cols, env)


def _in_pty(argv: list[str], columns: int, env: dict[str, str]) -> bytes:
    """What ``argv`` writes to a pseudo-terminal of ``columns`` columns."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, env=env)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=60)
    finally:
        os.close(master)
    return out


def test_a_finished_diff_ends_the_program_at_once(tmp_path: Path) -> None:
    """Run as the program, ``envlock diff`` and ``envlock --help`` end the process once their
    output is flushed (``envlock._exit``): the status and every byte are there, and no
    interpreter teardown runs (an ``atexit`` handler does not); called with an ``argv`` by a
    program, ``main`` returns through ``SystemExit`` as before."""
    from envlock.manifest._toml import dumps

    m = tmp_path / "m.toml"
    m.write_text(dumps({"envlock": {"schema": 1}, "python": {"status": "ok", "version": "3.11.8"}}))
    n = tmp_path / "n.toml"
    n.write_text(dumps({"envlock": {"schema": 1}, "python": {"status": "ok", "version": "3.12.1"}}))
    head = ("import atexit, sys\natexit.register(lambda: print('TEARDOWN', file=sys.stderr))\n"
            "from envlock.cli import main\n")
    for argv, code in (([str(m), str(n)], 1), ([str(m), str(m)], 0)):
        program = subprocess.run([sys.executable, "-c", head + f"sys.argv = ['envlock', 'diff', *{argv!r}]\nmain()"],
                                 capture_output=True, text=True, timeout=60)
        called = subprocess.run([sys.executable, "-c", head + f"main(['diff', *{argv!r}])"],
                                capture_output=True, text=True, timeout=60)
        assert program.returncode == called.returncode == code
        assert program.stdout == called.stdout and "envlock diff:" in program.stdout
        assert "TEARDOWN" not in program.stderr and "TEARDOWN" in called.stderr
    helped = subprocess.run([sys.executable, "-c", head + "sys.argv = ['envlock', '--help']\nmain()"],
                            capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "Commands:" in helped.stdout
    assert "TEARDOWN" not in helped.stderr
    failed = subprocess.run([sys.executable, "-c", head + f"sys.argv = ['envlock', 'diff', {str(m)!r}]\nmain()"],
                            capture_output=True, text=True, timeout=60)
    assert failed.returncode == 2 and "TEARDOWN" in failed.stderr  # an error exits as Python does
