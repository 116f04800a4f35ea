"""``envlock run`` on a real job script: exit status, peak RSS against the kernel's own figure
and GNU time's, the orphan killed, the record complete; SIGTERM forwarded; Slurm grants."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, the parser that became 3.11's tomllib
    import tomli as tomllib

import pytest

from envlock.manifest import load
from envlock.manifest.processtables import run_from_dict
from tests.record.conftest import envlock_run, gone


def _lines(out: str, word: str) -> list[str]:
    return [ln.split()[1] for ln in out.splitlines() if ln.startswith(word + " ")]


def test_job_under_envlock_run(job: Path, tmp_path: Path) -> None:
    r = envlock_run(["--dir", "run1", "--", sys.executable, str(job)], tmp_path)
    assert r.returncode == 3, r.stderr  # the command's exit status, passed through
    assert _lines(r.stdout, "step") == ["0", "1", "2", "3"]  # stdout untouched
    orphan = int(_lines(r.stdout, "child")[0])
    hwm = int(_lines(r.stdout, "hwm")[0]) * 1024
    assert gone(orphan)  # killed, not left behind
    data = tomllib.loads((tmp_path / "run1" / "run.toml").read_text())
    rec = run_from_dict(data["run"])
    assert rec.outcome == "failed" and rec.exit_status == 3 and rec.exit_code == 3
    assert rec.command == (sys.executable, str(job)) and rec.cwd == str(tmp_path)
    assert rec.start and rec.end and rec.wall and rec.wall > 0.4
    assert rec.pid and rec.manifest == "manifest.toml"
    manifest = tmp_path / "run1" / "manifest.toml"
    import hashlib

    assert rec.manifest_sha256 == hashlib.sha256(manifest.read_bytes()).hexdigest()
    res = rec.resources
    assert res is not None and res.max_rss and res.peak_rss and res.samples > 0
    # the kernel's ru_maxrss of the job equals its own VmHWM (both in KiB pages), within 5 %
    assert abs(res.max_rss - hwm) <= 0.05 * hwm, (res.max_rss, hwm)
    assert res.peak_rss >= res.max_rss and res.peak_rss_tree
    assert res.cpu_user is not None and res.cpu_system is not None
    # sampling costs at most ~1 % of one core
    assert res.sampler_cpu is not None and res.sampler_cpu <= 0.01 * rec.wall + 0.005
    [left] = rec.children
    assert left.pid == orphan and left.action == "killed" and "time.sleep(120)" in left.command
    ids = [f.id for f in rec.findings]
    assert "run.leftover-children" in ids and "run.failed" in ids
    [f] = [f for f in rec.findings if f.id == "run.leftover-children"]
    assert f.title.startswith(f"1 child process outlived CMD ({orphan} ") and f.title.endswith(": killed")
    assert "outlived CMD" in r.stderr
    # readable by `show` (a manifest-shaped document: [envlock], [target], [run])
    m = load(str(tmp_path / "run1" / "run.toml"))
    assert m.extra["run"]["outcome"] == "failed"
    # a second run into the same directory is refused (exit 2, one line) without --force
    again = envlock_run(["--dir", "run1", "--", "true"], tmp_path)
    assert again.returncode == 2 and again.stderr.startswith("Error: ") and "--force" in again.stderr


@pytest.mark.skipif(not os.access("/usr/bin/time", os.X_OK),
                    reason="GNU time (/usr/bin/time) is not installed (apt-get install time)")
def test_peak_rss_matches_gnu_time(job: Path, tmp_path: Path) -> None:
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as o, err.open("w") as e:  # files: the orphan keeps pipes open
        subprocess.run(["/usr/bin/time", "-v", sys.executable, str(job)], cwd=tmp_path,
                       stdout=o, stderr=e, timeout=60)
    line = next(ln for ln in err.read_text().splitlines() if "Maximum resident set size" in ln)
    gnu = int(line.rsplit(":", 1)[1]) * 1024
    os.kill(int(_lines(out.read_text(), "child")[0]), signal.SIGKILL)  # GNU time leaves it
    r = envlock_run(["--dir", "run", "-q", "--", sys.executable, str(job)], tmp_path)
    assert r.returncode == 3
    rec = run_from_dict(tomllib.loads((tmp_path / "run" / "run.toml").read_text())["run"])
    assert abs(rec.resources.max_rss - gnu) <= 0.05 * gnu, (rec.resources.max_rss, gnu)


_HWM = ("import sys\n"
        "for line in open('/proc/self/status'):\n"
        "    if line.startswith('VmHWM:'):\n"
        "        print('hwm', line.split()[1])\n")


@pytest.mark.parametrize("cmd", [["bash", "-c", "exit 0"], ["true"]], ids=["bash", "true"])
def test_a_small_commands_max_rss_is_its_own_not_envlocks(cmd: list[str], tmp_path: Path) -> None:
    """Issue 25: ``envlock run -- bash -c 'exit 0'`` reported 30.8 MB (envlock's own address
    space, which the vforked child's exec records) where GNU time reports ~3 MB. The oracle:
    GNU time when installed, else the max RSS of the command forked by a shell and read by
    ``getrusage(RUSAGE_CHILDREN)`` after it (the way GNU time measures)."""
    if os.access("/usr/bin/time", os.X_OK):
        t = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True,
                           timeout=30, cwd=tmp_path)
        oracle = int(t.stderr.strip().splitlines()[-1]) * 1024
    else:
        probe = ("import resource, subprocess, sys; subprocess.run(['sh', '-c', '\"$@\"; exec \"$0\" -S -c "
                 "\\\"import resource; print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\\\"\"', "
                 "sys.executable, *sys.argv[1:]])")
        t = subprocess.run([sys.executable, "-c", probe, *cmd], capture_output=True, text=True,
                           timeout=30, cwd=tmp_path)
        oracle = int(t.stdout.split()[-1]) * 1024
    r = envlock_run(["--dir", "run", "-q", "--", *cmd], tmp_path)
    assert r.returncode == 0, r.stderr
    res = run_from_dict(tomllib.loads((tmp_path / "run" / "run.toml").read_text())["run"]).resources
    assert res is not None and res.max_rss is not None
    # a few pages of the shell that forked it, not envlock's ~30 MB
    assert abs(res.max_rss - oracle) <= max(0.15 * oracle, 512 * 1024), (res.max_rss, oracle)
    assert res.max_rss < 10 * 2**20


def test_max_rss_of_a_command_that_ends_by_a_signal_and_of_its_waited_child(tmp_path: Path) -> None:
    """A 64 MiB command killed by SIGSEGV: the record says SIGSEGV (the shell's 128 + n read
    back), exit code 139, and its max RSS is its own VmHWM; a parent that waits for a 96 MiB
    child reports the child's peak (RUSAGE_CHILDREN covers what CMD waited for)."""
    script = tmp_path / "big.py"
    script.write_text("import os, signal, sys\nx = bytearray(64 << 20)\n" + _HWM +
                      "sys.stdout.flush()\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    r = envlock_run(["--dir", "a", "-q", "--", sys.executable, str(script)], tmp_path)
    assert r.returncode == 139, r.stderr
    assert "Segmentation fault" not in r.stderr  # the launcher shell adds nothing to stderr
    hwm = int(_lines(r.stdout, "hwm")[0]) * 1024
    rec = run_from_dict(tomllib.loads((tmp_path / "a" / "run.toml").read_text())["run"])
    assert rec.outcome == "crashed" and rec.signal == "SIGSEGV" and rec.exit_code == 139
    assert rec.resources is not None and rec.resources.max_rss is not None
    assert abs(rec.resources.max_rss - hwm) <= 0.05 * hwm, (rec.resources.max_rss, hwm)
    child = tmp_path / "child.py"
    child.write_text("x = bytearray(96 << 20)\n" + _HWM)
    r = envlock_run(["--dir", "b", "-q", "--", "sh", "-c", f"{sys.executable} {child}; exit 5"],
                    tmp_path)
    assert r.returncode == 5, r.stderr
    hwm = int(_lines(r.stdout, "hwm")[0]) * 1024
    rec = run_from_dict(tomllib.loads((tmp_path / "b" / "run.toml").read_text())["run"])
    assert rec.outcome == "failed" and rec.exit_status == 5
    assert rec.resources is not None and rec.resources.max_rss is not None
    assert abs(rec.resources.max_rss - hwm) <= 0.05 * hwm, (rec.resources.max_rss, hwm)


def test_keep_children(tmp_path: Path) -> None:
    script = tmp_path / "j.py"
    script.write_text("import subprocess, sys\n"
                      "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
                      "print(p.pid)\n")
    out = tmp_path / "out.txt"
    with out.open("w") as o:  # a file: the kept child holds its stdout open
        r = subprocess.run([sys.executable, "-m", "envlock", "run", "--dir", "k", "--keep-children",
                            "-q", "--", sys.executable, str(script)], cwd=tmp_path, stdout=o,
                           stderr=subprocess.DEVNULL, timeout=60)
    pid = int(out.read_text().split()[0])
    try:
        assert r.returncode == 0 and not gone(pid)
        rec = run_from_dict(tomllib.loads((tmp_path / "k" / "run.toml").read_text())["run"])
        assert rec.outcome == "succeeded" and [c.action for c in rec.children] == ["kept"]
        assert any(f.title.endswith(": kept (--keep-children)") for f in rec.findings)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_sigterm_reaches_the_command(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import signal, sys, time\n"
        "def stop(signum, frame):\n"
        "    open('checkpoint.pt', 'w').write('step 7')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "signal.signal(signal.SIGUSR1, lambda s, f: print('usr1', flush=True))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-m", "envlock", "run", "--dir", "t", "-q", "--",
                          sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGUSR1)  # Slurm's --signal warning: forwarded, the job goes on
    assert p.stdout.readline().strip() == "usr1"
    p.send_signal(signal.SIGTERM)  # to envlock only: the command is in its own process group
    _out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert (tmp_path / "checkpoint.pt").read_text() == "step 7"
    rec = run_from_dict(tomllib.loads((tmp_path / "t" / "run.toml").read_text())["run"])
    assert rec.outcome == "terminated" and rec.exit_status == 0
    assert [s.name for s in rec.signals] == ["SIGUSR1", "SIGTERM"]
    assert all(s.forwarded for s in rec.signals)
    assert any(f.id == "run.terminated" and "SIGTERM" in f.title for f in rec.findings)


def test_slurm_grant_by_hand(tmp_path: Path) -> None:
    """Slurm variables set by hand, and a fake ``scontrol`` answering as Slurm 23.11 does."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 30))
    (bindir / "scontrol").write_text(
        "#!/bin/sh\n"
        f"echo 'JobId=4242 JobName=train UserId=u(1) TimeLimit=00:00:32 TimeMin=N/A "
        f"SubmitTime={start} StartTime={start} EndTime=Unknown Partition=gpu'\n")
    (bindir / "scontrol").chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLURM_") and k != "CUDA_VISIBLE_DEVICES"}
    env.update(PATH=f"{bindir}:{env['PATH']}", SLURM_JOB_ID="4242", SLURM_MEM_PER_NODE="20",
               SLURM_GPUS_ON_NODE="2", SLURM_JOB_GPUS="0,1")
    r = envlock_run(["--dir", "s", "-q", "--", sys.executable, "-c",
                     "b = bytearray(19 * 2**20); b[::4096] = b'x' * len(b[::4096])"],
                    tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    rec = run_from_dict(tomllib.loads((tmp_path / "s" / "run.toml").read_text())["run"])
    g = rec.granted
    assert g is not None and g.scheduler == "slurm" and g.job_id == "4242"
    assert g.memory == 20 * 2**20 and g.memory_source == "SLURM_MEM_PER_NODE"
    assert g.time_limit == 32 and g.time_limit_source == "scontrol show job"
    assert g.gpus == 2 and g.gpu_ids == ("0", "1") and g.visible_devices is None
    titles = {f.id: f.title for f in rec.findings}
    peak = rec.resources.peak_rss
    assert titles["run.memory"].startswith("peak RSS ") and "of 20 MiB granted (" in titles["run.memory"]
    assert peak and peak > 19 * 2**20
    assert re.fullmatch(r"the job ran (\d+ s|1 min( \d+ s)?) of a 32 s limit \(\d+ %\)",
                        titles["run.time"]), titles["run.time"]
    assert titles["run.visible-devices-unset"] == \
        "GPU allocated (2) but CUDA_VISIBLE_DEVICES unset in the job"
    assert "warning: peak RSS" in r.stderr  # printed even with -q: above 90 % of the grant


def test_command_not_found(tmp_path: Path) -> None:
    r = envlock_run(["--dir", "n", "-q", "--", "no-such-program-xyz"], tmp_path)
    assert r.returncode == 127
    assert r.stderr.strip().splitlines()[-1].startswith("Error: no-such-program-xyz: ")
    rec = run_from_dict(tomllib.loads((tmp_path / "n" / "run.toml").read_text())["run"])
    assert rec.outcome == "not-started" and rec.exit_code == 127


def test_signal_exit_code(tmp_path: Path) -> None:
    r = envlock_run(["--dir", "c", "-q", "--", sys.executable, "-c",
                     "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"], tmp_path)
    assert r.returncode == 128 + signal.SIGABRT
    rec = run_from_dict(tomllib.loads((tmp_path / "c" / "run.toml").read_text())["run"])
    assert rec.outcome == "crashed" and rec.signal == "SIGABRT" and rec.exit_status is None


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_stdin_passes_through(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "envlock", "run", "--dir", "i", "-q", "--",
                        "bash", "-c", "read x; echo got:$x; echo err >&2"], cwd=tmp_path,
                       input="hello\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "got:hello\n" and "err" in r.stderr


def test_verify_policy_stops_or_reports(tmp_path: Path) -> None:
    """--verify error: a manifest with another click version stops the run before CMD (exit 1,
    a not-started record); --verify report prints the same findings and runs CMD anyway."""
    from dataclasses import replace

    import envlock

    m = envlock.snapshot(stack=False, libraries=False)
    pkgs = tuple(replace(p, version="0.0.1") if p.name == "click" else p for p in m.pip.packages)
    replace(m, pip=replace(m.pip, packages=pkgs)).write(tmp_path / "m.toml")
    stop = envlock_run(["--dir", "v1", "--verify", "error", "-m", "m.toml", "--",
                        sys.executable, "-c", "open('ran', 'w')"], tmp_path)
    assert stop.returncode == 1 and not (tmp_path / "ran").exists()
    assert "click" in stop.stderr and stop.stderr.strip().splitlines()[-1].startswith("Error: verify failed")
    rec = run_from_dict(tomllib.loads((tmp_path / "v1" / "run.toml").read_text())["run"])
    assert rec.outcome == "not-started" and rec.verify == "error" and rec.verify_exit == 1
    go = envlock_run(["--dir", "v2", "--verify", "report", "-m", "m.toml", "--",
                      sys.executable, "-c", "open('ran', 'w')"], tmp_path)
    assert go.returncode == 0 and (tmp_path / "ran").exists() and "click" in go.stderr
    rec = run_from_dict(tomllib.loads((tmp_path / "v2" / "run.toml").read_text())["run"])
    assert rec.outcome == "succeeded" and rec.verify == "report" and rec.verify_exit == 1


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a pseudo-terminal")
def test_terminal_is_handed_to_the_command(tmp_path: Path) -> None:
    """On a terminal the command's process group becomes the foreground group: it reads the
    terminal without being stopped by SIGTTIN (util-linux script(1) provides the pty)."""
    inner = (f"{sys.executable} -m envlock run -q --dir {tmp_path / 'tty'} -- "
             "bash -c 'read x; echo got:$x'")
    r = subprocess.run(["script", "-qec", inner, "/dev/null"], input="hello\n", text=True,
                       capture_output=True, timeout=30, cwd=tmp_path)
    assert r.returncode == 0 and "got:hello" in r.stdout
    rec = run_from_dict(tomllib.loads((tmp_path / "tty" / "run.toml").read_text())["run"])
    assert rec.outcome == "succeeded"


def test_unwritable_record_keeps_the_exit_status(tmp_path: Path) -> None:
    """A record that cannot be written (here the job puts a directory where run.toml goes)
    loses the record, not the command's exit status."""
    d = tmp_path / "rw"
    r = envlock_run(["--dir", "rw", "-q", "--", "bash", "-c",
                     f"until [ -f {d}/run.toml ]; do sleep 0.02; done; "  # the 'running' record
                     f"rm -f {d}/run.toml; mkdir {d}/run.toml; exit 4"], tmp_path)
    assert r.returncode == 4
    assert "Error: could not write the run record: " in r.stderr


def test_a_broken_stderr_pipe_does_not_stop_the_job(tmp_path: Path) -> None:
    """`envlock run … 2>&1 | tee log` whose reader died: CMD still runs, its status is
    envlock's, and run.toml is final (it exited 0 without running CMD)."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before envlock writes a line
    p = subprocess.Popen([sys.executable, "-m", "envlock", "run", "--dir", "t", "--", "sh", "-c",
                          "touch marker; exit 5"], cwd=tmp_path, stdout=w, stderr=w)
    os.close(w)
    assert p.wait(timeout=60) == 5
    assert (tmp_path / "marker").exists()
    rec = run_from_dict(tomllib.loads((tmp_path / "t" / "run.toml").read_text())["run"])
    assert rec.outcome == "failed" and rec.exit_status == 5


def test_secrets_of_the_command_line_and_the_job_comment_stay_out(tmp_path: Path) -> None:
    """A real ``envlock run`` whose argv holds credential options as separate arguments and
    whose Slurm job comment holds a token: neither run.toml nor manifest.toml holds them, nor
    ``show``/``diff`` of the records; a hand-made (foreign) record holding them is redacted
    by ``show`` and ``diff`` too."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    comment = "nightly; WANDB c21SECRET"
    env.update(SLURM_JOB_ID="77", SLURM_JOB_COMMENT=comment)
    argv = [sys.executable, "-c", "pass", "--token", "t21SECRET", "--api-key", "k21SECRET",
            "--access-key", "a21SECRET", "--auth", "u21SECRET", "--secret", "s21SECRET",
            "--password=p21SECRET", "--epochs", "3"]
    r = envlock_run(["--dir", "one", "-q", "--", *argv], tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    run_toml = (tmp_path / "one" / "run.toml").read_text()
    manifest = (tmp_path / "one" / "manifest.toml").read_text()
    assert "21SECRET" not in run_toml + manifest + r.stdout + r.stderr
    doc = tomllib.loads(run_toml)
    assert doc["run"]["command"] == [sys.executable, "-c", "pass", "--token", "<redacted>",
                                     "--api-key", "<redacted>", "--access-key", "<redacted>",
                                     "--auth", "<redacted>", "--secret", "<redacted>",
                                     "--password=<redacted>", "--epochs", "3"]
    assert doc["envlock"]["command"][-len(argv):] == doc["run"]["command"]
    env_vars = tomllib.loads(manifest)["env"]["vars"]
    digest = hashlib.sha256(comment.encode()).hexdigest()
    assert env_vars["SLURM_JOB_COMMENT"] == f"<redacted: sha256 {digest}, {len(comment)} characters>"
    assert env_vars["SLURM_JOB_ID"] == "77"

    # a foreign record, written by hand with the secrets in it: show and diff redact them
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "run.toml").write_text(run_toml.replace('"--token",\n    "<redacted>"',
                                                        '"--token",\n    "f21SECRET"'))
    assert "f21SECRET" in (foreign / "run.toml").read_text()
    (foreign / "manifest.toml").write_text(manifest.replace(env_vars["SLURM_JOB_COMMENT"], comment))
    outs = []
    for args in (["show", "one/run.toml"], ["show", "foreign/run.toml"],
                 ["diff", "one/run.toml", "foreign/run.toml"],
                 ["diff", "one/manifest.toml", "foreign/manifest.toml"],
                 ["show", "foreign/manifest.toml"]):
        p = subprocess.run([sys.executable, "-m", "envlock", *args], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode in (0, 1), p.stderr
        outs.append(p.stdout + p.stderr)
    assert "--token <redacted> --api-key <redacted>" in outs[0]
    assert "--token <redacted> --api-key <redacted>" in " ".join(outs[1].split())
    assert "SLURM_JOB_COMMENT=<redacted: sha256" in outs[4]
    for out in outs:
        assert "21SECRET" not in out, out


def test_a_sigkilled_supervisor_leaves_a_record_show_and_diff_read_as_unknown(tmp_path: Path) -> None:
    """SIGKILL of envlock itself and of its command (what a kill of the whole step does): the
    record on disk stays ``running`` — nothing can write after a SIGKILL — and it names the
    supervisor's pid; ``show`` and ``diff`` read it as ``unknown``, naming the gone supervisor,
    while a live one's record still reads ``running``."""
    p = subprocess.Popen([sys.executable, "-m", "envlock", "run", "--dir", "k", "-q", "--",
                          "sleep", "60"], cwd=tmp_path)
    rec_path = tmp_path / "k" / "run.toml"
    deadline = time.monotonic() + 30
    while not (rec_path.exists() and "pid" in rec_path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    data = tomllib.loads(rec_path.read_text())["run"]
    assert data["outcome"] == "running" and data["supervisor"] == p.pid, data
    live = subprocess.run([sys.executable, "-m", "envlock", "show", str(rec_path)],
                          capture_output=True, text=True, timeout=60)
    assert "run: running" in live.stdout, live.stdout + live.stderr
    os.killpg(os.getpgid(data["pid"]), signal.SIGKILL)  # CMD and its launcher shell
    p.kill()
    p.wait(timeout=10)
    assert tomllib.loads(rec_path.read_text())["run"]["outcome"] == "running"  # as written
    out = subprocess.run([sys.executable, "-m", "envlock", "show", str(rec_path)],
                         capture_output=True, text=True, timeout=60)
    said = " ".join(out.stdout.split())
    assert out.returncode == 0 and "run: unknown" in said, out.stdout + out.stderr
    assert f"supervisor (pid {p.pid}) is gone" in said, said
    import json

    shown = subprocess.run([sys.executable, "-m", "envlock", "show", "--format", "json",
                            str(rec_path)], capture_output=True, text=True, timeout=60)
    settled = json.loads(shown.stdout)["run"]
    assert settled["outcome"] == "unknown"
    assert [f["id"] for f in settled["findings"]] == ["run.unfinished"], settled
    d = subprocess.run([sys.executable, "-m", "envlock", "diff", str(rec_path), str(rec_path)],
                       capture_output=True, text=True, timeout=60)
    assert "Traceback" not in d.stderr, d.stderr
