"""The manifest model: round trips, type checks with key paths, schema gate."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import envlock
from envlock.manifest import _toml
from envlock.errors import ManifestError, ManifestVersionError
from envlock.manifest import Manifest

GOLDEN = Path(__file__).parent / "data" / "manifest.example.toml"


def test_golden_round_trip_is_byte_identical(tmp_path: Path) -> None:
    m = envlock.load(str(GOLDEN))
    out = tmp_path / "again.toml"
    m.write(out)
    assert out.read_bytes() == GOLDEN.read_bytes()


def test_json_round_trip(tmp_path: Path) -> None:
    m = envlock.load(str(GOLDEN))
    out = tmp_path / "m.json"
    m.write(out)
    again = envlock.load(str(out))
    assert again == m
    assert json.loads(out.read_text())["envlock"]["schema"] == 1


def test_unknown_tables_are_kept(tmp_path: Path) -> None:
    text = GOLDEN.read_text() + '\n[future-area]\nstatus = "ok"\nvalue = 3\n'
    p = tmp_path / "f.toml"
    p.write_text(text)
    m = envlock.load(str(p))
    assert dict(m.extra["future-area"]) == {"status": "ok", "value": 3}
    out = tmp_path / "g.toml"
    m.write(out)
    assert out.read_text() == text


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["pip"]["packages"][1].__setitem__("version", 3),
         "expected str, got int in 'pip.packages[1].version'"),
        (lambda d: d["cpu"].__setitem__("logical-cores", True),
         "expected int, got bool in 'cpu.logical-cores'"),
        (lambda d: d["target"].pop("kind"), "missing required key 'kind' in 'target'"),
        (lambda d: d.__setitem__("python", [1]), "expected a table, got list in 'python'"),
        (lambda d: d["python"].__setitem__("path", "x"), "expected an array, got str in 'python.path'"),
    ],
    ids=["str", "bool-as-int", "missing", "table", "array"],
)
def test_type_errors_name_the_key_path(mutate, message: str) -> None:
    data = _toml.load_file(GOLDEN)
    mutate(data)
    with pytest.raises(ManifestError) as exc:
        Manifest.from_dict(data)
    assert str(exc.value) == message


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "new.toml"
    p.write_text(GOLDEN.read_text().replace("schema = 1", "schema = 2", 1))
    with pytest.raises(ManifestVersionError, match=r"schema 2 is newer than this envlock reads \(1\)"):
        envlock.load(str(p))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty file"),
        ("[envlock\nschema=1", "malformed TOML"),
        ('[tool.poetry]\nname = "x"\n', "not an envlock manifest"),
        ("{\"envlock\": ", "malformed JSON"),
        ('[envlock]\nschema = "1"\n', "schema must be an integer"),
    ],
    ids=["empty", "bad-toml", "not-manifest", "bad-json", "schema-type"],
)
def test_bad_files(tmp_path: Path, content: str, message: str) -> None:
    p = tmp_path / "x.toml"
    p.write_text(content)
    with pytest.raises(ManifestError, match=message) as exc:
        envlock.load(str(p))
    assert str(p) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_binary_file(tmp_path: Path) -> None:
    p = tmp_path / "x.toml"
    p.write_bytes(b"\x7fELF\x02\x01\x01\xff\xfe")
    with pytest.raises(ManifestError, match="not a text file"):
        envlock.load(str(p))


def test_atomic_write_refuses_existing_and_leaves_no_temp(tmp_path: Path) -> None:
    m = envlock.load(str(GOLDEN))
    out = tmp_path / "m.toml"
    m.write(out)
    from envlock.errors import OutputExistsError

    with pytest.raises(OutputExistsError, match="use --force"):
        m.write(out)
    m.write(out, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.toml"]


def test_force_refuses_a_symlink_and_writes_into_special_files(tmp_path: Path) -> None:
    m = envlock.load(str(GOLDEN))
    real = tmp_path / "real.toml"
    real.write_text("old")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    from envlock.errors import OutputExistsError

    with pytest.raises(OutputExistsError, match="symbolic link"):
        m.write(link, force=True)
    assert link.is_symlink() and real.read_text() == "old"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # a reader that holds the FIFO open before the write (as a consumer of `-o fifo --force`
    # would); the manifest (4 KiB) fits the pipe buffer, so it is read after the write returns
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        m.write(fifo, force=True)
        chunks = []
        while chunk := os.read(rfd, 65536):
            chunks.append(chunk)
    finally:
        os.close(rfd)
    got = [b"".join(chunks)]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got == [GOLDEN.read_bytes()]
    with pytest.raises(OSError, match="No space left"):
        m.write(Path("/dev/full"), force=True)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_status_is_typed_and_forward_compatible() -> None:
    """``status`` is a Literal of the known values; reading checks its type (a str) and keeps a
    value a newer envlock may write."""
    import typing

    from envlock.manifest import PythonInfo
    from envlock.manifest._model import STATUSES, from_dict
    from envlock.errors import ManifestError

    assert STATUSES == ("ok", "absent", "error", "timeout")
    hints = typing.get_type_hints(PythonInfo, globalns=vars(__import__("envlock.manifest", fromlist=["x"])))
    assert typing.get_args(hints["status"]) == STATUSES
    assert from_dict(PythonInfo, {"status": "partial"}).status == "partial"
    with pytest.raises(ManifestError, match="expected str, got int in 'python.status'"):
        from_dict(PythonInfo, {"status": 3}, "python")


LIBRARIES_WITH_ANSWER = '''
[libraries]
status = "ok"
source = "envlock loader model (torch)"
module = "torch"
glibc = "2.36"
findings = ["warning [runtime-not-found] libcuda.so.1 will not be found"]

[libraries.answer]
key = "KEY"
inputs = "INPUTS"
paths = ["/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu/libc.so.6"]

[[libraries.answer.findings]]
id = "runtime-not-found"
severity = "warning"
title = "libcuda.so.1 will not be found"
cause = "libcuda.so.1 is dlopen'ed by libcudart.so.13; the loader found no file named libcuda.so.1."
evidence = ["searched /etc/ld.so.cache: no entry for libcuda.so.1"]
fix = ["Install the NVIDIA driver."]
library = "libcuda.so.1"
'''.replace("KEY", "a" * 64).replace("INPUTS", "b" * 64)


def test_libraries_answer_round_trips_and_an_older_manifest_has_none(tmp_path: Path) -> None:
    """``[libraries.answer]`` (the loader's findings in full with the digests of their
    question and inputs, which ``verify`` reuses) is typed and written back byte for byte; a
    manifest from before it existed reads with ``answer = None``."""
    p = tmp_path / "m.toml"
    p.write_text(GOLDEN.read_text() + LIBRARIES_WITH_ANSWER)
    m = envlock.load(str(p))
    assert m.libraries is not None and m.libraries.answer is not None
    a = m.libraries.answer
    assert (a.key, a.inputs) == ("a" * 64, "b" * 64)
    assert a.paths == ("/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu/libc.so.6")
    (f,) = a.findings
    assert (f.id, f.severity, f.library, f.requester) == ("runtime-not-found", "warning", "libcuda.so.1", None)
    assert f.evidence == ("searched /etc/ld.so.cache: no entry for libcuda.so.1",)
    out, twice = tmp_path / "again.toml", tmp_path / "twice.toml"
    m.write(out)
    assert envlock.load(str(out)) == m
    envlock.load(str(out)).write(twice)
    assert twice.read_bytes() == out.read_bytes()
    assert "\n[libraries.answer]\nkey = " in out.read_text()
    assert "\n[[libraries.answer.findings]]\nid = " in out.read_text()
    older = tmp_path / "old.toml"
    older.write_text(p.read_text().split("[libraries.answer]")[0])
    assert envlock.load(str(older)).libraries.answer is None  # type: ignore[union-attr]
    bad = tmp_path / "bad.toml"
    bad.write_text(p.read_text().replace('severity = "warning"', "severity = 2"))
    with pytest.raises(ManifestError, match=r"libraries\.answer\.findings\[0\]\.severity"):
        envlock.load(str(bad))
