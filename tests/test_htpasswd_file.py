"""htpasswd checks: bcrypt only, reload on change, a one-minute success cache, equal cost for unknown users."""
from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import bcrypt
import pytest

from tests.support.auth import auth_paths, bcrypt_entry, write_htpasswd  # noqa: F401  (fixture)
from tokens import htpasswd
from tokens.htpasswd import check_password


@pytest.fixture
def bcrypt_runs(monkeypatch) -> list[bytes]:
    runs: list[bytes] = []
    real = bcrypt.checkpw

    def counting(password: bytes, hashed: bytes) -> bool:
        runs.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", counting)
    return runs


@pytest.mark.parametrize("prefix", ["$2y$", "$2a$", "$2b$"])
def test_it_accepts_every_bcrypt_variant(auth_paths, prefix: str) -> None:
    auth_paths.htpasswd_file.write_text(bcrypt_entry("carol", "s3cret", prefix) + "\n")
    assert check_password("carol", "s3cret")
    assert not check_password("carol", "S3cret")


@pytest.mark.parametrize("entry", [
    "dave:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=",
    "dave:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/",
    "dave:rqXexS6ZhobKA",
    "dave:password",
    "dave:$2b$04$tooshort",
])
def test_it_never_authenticates_a_non_bcrypt_entry_and_warns_once(auth_paths, caplog, entry: str) -> None:
    auth_paths.htpasswd_file.write_text(entry + "\n" + bcrypt_entry("alice", "wonderland") + "\n")
    with caplog.at_level(logging.WARNING, logger="tokens.htpasswd"):
        assert not check_password("dave", "password")
        assert not check_password("dave", "password")
        auth_paths.htpasswd_file.write_text(entry + "\n")  # a reload must not warn again
        assert not check_password("dave", "password")
    warnings = [r.getMessage() for r in caplog.records if "dave" in r.getMessage()]
    assert len(warnings) == 1
    assert entry.split(":", 1)[1] not in warnings[0]


def test_it_rereads_the_file_when_it_changes(auth_paths) -> None:
    assert check_password("alice", "wonderland")
    write_htpasswd(auth_paths.htpasswd_file, {"alice": "looking-glass"})
    assert check_password("alice", "looking-glass")
    assert not check_password("alice", "wonderland")
    assert not check_password("bob", "builder")


def test_it_runs_bcrypt_once_a_minute_for_a_correct_password(auth_paths, bcrypt_runs, monkeypatch) -> None:
    for _ in range(5):
        assert check_password("alice", "wonderland")
    assert len(bcrypt_runs) == 1
    clock = htpasswd.time.monotonic() + 61
    monkeypatch.setattr(htpasswd.time, "monotonic", lambda: clock)
    assert check_password("alice", "wonderland")
    assert len(bcrypt_runs) == 2


def test_it_never_caches_a_failure(auth_paths, bcrypt_runs) -> None:
    for _ in range(3):
        assert not check_password("alice", "wrong")
    assert len(bcrypt_runs) == 3


def test_it_forgets_a_cached_password_when_the_entry_changes(auth_paths) -> None:
    assert check_password("alice", "wonderland")
    write_htpasswd(auth_paths.htpasswd_file, {"alice": "changed"})
    assert not check_password("alice", "wonderland")


def test_it_makes_unknown_users_pay_one_bcrypt_run(auth_paths, bcrypt_runs) -> None:
    assert not check_password("mallory", "wonderland")
    assert len(bcrypt_runs) == 1
    assert bcrypt_runs[0].startswith(b"$2b$04$")  # the dummy hash costs what the file's entries cost


def test_it_makes_unknown_users_pay_the_highest_cost_in_the_file(auth_paths) -> None:
    slow = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=6)).decode()
    auth_paths.htpasswd_file.write_text(bcrypt_entry("fast", "pw") + "\n" + f"slow:{slow}\n")
    assert htpasswd.current_file().snapshot().cost == 6
    dummy = htpasswd._dummy_hash(htpasswd.current_file().snapshot().cost)
    assert dummy.startswith(b"$2b$06$")


def test_it_checks_only_the_first_72_bytes_as_htpasswd_does(auth_paths) -> None:
    long = "x" * 72
    write_htpasswd(auth_paths.htpasswd_file, {"erin": long})
    assert check_password("erin", long + "ignored by bcrypt")


def test_it_refuses_everyone_when_the_file_is_missing(auth_paths, caplog) -> None:
    auth_paths.htpasswd_file.unlink()
    with caplog.at_level(logging.ERROR, logger="tokens.htpasswd"):
        assert not check_password("alice", "wonderland")
        assert not check_password("alice", "wonderland")
    assert len([r for r in caplog.records if "cannot be read" in r.getMessage()]) == 1


def test_it_skips_comments_and_malformed_lines(auth_paths) -> None:
    auth_paths.htpasswd_file.write_text(
        "# users\n\nno-colon-here\n:$2b$04$x\n" + bcrypt_entry("alice", "wonderland") + "\n")
    assert check_password("alice", "wonderland")


def test_it_writes_a_new_file_with_a_bcrypt_entry(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "users.htpasswd"
    assert htpasswd.set_password(path, "frank", "pw-frank", cost=4)
    username, hashed = path.read_text().strip().split(":", 1)
    assert username == "frank"
    assert hashed.startswith("$2b$04$")
    assert bcrypt.checkpw(b"pw-frank", hashed.encode())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_it_replaces_an_entry_and_keeps_the_others(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    path = write_htpasswd(tmp_path / "etc" / "users.htpasswd", {"alice": "a", "bob": "b"})
    os.chmod(path, 0o640)
    before = path.read_text().splitlines()
    assert not htpasswd.set_password(path, "alice", "new", cost=4)
    after = path.read_text().splitlines()
    assert after[0] == before[1]
    assert after[1].startswith("alice:$2b$04$") and len(after) == 2
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in path.parent.iterdir()] == ["users.htpasswd"]


@pytest.mark.parametrize(("username", "password"), [
    ("", "pw"), ("a:b", "pw"), ("with space", "pw"), ("tab\tname", "pw"), ("ok", ""), ("ok", "x" * 73),
])
def test_it_refuses_entries_htpasswd_could_not_hold(tmp_path: Path, username: str, password: str) -> None:
    with pytest.raises(ValueError):
        htpasswd.set_password(tmp_path / "users.htpasswd", username, password, cost=4)
    assert not (tmp_path / "users.htpasswd").exists()
