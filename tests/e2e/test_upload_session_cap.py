"""Under gunicorn, upload sessions cannot be piled up: 1,000 POSTs as fast as a client can send them
(the attack that kept 1,000 sessions for 24 h) leave at most [registry] max_upload_sessions (500)
sessions, the rest answered 429 TOOMANYREQUESTS; other clients and other users push on."""
from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.faults.wire import Registry
from tests.support.auth import basic, write_htpasswd
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e
START = "/v2/team/app/blobs/uploads/"


def _sessions(server: RegistryServer) -> dict[str, int]:
    with sqlite3.connect(server.workdir / "db.sqlite3") as db:
        return dict(db.execute("SELECT owner, COUNT(*) FROM registry_upload GROUP BY owner").fetchall())


def _flood(client: Registry, count: int) -> list[int]:
    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(lambda _: client.request("POST", START).status, range(count)))


def test_a_thousand_anonymous_sessions_are_capped_per_address(start_registry) -> None:
    server = start_registry()
    attacker = Registry(server.host, source="127.0.0.1")
    statuses = _flood(attacker, 1000)
    assert set(statuses) == {202, 429} and statuses.count(202) <= 500
    while attacker.request("POST", START).status == 202:  # racers fell short of it; fill it
        pass
    assert _sessions(server) == {"address:127.0.0.1": 500}
    refused = attacker.request("POST", START)
    assert refused.status == 429 and int(refused.header("Retry-After")) > 0
    assert json.loads(refused.body)["errors"][0]["code"] == "TOOMANYREQUESTS"

    neighbour = Registry(server.host, source="127.0.0.2")
    assert neighbour.push_blob("team/app", b"another client pushes on")
    assert neighbour.request("POST", START).status == 202
    assert _sessions(server) == {"address:127.0.0.1": 500, "address:127.0.0.2": 1}


def test_one_users_sessions_are_capped_whatever_the_credentials(start_registry, tmp_path) -> None:
    users = write_htpasswd(tmp_path / "users", {"alice": "pw", "bob": "pw2"})
    server = start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_HTPASSWD_FILE=str(users),
                            SVC_REGISTRY_MAX_UPLOAD_SESSIONS="40")
    token = server.manage("createtoken", "--username", "alice", "--role", "write").stdout.strip()
    by_password = Registry(server.host, headers={"Authorization": basic("alice", "pw")})
    by_token = Registry(server.host, headers={"Authorization": f"Bearer {token}"})
    statuses = _flood(by_password, 100) + _flood(by_token, 100)
    assert statuses.count(202) <= 40 and set(statuses) == {202, 429}
    bob = Registry(server.host, headers={"Authorization": basic("bob", "pw2")})
    assert bob.request("POST", START).status == 202
    assert _sessions(server)["user:alice"] <= 40 and _sessions(server)["user:bob"] == 1
