"""Token files: named by the token's SHA-256, private, atomic, never holding the token itself."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import stat
from datetime import timedelta

import bcrypt
import pytest

from tests.support.auth import auth_paths  # noqa: F401  (fixture)
from tokens import htpasswd, owner_stamp, services


def test_it_stores_one_private_file_named_by_the_hash(auth_paths) -> None:
    created = services.create_token("alice", "write", 3, "laptop")
    digest = hashlib.sha256(created.token.encode()).hexdigest()
    directory = auth_paths.token_storage
    assert [p.name for p in directory.iterdir()] == [digest]
    assert created.hash_prefix == digest[:16]
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    path = directory / digest
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert created.token not in text
    assert created.token[4:] not in text
    record = json.loads(text)
    assert record == {
        "owner": "alice", "role": "write", "description": "laptop", "hash": digest,
        "created_at": created.created_at.isoformat(), "expires_at": created.expires_at.isoformat(),
        "owner_stamp": owner_stamp.current("alice", htpasswd.current_file().snapshot()),
    }


def test_it_verifies_with_one_lookup_and_no_bcrypt_or_scan(auth_paths, monkeypatch) -> None:
    created = services.create_token("alice", "read")

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("token verification must not scan the directory or run bcrypt")

    monkeypatch.setattr(os, "scandir", forbidden)
    monkeypatch.setattr(os, "listdir", forbidden)
    monkeypatch.setattr(bcrypt, "checkpw", forbidden)
    record = services.authenticate_token(created.token)
    assert record is not None
    assert (record.owner, record.role, record.hash_prefix) == ("alice", "read", created.hash_prefix)


def test_it_refuses_an_expired_token_but_still_lists_it(auth_paths) -> None:
    created = services.create_token("alice", "read")
    repo = services.repository()
    stored = repo.get(services.token_digest(created.token))
    repo.save(dataclasses.replace(stored, expires_at=stored.created_at - timedelta(seconds=1)))
    assert services.authenticate_token(created.token) is None
    [listed] = services.list_tokens("alice")
    assert listed.expired


def test_a_token_in_use_is_refused_from_the_second_it_expires(auth_paths, monkeypatch) -> None:
    # Nothing on disk changes: the check of a token seen a moment ago must still look at the clock.
    created = services.create_token("alice", "read", ttl_days=1)
    expiry = created.expires_at.timestamp()
    monkeypatch.setattr(services.time, "time", lambda: expiry - 0.5)
    assert services.authenticate_token(created.token) is not None
    assert services.authenticate_token(created.token) is not None
    monkeypatch.setattr(services.time, "time", lambda: expiry)
    assert services.authenticate_token(created.token) is None


@pytest.mark.parametrize("token", ["", "svc_", "svc_short", "abc_" + "A" * 43, "svc_" + "A" * 44,
                                   "svc_" + "A" * 42 + "!"])
def test_it_refuses_strings_that_are_not_tokens(auth_paths, token: str) -> None:
    assert services.authenticate_token(token) is None


@pytest.mark.parametrize("content", [
    "not json", "[]", '{"owner": "alice"}', "\xff",
])
def test_it_skips_and_logs_corrupt_files(auth_paths, caplog, content: str) -> None:
    good = services.create_token("alice", "read")
    bad = services.create_token("alice", "admin")
    bad_path = auth_paths.token_storage / services.token_digest(bad.token)
    bad_path.write_text(content)
    with caplog.at_level(logging.WARNING, logger="tokens.repository"):
        assert services.authenticate_token(bad.token) is None
        assert [r.hash_prefix for r in services.list_tokens()] == [good.hash_prefix]
    assert any("corrupt" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("change", [
    {"role": "root"}, {"owner": ""}, {"hash": "0" * 64}, {"expires_at": "tomorrow"},
    {"expires_at": "2999-01-01T00:00:00"}, {"description": 5},
    {"owner_stamp": 5}, {"owner_stamp": "not hex"}, {"owner_stamp": "0" * 64},  # another entry's stamp
])
def test_it_never_grants_from_a_tampered_record(auth_paths, change: dict[str, object]) -> None:
    created = services.create_token("alice", "read")
    path = auth_paths.token_storage / services.token_digest(created.token)
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    assert services.authenticate_token(created.token) is None


def test_it_ignores_foreign_files_and_symlinks(auth_paths, caplog, tmp_path) -> None:
    created = services.create_token("alice", "read")
    directory = auth_paths.token_storage
    (directory / "README").write_text("hello")
    (directory / ".tmp-leftover").write_text("{}")
    (directory / ("f" * 64)).mkdir()
    outside = tmp_path / "planted.json"
    outside.write_text((directory / services.token_digest(created.token)).read_text())
    other = services.create_token("bob", "admin")
    os.unlink(directory / services.token_digest(other.token))
    os.symlink(outside, directory / services.token_digest(other.token))
    with caplog.at_level(logging.WARNING):
        assert [r.hash_prefix for r in services.list_tokens()] == [created.hash_prefix]
        assert services.authenticate_token(other.token) is None
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "README" in messages


def test_it_lists_nothing_before_the_directory_exists(auth_paths) -> None:
    assert not auth_paths.token_storage.exists()
    assert services.list_tokens() == []
    assert services.authenticate_token("svc_" + "A" * 43) is None


def test_it_leaves_no_temporary_file_when_a_write_fails(auth_paths, monkeypatch) -> None:
    services.create_token("alice", "read")

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        services.create_token("alice", "read")
    assert len(list(auth_paths.token_storage.iterdir())) == 1


def test_it_revokes_any_owners_token_when_no_owner_is_given(auth_paths) -> None:
    created = services.create_token("bob", "read")
    with pytest.raises(services.TokenNotFound):
        services.revoke_token("alice", created.hash_prefix)
    services.revoke_token(None, created.hash_prefix)
    assert services.authenticate_token(created.token) is None
    with pytest.raises(services.TokenNotFound):
        services.revoke_token(None, created.hash_prefix)
    with pytest.raises(services.InvalidPrefix):
        services.revoke_token(None, "xyz")


def test_it_refuses_a_token_for_the_reserved_username(auth_paths) -> None:
    with pytest.raises(services.InvalidTokenRequest) as caught:
        services.create_token("token")
    assert caught.value.field == "username"

