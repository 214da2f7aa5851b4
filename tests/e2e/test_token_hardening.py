"""Under gunicorn: the token endpoints take JSON only (a cross-site text/plain or form POST from a web
page fails) and read chunked bodies; a token dies with its user, and with the password it was made
with, and a later user of the same name does not inherit it; one user holds a bounded number; the
scheduled maintenance purges expired tokens and binds those of an earlier release to their owner."""
from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Callable

import pytest

from registry.storage import paths
from tests.support.auth import bcrypt_entry, write_htpasswd
from tests.support.rawhttp import Client, Reply
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e
ALICE = {"username": "alice", "password": "wonderland"}
BOB = {"username": "bob", "password": "builder"}


@pytest.fixture
def server(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> RegistryServer:
    (tmp_path / "server").mkdir()
    write_htpasswd(tmp_path / "server" / "users.htpasswd", {"alice": "wonderland", "bob": "builder"})
    return start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_MAX_TOKENS_PER_USER="3")


def edit_entry(htpasswd_file: Path, username: str, password: str | None) -> None:
    """Remove the user's line and append a new entry for ``password`` (None: none), as an editor
    would: not through manage.py adduser, which also deletes the user's tokens."""
    kept = [line for line in htpasswd_file.read_text().splitlines() if not line.startswith(f"{username}:")]
    if password is not None:
        kept.append(bcrypt_entry(username, password))
    htpasswd_file.write_text("".join(line + "\n" for line in kept))


def post(http: Client, path: str, body: dict, content_type: str = "application/json", **kw: bool) -> Reply:
    return http.request("POST", path, json.dumps(body).encode(), {"Content-Type": content_type}, **kw)


def test_a_web_page_cannot_reach_the_token_endpoints(server: RegistryServer) -> None:
    http = Client(server.host)
    # What a cross-site <form> or fetch(..., {mode: "no-cors"}) can send without a preflight.
    for content_type in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded"):
        reply = http.request("POST", "/api/tokens", json.dumps({**ALICE, "role": "admin"}).encode(),
                             {"Content-Type": content_type, "Origin": "https://evil.example"})
        assert reply.status == 415, (content_type, reply.body)
    assert post(http, "/api/tokens/list", ALICE).json()["tokens"] == []


def test_a_chunked_body_is_read(server: RegistryServer) -> None:
    http = Client(server.host)
    created = post(http, "/api/tokens", {**ALICE, "role": "write"}, chunked=True)
    assert created.status == 201, created.body
    listed = post(http, "/api/tokens/list", ALICE, chunked=True)
    assert [t["hash_prefix"] for t in listed.json()["tokens"]] == [created.json()["hash_prefix"]]


@pytest.mark.parametrize("backend", ["files", "database"])
def test_a_token_dies_with_its_user_and_no_later_user_of_the_name_inherits_it(
        start_registry: Callable[..., RegistryServer], tmp_path: Path, backend: str) -> None:
    (tmp_path / "server").mkdir()
    users = tmp_path / "server" / "users.htpasswd"
    write_htpasswd(users, {"alice": "wonderland", "bob": "builder"})
    server = start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_TOKEN_BACKEND=backend)
    http = Client(server.host)
    token = post(http, "/api/tokens", {**BOB, "role": "admin"}).json()["token"]
    alices = post(http, "/api/tokens", {**ALICE, "role": "write"}).json()["token"]
    bearer = {"Authorization": f"Bearer {token}"}
    for _ in range(4):  # every worker has seen it, and keeps its verdict while nothing changes
        assert http.request("GET", "/v2/_catalog", headers=bearer).status == 200
    edit_entry(users, "bob", None)  # bob is removed; alice's line stays as it was
    assert http.request("GET", "/v2/_catalog", headers=bearer).status == 401
    listed = server.manage("listtokens")
    assert "orphaned" in listed.stdout and "bob" in listed.stdout
    # Someone else named bob is added by editing the file, and no one purged the old tokens.
    edit_entry(users, "bob", "a new bob")
    for headers in (bearer, {"Authorization": "Basic " + base64.b64encode(f"token:{token}".encode()).decode()}):
        for _ in range(4):
            assert http.request("GET", "/v2/_catalog", headers=headers).status == 401  # not inherited
    new_bob = {"username": "bob", "password": "a new bob"}
    assert post(http, "/api/tokens/list", new_bob).json()["tokens"] == []
    # A password changed because it leaked revokes what was made with it.
    assert http.request("GET", "/v2/_catalog", headers={"Authorization": f"Bearer {alices}"}).status == 200
    edit_entry(users, "alice", "a new password")
    assert http.request("GET", "/v2/_catalog", headers={"Authorization": f"Bearer {alices}"}).status == 401
    purged = server.manage("purgetokens", "--orphaned")
    assert purged.stdout.strip() == "deleted 2 orphaned tokens (of alice, bob)", purged.stderr


def test_one_user_holds_at_most_max_tokens_per_user(server: RegistryServer) -> None:
    http = Client(server.host)
    for _ in range(3):
        assert post(http, "/api/tokens", ALICE).status == 201
    refused = post(http, "/api/tokens", ALICE)
    assert refused.status == 400
    assert "max_tokens_per_user" in refused.json()["error"]
    assert post(http, "/api/tokens", BOB).status == 201


@pytest.mark.parametrize("backend", ["files", "database"])
def test_the_scheduled_maintenance_purges_expired_tokens_and_binds_old_ones(
        start_registry: Callable[..., RegistryServer], tmp_path: Path, backend: str) -> None:
    (tmp_path / "server").mkdir()
    users = tmp_path / "server" / "users.htpasswd"
    write_htpasswd(users, {"alice": "wonderland", "bob": "builder"})
    server = start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_TOKEN_BACKEND=backend)
    http = Client(server.host)
    live, expired, legacy = (post(http, "/api/tokens", body).json() for body in (ALICE, ALICE, BOB))
    server.stop()
    # One token's expiry passes; another looks as one an earlier release made (no owner stamp).
    digests = {name: hashlib.sha256(t["token"].encode()).hexdigest() for name, t in
               (("expired", expired), ("legacy", legacy))}
    if backend == "files":
        def rewrite(name: str, change: Callable[[dict], object]) -> None:
            path = server.workdir / "tokens" / digests[name]
            record = json.loads(path.read_text())
            change(record)
            path.write_text(json.dumps(record))

        rewrite("expired", lambda record: record.update(expires_at="2000-01-01T00:00:00+00:00"))
        rewrite("legacy", lambda record: record.pop("owner_stamp"))
    else:
        with sqlite3.connect(server.workdir / "db.sqlite3") as db:
            db.execute("UPDATE tokens_token SET expires_at = '2000-01-01 00:00:00' WHERE digest = ?",
                       (digests["expired"],))
            db.execute("UPDATE tokens_token SET owner_stamp = '' WHERE digest = ?", (digests["legacy"],))
    schedule = Path(server.env()["SVC_STORAGE_ROOT"]) / paths.GC_SCHEDULE
    schedule.parent.mkdir(parents=True, exist_ok=True)
    schedule.write_text(f"{time.time() - 2 * 3600!r}\n")  # the last run was two hours ago
    server.env_overrides["SVC_GC_INTERVAL_HOURS"] = "1"
    server.start()

    deadline = time.monotonic() + 20
    while "scheduled maintenance purged 1 expired API tokens" not in server.log_path.read_text():
        assert time.monotonic() < deadline, server.log_path.read_text()[-3000:]
        time.sleep(0.2)
    assert "scheduled maintenance bound 1 API tokens made before owner stamps" in server.log_path.read_text()
    listed = json.loads(server.manage("listtokens", "--json").stdout)["tokens"]
    assert {t["hash_prefix"] for t in listed} == {live["hash_prefix"], legacy["hash_prefix"]}
    assert http.request("GET", "/v2/_catalog", headers={"Authorization": f"Bearer {live['token']}"}).status == 200
    # Bound before its first use: bob's password changed since, so it is refused.
    edit_entry(users, "bob", "a new bob")
    assert http.request("GET", "/v2/_catalog", headers={"Authorization": f"Bearer {legacy['token']}"}).status == 401
