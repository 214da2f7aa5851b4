"""A token belongs to the user it was made for, not to a name: a user added again by editing the
htpasswd file, or whose password changed, holds none of the tokens made before. Tokens made before
stamps existed are stamped at their first use or by the scheduled maintenance."""
from __future__ import annotations

import dataclasses
import io
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from registry import scheduler
from tests.support.auth import auth_on, auth_paths, basic, bcrypt_entry, bearer  # noqa: F401  (fixtures)
from tokens import bearer as signed, htpasswd, owner_stamp, services

pytestmark = pytest.mark.django_db
BOB = {"username": "bob", "password": "a new bob"}


def edit_entry(htpasswd_file: Path, username: str, password: str | None) -> None:
    """Remove the user's line, and add a new entry for ``password`` (None: none), as an editor does."""
    kept = [line for line in htpasswd_file.read_text().splitlines() if not line.startswith(f"{username}:")]
    if password is not None:
        kept.append(bcrypt_entry(username, password))
    htpasswd_file.write_text("".join(line + "\n" for line in kept))


def run(*args: str, **options: Any) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def unstamp(created: services.CreatedToken) -> None:
    """Make the record look as it did before stamps existed."""
    repo = services.repository()
    stored = repo.get(services.token_digest(created.token))
    repo.save(dataclasses.replace(stored, owner_stamp=owner_stamp.UNSTAMPED))


def stamp_of(created: services.CreatedToken) -> str:
    return services.repository().get(services.token_digest(created.token)).owner_stamp


def catalog(client, token: str) -> int:
    return client.get("/v2/_catalog", HTTP_AUTHORIZATION=bearer(token)).status_code


@pytest.fixture(params=["files", "database"])
def backend(request, settings, auth_on) -> Any:  # noqa: F811
    settings.AUTH_TOKEN_BACKEND = request.param
    return auth_on


def test_a_user_added_again_by_editing_the_file_does_not_inherit_the_tokens(client, backend) -> None:
    old = services.create_token("bob", "admin")
    assert catalog(client, old.token) == 200  # and the verdict is cached
    edit_entry(backend.htpasswd_file, "bob", None)
    assert catalog(client, old.token) == 401
    edit_entry(backend.htpasswd_file, "bob", "a new bob")  # no purge in between
    assert catalog(client, old.token) == 401
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("token", old.token)).status_code == 401
    assert services.authenticate_token(old.token) is None
    # The new bob neither sees nor can revoke the old bob's tokens; the server lists them as orphaned.
    listed = client.post("/api/tokens/list", json.dumps(BOB), content_type="application/json")
    assert listed.json()["tokens"] == []
    revoked = client.post("/api/tokens/revoke", json.dumps({**BOB, "hash_prefix": old.hash_prefix}),
                          content_type="application/json")
    assert revoked.status_code == 404
    assert {t["hash_prefix"]: t["orphaned"] for t in json.loads(run("listtokens", "--json"))["tokens"]} == {
        old.hash_prefix: True}
    new = services.create_token("bob")
    assert catalog(client, new.token) == 200
    assert run("purgetokens", "--orphaned") == "deleted 1 orphaned tokens (of bob)\n"
    assert [r.hash_prefix for r in services.list_tokens()] == [new.hash_prefix]


def test_a_password_changed_in_the_file_revokes_the_users_tokens(client, backend) -> None:
    leaked = services.create_token("alice", "write")
    other = services.create_token("bob", "write")
    assert catalog(client, leaked.token) == 200
    edit_entry(backend.htpasswd_file, "alice", "a new password")
    assert catalog(client, leaked.token) == 401
    assert catalog(client, other.token) == 200  # bob's entry did not change
    assert catalog(client, services.create_token("alice").token) == 200


def test_a_signed_token_issued_for_an_api_token_dies_with_it(client, backend, settings) -> None:
    api_token = services.create_token("bob", "read")
    issued = client.get("/auth/token?service=svc-registry&scope=registry:catalog:*",
                        HTTP_AUTHORIZATION=basic("token", api_token.token))
    assert issued.status_code == 200
    jwt = issued.json()["token"]
    assert signed.verify_access(jwt).name == "bob"
    edit_entry(backend.htpasswd_file, "bob", "a new bob")
    with pytest.raises(signed.InvalidToken):
        signed.verify_access(jwt)


def test_a_token_made_before_stamps_is_stamped_at_its_first_use(client, backend) -> None:
    legacy = services.create_token("bob", "admin")
    unstamp(legacy)
    assert stamp_of(legacy) == owner_stamp.UNSTAMPED
    assert catalog(client, legacy.token) == 200  # honoured, and stamped with bob's entry now
    assert stamp_of(legacy) == owner_stamp.current("bob", htpasswd.current_file().snapshot())
    edit_entry(backend.htpasswd_file, "bob", "a new bob")
    assert catalog(client, legacy.token) == 401


def test_an_unstamped_token_of_a_user_who_is_gone_stays_unstamped_and_refused(client, backend) -> None:
    legacy = services.create_token("bob")
    unstamp(legacy)
    edit_entry(backend.htpasswd_file, "bob", None)
    assert catalog(client, legacy.token) == 401
    assert stamp_of(legacy) == owner_stamp.UNSTAMPED
    assert services.stamp_unstamped() == 0
    assert run("purgetokens", "--orphaned") == "deleted 1 orphaned tokens (of bob)\n"


def test_the_scheduled_maintenance_stamps_tokens_made_before_stamps(client, backend, settings) -> None:
    settings.REGISTRY_GC_INTERVAL_HOURS = 1
    legacy = services.create_token("alice")
    unstamp(legacy)
    assert scheduler.run_if_due(now=2_000_000.0) is None  # the first poll only notes the time
    assert scheduler.run_if_due(now=2_000_000.0 + 3601) is not None
    assert stamp_of(legacy) == owner_stamp.current("alice", htpasswd.current_file().snapshot())
    edit_entry(backend.htpasswd_file, "alice", "changed before the token was ever used")
    assert catalog(client, legacy.token) == 401


def test_a_revocation_racing_the_first_use_is_not_undone(backend) -> None:
    legacy = services.create_token("alice")
    unstamp(legacy)
    repo = services.repository()
    digest = services.token_digest(legacy.token)
    assert repo.delete(digest)
    assert repo.stamp(digest, "0" * 64) is None
    assert repo.get(digest) is None


def test_adduser_deletes_the_tokens_a_password_change_revokes(backend) -> None:
    kept = services.create_token("bob")
    services.create_token("alice")
    out = run("adduser", "alice", "--password-stdin", "--cost", "4", stdin=io.StringIO("rabbit-hole\n"))
    assert "Deleted 1 tokens of alice: they were made with the old password." in out
    assert [r.hash_prefix for r in services.list_tokens()] == [kept.hash_prefix]


def test_dead_tokens_do_not_hold_places_under_max_tokens_per_user(client, backend, settings) -> None:
    settings.AUTH_MAX_TOKENS_PER_USER = 2
    for _ in range(2):
        services.create_token("alice")
    edit_entry(backend.htpasswd_file, "alice", "a new password")
    created = services.create_token("alice")
    assert [r.hash_prefix for r in services.list_tokens("alice")] == [created.hash_prefix]


def test_a_token_is_made_only_for_a_user_in_the_file(backend) -> None:
    with pytest.raises(services.InvalidTokenRequest, match="no user 'carol' in the htpasswd file"):
        services.create_token("carol")
    assert services.list_tokens() == []


def test_copytokens_carries_the_stamps_into_the_database(client, settings, auth_on) -> None:  # noqa: F811
    kept = services.create_token("alice", "write")
    bobs = services.create_token("bob", "write")
    settings.AUTH_TOKEN_BACKEND = "database"
    run("copytokens")
    assert stamp_of(kept) == owner_stamp.current("alice", htpasswd.current_file().snapshot())
    edit_entry(auth_on.htpasswd_file, "bob", "a new bob")
    assert catalog(client, kept.token) == 200
    assert catalog(client, bobs.token) == 401


def test_an_expired_token_made_before_stamps_is_not_written_to(backend) -> None:
    legacy = services.create_token("alice")
    unstamp(legacy)
    repo = services.repository()
    stored = repo.get(services.token_digest(legacy.token))
    repo.save(dataclasses.replace(stored, expires_at=stored.created_at - timedelta(seconds=1)))
    assert services.authenticate_token(legacy.token) is None
    assert stamp_of(legacy) == owner_stamp.UNSTAMPED


def test_a_token_that_cannot_be_stamped_is_honoured_as_before(backend, monkeypatch, caplog) -> None:
    legacy = services.create_token("alice")
    unstamp(legacy)

    def read_only(*args: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(type(services.repository()), "stamp", read_only)
    with caplog.at_level(logging.WARNING, logger="tokens.services"):
        assert services.authenticate_token(legacy.token).owner == "alice"
    assert "could not be stamped" in caplog.text
    assert stamp_of(legacy) == owner_stamp.UNSTAMPED
