"""The SCRAM credentials file and ``groupstream users``: round trips, damage detection, never a password on disk,
and the CLI's refusals (a running broker, bad arguments) as one clear line."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from groupstream.cli.main import main
from groupstream.security.credentials import FILE_NAME, CredentialFileError, CredentialStore, decode, encode
from groupstream.security.scram import ScramMechanism, make_credential, password_matches
from groupstream.storage.dir_lock import DataDirLock

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
GROUPSTREAM = [str(Path(sys.executable).parent / "groupstream")]


def users() -> dict[str, dict[ScramMechanism, object]]:
    return {
        "alice": {SHA256: make_credential(SHA256, "a", b"1" * 16, 4096), SHA512: make_credential(SHA512, "a", b"2" * 16, 8192)},
        "b,ob=": {SHA512: make_credential(SHA512, "b", b"3" * 16, 4096)},
    }  # fmt: skip


def test_round_trip() -> None:
    original = users()
    assert decode(encode(original)) == original  # type: ignore[arg-type]


def test_every_damaged_byte_is_detected() -> None:
    data = encode(users())  # type: ignore[arg-type]
    body_start = data.index(b"\n") + 1
    for i in range(body_start, len(data), 7):
        damaged = bytearray(data)
        damaged[i] ^= 0x01
        with pytest.raises(CredentialFileError):
            decode(bytes(damaged))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a groupstream SCRAM credentials file"),
        (b"something else\n{}", "not a groupstream SCRAM credentials file"),
        (b"groupstream-scram-credentials 9 00000000\n{}", "written by a newer groupstream"),
        (b"groupstream-scram-credentials one two\n{}", "damaged header"),
    ],
)
def test_unreadable_files(data: bytes, message: str) -> None:
    with pytest.raises(CredentialFileError, match=message):
        decode(data)


def test_truncated_file_is_detected() -> None:
    data = encode(users())  # type: ignore[arg-type]
    with pytest.raises(CredentialFileError, match="damaged"):
        decode(data[:-10])


def test_store_saves_durably_and_reloads(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path)
    assert store.snapshot() == {}
    store.save(store.changed(upserts=[("alice", SHA256, make_credential(SHA256, "pw", b"s" * 16, 4096))]))
    again = CredentialStore(tmp_path)
    cred = again.scram_credential("alice", SHA256)
    assert cred is not None and password_matches(SHA256, cred, "pw")
    assert again.scram_credential("alice", SHA512) is None
    again.save(again.changed(deletions=[("alice", SHA256)]))
    assert CredentialStore(tmp_path).snapshot() == {}
    assert not (tmp_path / f"{FILE_NAME}.tmp").exists()


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``groupstream users ARGS`` in this process (the console script costs seconds per start here; one test runs
    it for real)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["users", *args])
    finally:
        sys.stdin = old_stdin
    return subprocess.CompletedProcess(["groupstream", "users", *args], code, out.getvalue(), err.getvalue())


def test_the_console_script(tmp_path: Path) -> None:
    r = subprocess.run([*GROUPSTREAM, "users", "add", "--data-dir", str(tmp_path), "--user", "u", "--password", "p"],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0 and "added u" in r.stdout, r.stderr


def test_users_cli_add_list_delete(tmp_path: Path) -> None:
    d = tmp_path / "data"
    r = run_cli("add", "--data-dir", str(d), "--user", "alice", "--password", "correct horse")
    assert r.returncode == 0, r.stderr
    assert "added alice (SCRAM-SHA-256, SCRAM-SHA-512, 4096 iterations)" in r.stdout
    r = run_cli("add", "--data-dir", str(d), "--user", "bob", "--password-file", "-", "--mechanism", "SCRAM-SHA-512",
                "--iterations", "8192", stdin="from stdin\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    raw = (d / FILE_NAME).read_bytes()
    assert b"correct horse" not in raw and b"from stdin" not in raw
    store = CredentialStore(d)
    bob = store.scram_credential("bob", SHA512)
    assert bob is not None and bob.iterations == 8192 and password_matches(SHA512, bob, "from stdin")
    assert store.scram_credential("bob", SHA256) is None

    listing = run_cli("list", "--data-dir", str(d)).stdout.splitlines()
    assert listing[0].split() == ["USER", "MECHANISM", "ITERATIONS"]
    assert [line.split() for line in listing[1:]] == [
        ["alice", "SCRAM-SHA-256", "4096"], ["alice", "SCRAM-SHA-512", "4096"], ["bob", "SCRAM-SHA-512", "8192"]]  # fmt: skip

    r = run_cli("delete", "--data-dir", str(d), "--user", "alice", "--mechanism", "SCRAM-SHA-256")
    assert r.returncode == 0 and "deleted SCRAM-SHA-256 of alice" in r.stdout
    r = run_cli("delete", "--data-dir", str(d), "--user", "alice")
    assert r.returncode == 0 and "deleted SCRAM-SHA-512 of alice" in r.stdout
    assert set(CredentialStore(d).snapshot()) == {"bob"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "--user", "x", "--password", "p", "--iterations", "100"], "--iterations must be within 4096-16384"),
        (["add", "--user", "x", "--password", ""], "the password is empty"),
        (["delete", "--user", "nobody"], "has no SCRAM credentials"),
    ],
)
def test_users_cli_mistakes_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "d").mkdir()
    r = run_cli(args[0], "--data-dir", str(tmp_path / "d"), *args[1:])
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr


def test_users_cli_refuses_a_data_dir_in_use(tmp_path: Path) -> None:
    lock = DataDirLock(tmp_path).acquire()  # as a running broker holds it
    try:
        r = run_cli("add", "--data-dir", str(tmp_path), "--user", "x", "--password", "p")
    finally:
        lock.release()
    assert r.returncode == 2
    assert "in use by another broker" in r.stderr and "AlterUserScramCredentials" in r.stderr
    assert not (tmp_path / FILE_NAME).exists()


def test_users_cli_reports_a_damaged_file(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"groupstream-scram-credentials 1 00000000\n{}")
    r = run_cli("list", "--data-dir", str(tmp_path))
    assert r.returncode == 2 and "damaged" in r.stderr and "Traceback" not in r.stderr
