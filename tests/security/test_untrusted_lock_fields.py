"""A lock's versions, hashes, names and registries from someone else are data (docs/trust.md):
a Pipfile.lock name that is no PEP 508 name or a pin that is no PEP 440 version, a uv, pdm or
poetry version that is not PEP 440, a uv registry of another URL scheme, a hash whose digest is
not hex of its algorithm's length (poetry, pdm, uv, pylock, Pipfile.lock, conda-lock) — each
is one ``Error:`` naming the entry and its fault when the lock is read: by ``show``, ``diff``,
``verify`` and ``restore`` alike, nothing written.

Each file is a peers lockfile (shared/cases/peers: index.tsv says where each is from) with one
field changed; the unchanged file reads (its other tests), so the changed field is the fault.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from envlock.cli import cli
from envlock.formats import read_lock

from _checks import one_error

PEERS = Path("/work/shared/cases/peers")
FLASK = "uvlock/ecosystem__flask__uv.lock"
PIPENV = "other/pipenv-root__Pipfile.lock"
PDM = "pdmlock/demo__pdm.lock"
POETRY = "poetrylock/installation__with-url-dependency__poetry.lock"
PYLOCK = "pylock/pip__pylock.toml"
CONDALOCK = "condalock/test-lockfile__conda-lock.yml"

pytestmark = pytest.mark.skipif(not (PEERS / FLASK).is_file(), reason="the peers cases are not here")

BLINKER_SDIST = "sha256:b4ce2265a7abece45e7cc896e98dbebe6cead56bcf805a3d23136d145f5445bf"
EXC_HASH = "sha256:8b412432c6055b0b7d14c310000ae93352ed6754f70fa8f7c34141f91c4e3219"
CERTIFI_SDIST = "sha256:3d5da6925056f6f18f119200434a4780a94263f10d1c21d032a6f6b2baa20651"

#: (peers file, the file name written, the text changed, what it becomes, what the Error says)
CASES = [
    # 1. Pipfile.lock: a name that is no PEP 508 name, a pin that is no PEP 440 version
    (PIPENV, "Pipfile.lock", '"exceptiongroup": {', '"Bad Name!": {',
     "default.Bad Name!: 'Bad Name!' is not a project name (PEP 508)"),
    (PIPENV, "Pipfile.lock", '"version": "==1.3.1"', '"version": "==banana!"',
     "default.exceptiongroup.version: 'banana!' is not a version (PEP 440)"),
    # 2. a uv, pdm, poetry version that is not PEP 440
    (FLASK, "uv.lock", 'version = "1.9.0"', 'version = "not.a.version!"',
     "package[5] (blinker).version: 'not.a.version!' is not a version (PEP 440)"),
    (PDM, "pdm.lock", 'version = "2025.1.31"', 'version = "not.a.version!"',
     "package[0] (certifi).version: 'not.a.version!' is not a version (PEP 440)"),
    (POETRY, "poetry.lock", 'version = "1.4.4"', 'version = "not.a.version!"',
     "(pendulum).version: 'not.a.version!' is not a version (PEP 440)"),
    # 3. a uv registry of a URL scheme that is neither http/https/file nor a path
    (FLASK, "uv.lock", 'source = { registry = "https://example-index.invalid/simple" }\n'
     'sdist = { url = "https://files.example-index.invalid/packages/21/28',
     'source = { registry = "javascript:alert(1)" }\n'
     'sdist = { url = "https://files.example-index.invalid/packages/21/28',
     "package[5] (blinker).source.registry: 'javascript:alert(1)' is not a URL (file, http, "
     "https): its scheme 'javascript:' is not supported"),
    # 4. a digest that is not hex of its algorithm's length
    (FLASK, "uv.lock", BLINKER_SDIST, "sha256:zzz",
     "package[5] (blinker).sdist.hash: 'sha256:zzz' is not a digest (sha256: 64 hex digits)"),
    (PDM, "pdm.lock", CERTIFI_SDIST, "sha256:zzz",
     "package[0] (certifi).files[0].hash: 'sha256:zzz' is not a digest (sha256: 64 hex"),
    (PIPENV, "Pipfile.lock", EXC_HASH, "sha256:" + "8b41" * 8,
     "default.exceptiongroup.hashes[0]: 'sha256:" + "8b41" * 8 + "' is not a digest (sha256: 64"),
    (PYLOCK, "pylock.toml", 'sha256 = "3a084929238d13bcd3bb928af04f3bac7ca2357d419e29f01459dc848e2d69a4"',
     'sha256 = "3a0849-not-hex"',
     "packages[0] (simple).sdist.hashes.sha256: 'sha256:3a0849-not-hex' is not a digest"),
    (CONDALOCK, "conda-lock.yml", "md5: d7c89558ba9fa0495403155b64376d81", "md5: xyz",
     "package[0] (_libgcc_mutex).hash.md5: 'md5:xyz' is not a digest (md5: 32 hex digits)"),
]


def _poetry_hash_case() -> tuple[str, str, str, str, str]:
    text = (PEERS / POETRY).read_text() if (PEERS / POETRY).is_file() else 'hash = "sha256:"'
    start = text.index('hash = "sha256:') + len('hash = "')
    real = text[start:start + 71]
    return (POETRY, "poetry.lock", real, "sha256:zzz", "files[0].hash: 'sha256:zzz' is not a "
            "digest (sha256: 64 hex digits)")


def _run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize(("peer", "fname", "old", "new", "said"), [*CASES, _poetry_hash_case()],
                         ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None)
def test_one_field_changed_is_one_error_in_show_diff_verify_and_restore(
        tmp_path: Path, peer: str, fname: str, old: str, new: str, said: str) -> None:
    text = (PEERS / peer).read_text()
    assert text.count(old) >= 1
    read_lock(PEERS / peer)  # the real file reads: the changed field is the fault
    lock = tmp_path / fname
    lock.write_text(text.replace(old, new, 1))
    one_error(_run("show", lock), f"{fname}: ", said)
    one_error(_run("diff", lock, PEERS / peer), said)
    one_error(_run("verify", "--lock", lock, "--python", sys.executable), said)
    if fname != "Pipfile.lock":  # envlock restores from the other locks, not a Pipfile.lock
        one_error(_run("restore", lock, "--prefix", tmp_path / "env"), said)  # the plan
        one_error(_run("restore", lock, "--prefix", tmp_path / "env", "--run"), said)
    assert sorted(p.name for p in tmp_path.iterdir()) == [fname]


@pytest.mark.parametrize("registry", ["./simple", "/srv/simple", "C:/simple",
                                      "file:///srv/simple", "http://127.0.0.1:8080/simple"])
def test_a_uv_registry_that_is_a_path_or_an_index_url_still_reads(tmp_path: Path,
                                                                   registry: str) -> None:
    text = (PEERS / FLASK).read_text()
    lock = tmp_path / "uv.lock"
    lock.write_text(text.replace('registry = "https://example-index.invalid/simple"',
                                 f'registry = "{registry}"'))
    assert [p.version for p in read_lock(lock).packages if p.name == "blinker"] == ["1.9.0"]


def test_a_uv_entry_without_a_version_is_still_the_project(tmp_path: Path) -> None:
    # uv writes no version for a virtual project (uv's lock_explicit_virtual_project)
    peer = PEERS / "uvlock/inline__lock_explicit_virtual_project__1__uv.lock"
    lock = read_lock(peer)
    assert lock.projects and all(p.version for p in lock.packages)
    assert _run("show", peer).exit_code == 0  # type: ignore[attr-defined]


def test_a_conda_lock_pip_entry_from_git_keeps_its_commit_as_sha256() -> None:
    # conda-lock writes a git pip dependency's commit as its hash.sha256 (40 hex digits)
    peer = PEERS / "condalock/test-v2-to-v3-upgrade__conda-lock-v3.0.2.yml"
    pkgs = [p for p in read_lock(peer).packages if p.name == "requests" and p.manager == "pip"]
    assert pkgs and {p.sha256 for p in pkgs} == {"3f07f990ac74f1e1691ba17ef8c14007f05846ab"}
