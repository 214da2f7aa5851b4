"""One suite for both token repositories (files and database): what the service layer relies on. Then
the token API, the management commands and Bearer authentication with the database backend, and
copying the files backend's tokens into the database without re-issuing any."""
from __future__ import annotations

import hashlib
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.support.auth import auth_on, auth_paths, bearer  # noqa: F401  (fixtures)
from tokens import services
from tokens.access import Role
from tokens.db_repository import DatabaseTokenRepository
from tokens.repository import StoredToken, TokenRepository, TokenStore

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 24, 8, 0, tzinfo=timezone.utc)


def record(n: int, owner: str = "alice", role: str = "read", stamp: str = "") -> StoredToken:
    digest = hashlib.sha256(f"token {n}".encode()).hexdigest()
    return StoredToken(digest, owner, role, f"token {n}", NOW, NOW + timedelta(days=n), stamp)


STAMP_A, STAMP_B = "a" * 64, "b" * 64


@pytest.fixture(params=["files", "database"])
def repo(request, tmp_path: Path) -> TokenStore:
    return TokenRepository(tmp_path / "tokens") if request.param == "files" else DatabaseTokenRepository()


def test_it_gets_what_it_saved_and_nothing_else(repo: TokenStore) -> None:
    repo.ensure_directory()
    repo.save(record(1))
    assert repo.get(record(1).digest) == record(1)
    assert repo.get(record(2).digest) is None
    assert repo.get("not-a-digest") is None and repo.get("") is None


def test_it_replaces_a_record_saved_again(repo: TokenStore) -> None:
    repo.save(record(1))
    changed = StoredToken(record(1).digest, "alice", "admin", "promoted", NOW, NOW + timedelta(days=9))
    repo.save(changed)
    assert repo.get(changed.digest) == changed
    assert len(repo.all()) == 1


def test_it_lists_all_records_or_those_of_a_hash_prefix(repo: TokenStore) -> None:
    for n in range(1, 6):
        repo.save(record(n, owner="alice" if n % 2 else "bob"))
    assert {r.digest for r in repo.all()} == {record(n).digest for n in range(1, 6)}
    prefix = record(3).digest[:16]
    assert [r.digest for r in repo.all(prefix)] == [record(3).digest]
    assert repo.all("0" * 16) == []


def test_it_deletes_a_record_once(repo: TokenStore) -> None:
    repo.save(record(1))
    assert repo.delete(record(1).digest) is True
    assert repo.get(record(1).digest) is None
    assert repo.delete(record(1).digest) is False


def test_it_keeps_the_owner_stamp_and_records_without_one(repo: TokenStore) -> None:
    repo.save(record(1, stamp=STAMP_A))
    repo.save(record(2))  # made before stamps existed
    assert repo.get(record(1).digest).owner_stamp == STAMP_A
    assert repo.get(record(2).digest).owner_stamp == ""
    assert {r.digest: r.owner_stamp for r in repo.of_owner("alice")} == {
        record(1).digest: STAMP_A, record(2).digest: ""}
    assert {r.owner_stamp for r in repo.all()} == {STAMP_A, ""}


def test_it_stamps_an_unstamped_record_once(repo: TokenStore) -> None:
    repo.save(record(1))
    assert repo.stamp(record(1).digest, STAMP_A) == record(1, stamp=STAMP_A)
    assert repo.get(record(1).digest) == record(1, stamp=STAMP_A)
    # Stamped already (by another worker, with the entry it saw): left as it is.
    assert repo.stamp(record(1).digest, STAMP_B) == record(1, stamp=STAMP_A)
    assert repo.get(record(1).digest).owner_stamp == STAMP_A


def test_stamping_a_deleted_record_does_not_bring_it_back(repo: TokenStore) -> None:
    repo.save(record(1))
    repo.delete(record(1).digest)
    assert repo.stamp(record(1).digest, STAMP_A) is None
    assert repo.get(record(1).digest) is None and repo.all() == []


def test_it_finds_one_owners_records(repo: TokenStore) -> None:
    for n in range(1, 7):
        repo.save(record(n, owner="alice" if n % 3 else "bob"))
    assert sorted(r.digest for r in repo.of_owner("bob")) == sorted(record(n).digest for n in (3, 6))
    assert repo.of_owner("carol") == []
    assert repo.owners() == {"alice", "bob"}


def test_it_counts_live_records_by_owner_and_by_role(repo: TokenStore) -> None:
    repo.save(record(1, role="read"))               # expires NOW + 1 day
    repo.save(record(2, role="write"))              # NOW + 2 days
    repo.save(record(3, owner="bob", role="write"))  # NOW + 3 days
    later = NOW + timedelta(days=2)
    assert repo.live_count_of("alice", NOW) == 2
    assert repo.live_count_of("alice", later) == 0  # one expired, the other expires exactly then
    assert repo.live_counts(NOW) == {Role.READ: 1, Role.WRITE: 2, Role.ADMIN: 0}
    assert repo.live_counts(later) == {Role.READ: 0, Role.WRITE: 1, Role.ADMIN: 0}


def test_it_deletes_the_records_expired_by_a_moment(repo: TokenStore) -> None:
    for n in range(1, 5):
        repo.save(record(n))
    assert repo.delete_expired(NOW + timedelta(days=2)) == 2
    assert sorted(r.digest for r in repo.all()) == sorted(record(n).digest for n in (3, 4))
    assert repo.delete_expired(NOW) == 0


def test_it_sees_records_saved_and_deleted_in_the_same_instant(repo: TokenStore) -> None:
    # The files backend indexes the directory by its modification time, which is coarse.
    repo.ensure_directory()
    assert repo.of_owner("alice") == []
    repo.save(record(1))
    assert [r.digest for r in repo.of_owner("alice")] == [record(1).digest]
    repo.save(record(2))
    repo.delete(record(1).digest)
    assert [r.digest for r in repo.of_owner("alice")] == [record(2).digest]
    assert repo.live_counts(NOW)[Role.READ] == 1


@pytest.fixture
def database_backend(settings, auth_on) -> Any:  # noqa: F811
    settings.AUTH_TOKEN_BACKEND = "database"
    return auth_on


def test_the_token_api_and_bearer_auth_work_with_the_database(client, database_backend) -> None:
    body = {"username": "alice", "password": "wonderland"}
    created = client.post("/api/tokens", json.dumps({**body, "role": "write"}), content_type="application/json")
    assert created.status_code == 201
    token, prefix = created.json()["token"], created.json()["hash_prefix"]
    assert not database_backend.token_storage.exists() or not any(database_backend.token_storage.iterdir())
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=bearer(token)).status_code == 200
    listed = client.post("/api/tokens/list", json.dumps(body), content_type="application/json").json()
    assert [t["hash_prefix"] for t in listed["tokens"]] == [prefix]
    revoked = client.post("/api/tokens/revoke", json.dumps({**body, "hash_prefix": prefix}),
                          content_type="application/json")
    assert revoked.status_code == 200
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=bearer(token)).status_code == 401


def test_the_token_commands_work_with_the_database(database_backend) -> None:
    out = io.StringIO()
    call_command("createtoken", "--username", "alice", "--role", "admin", stdout=out, stderr=io.StringIO())
    token = out.getvalue().strip()
    assert services.authenticate_token(token).role == "admin"
    listed = io.StringIO()
    call_command("listtokens", "--json", stdout=listed)
    [entry] = json.loads(listed.getvalue())["tokens"]
    call_command("revoketoken", entry["hash_prefix"], stdout=io.StringIO())
    assert services.authenticate_token(token) is None


def test_copytokens_moves_every_file_token_into_the_database_unchanged(settings, auth_on) -> None:  # noqa: F811
    kept = services.create_token("alice", "write", 30, "laptop")
    expired = services.create_token("bob", "read", 1)
    settings.AUTH_TOKEN_BACKEND = "database"
    assert services.authenticate_token(kept.token) is None  # not in the database yet
    out = io.StringIO()
    call_command("copytokens", stdout=out)
    assert out.getvalue().strip() == "copied 2 tokens into the database; 0 were there already."
    assert services.authenticate_token(kept.token).owner == "alice"  # the same token, not a new one
    assert {r.hash_prefix for r in services.list_tokens()} == {kept.hash_prefix, expired.hash_prefix}
    again = io.StringIO()
    call_command("copytokens", stdout=again)
    assert again.getvalue().strip() == "copied 0 tokens into the database; 2 were there already."


def test_copytokens_refuses_without_a_token_directory(settings, tmp_path) -> None:
    settings.AUTH_TOKEN_STORAGE = tmp_path / "nowhere"
    with pytest.raises(CommandError, match="no token directory"):
        call_command("copytokens", stdout=io.StringIO())
