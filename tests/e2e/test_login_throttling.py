"""Under gunicorn (two workers): failed logins slow down the client address that makes them, never
the user they aim at. An attacker cannot keep alice out; 200 guesses sent at once get exactly the
allowed number checked; credentials sent to public endpoints are not even looked at."""
from __future__ import annotations

import base64
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import bcrypt
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.auth import write_htpasswd
from tests.support.rawhttp import Client, Reply
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

ALICE = {"username": "alice", "password": "wonderland"}


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


@pytest.fixture
def registry_with_users(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> Callable[..., RegistryServer]:
    def start(**env: str) -> RegistryServer:
        (tmp_path / "server").mkdir(exist_ok=True)
        write_htpasswd(tmp_path / "server" / "users.htpasswd", {"alice": "wonderland", "bob": "builder"})
        return start_registry(SVC_AUTH_ENABLED="true", **env)
    return start


def token_api(http: Client, body: dict, client: str | None = None, path: str = "/api/tokens") -> Reply:
    headers = {"Content-Type": "application/json"}
    if client:
        headers["X-Forwarded-For"] = client
    return http.request("POST", path, json.dumps(body).encode(), headers)


def metric(http: Client, name: str, **labels: str) -> float:
    text = http.request("GET", "/metrics").body.decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_two_hundred_guesses_at_once_get_exactly_ten_checked(registry_with_users, request, database: str) -> None:
    env = {"SVC_DATABASE_URL": request.getfixturevalue("postgres").new_database()} if database == "postgresql" else {}
    server = registry_with_users(**env)
    http = Client(server.host)
    wrong = {"username": "alice", "password": "not-it"}
    with ThreadPoolExecutor(max_workers=40) as pool:
        statuses = list(pool.map(lambda _: token_api(http, wrong).status, range(200)))
    assert statuses.count(401) == 10, {s: statuses.count(s) for s in set(statuses)}
    assert statuses.count(429) == 190
    assert metric(http, "registry_auth_attempts_total", mechanism="password", outcome="failure") == 10


def test_right_passwords_sent_at_once_from_one_address_all_get_in(start_registry, tmp_path: Path) -> None:
    # A CI runner pushing several images in parallel: more password checks at once than the
    # address's allowance of failures. At bcrypt cost 10 the checks overlap, so before checks in
    # flight were told apart from failures, the eleventh onwards answered 429.
    (tmp_path / "server").mkdir(exist_ok=True)
    hashed = bcrypt.hashpw(b"wonderland", bcrypt.gensalt(rounds=10)).decode()
    (tmp_path / "server" / "users.htpasswd").write_text(f"alice:{hashed}\n")
    server = start_registry(SVC_AUTH_ENABLED="true")
    http = Client(server.host)
    with ThreadPoolExecutor(max_workers=40) as pool:
        replies = list(pool.map(lambda _: token_api(http, ALICE, path="/api/tokens/list"), range(40)))
    assert [r.status for r in replies] == [200] * 40, [r.body[:200] for r in replies if r.status != 200]
    catalog = http.request("GET", "/v2/_catalog", headers={"Authorization": basic("alice", "wonderland")})
    assert catalog.status == 200


def test_an_attacker_cannot_keep_alice_out(registry_with_users) -> None:
    # Both come through the same trusted proxy (loopback here), which names each client.
    server = registry_with_users(SVC_SERVER_TRUSTED_PROXIES="127.0.0.1")
    http = Client(server.host)
    attacker, alice = "203.0.113.66", "198.51.100.10"
    for _ in range(40):
        token_api(http, {"username": "alice", "password": "guess"}, attacker)
        http.request("GET", "/v2/_catalog", headers={"Authorization": basic("alice", "guess"),
                                                       "X-Forwarded-For": attacker})
    refused = token_api(http, ALICE, attacker)
    assert refused.status == 429 and int(refused.header("Retry-After")) > 0

    created = token_api(http, {**ALICE, "role": "read"}, alice)
    assert created.status == 201, created.body
    catalog = http.request("GET", "/v2/_catalog", headers={"Authorization": basic("alice", "wonderland"),
                                                            "X-Forwarded-For": alice})
    assert catalog.status == 200
    revoked = token_api(http, {**ALICE, "hash_prefix": created.json()["hash_prefix"]}, alice, "/api/tokens/revoke")
    assert revoked.status == 200  # alice can still revoke a leaked token


def test_spraying_one_guess_per_user_is_slowed_as_much(registry_with_users) -> None:
    server = registry_with_users(SVC_SERVER_TRUSTED_PROXIES="127.0.0.1")
    http = Client(server.host)
    for n in range(10):
        assert token_api(http, {"username": f"user{n}", "password": "Summer2026!"}, "203.0.113.7").status == 401
    assert token_api(http, {"username": "bob", "password": "Summer2026!"}, "203.0.113.7").status == 429


def test_guessing_spread_over_addresses_is_logged_and_counted(registry_with_users) -> None:
    server = registry_with_users(SVC_SERVER_TRUSTED_PROXIES="127.0.0.1")
    http = Client(server.host)
    for n in range(8):
        assert token_api(http, {"username": "alice", "password": f"guess{n}"}, f"203.0.113.{n + 1}").status == 401
    assert metric(http, "registry_auth_distributed_failures_total") == 4  # the 5th to the 8th address
    deadline = time.monotonic() + 5
    while "from 5 client addresses" not in server.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "failed logins for user 'alice' from 5 client addresses" in server.log_path.read_text()
    assert token_api(http, ALICE, "198.51.100.10").status == 201


PUBLIC = ["/health", "/ready", "/metrics", "/api-docs/", "/api-docs/openapi.json", "/ui/", "/ui/sign-in",
          "/static/ops/no-such-file.css", "/static/ui/ui.js", "/static/ops/api-docs.css"]


def test_credentials_sent_to_public_endpoints_are_not_checked(registry_with_users) -> None:
    server = registry_with_users()
    http = Client(server.host)
    for path in PUBLIC:
        for _ in range(15):
            reply = http.request("GET", path, headers={"Authorization": basic("alice", "wrong")})
            assert reply.status in (200, 302, 404) and "www-authenticate" not in reply.headers, path
    # The UI's and the API docs' assets are served, to anyone, whatever credentials come with them.
    for asset in ("/static/ui/ui.js", "/static/ops/api-docs.css"):
        reply = http.request("GET", asset, headers={"Authorization": basic("alice", "wrong")})
        assert reply.status == 200 and len(reply.body) > 100, asset
    assert metric(http, "registry_auth_attempts_total") == 0
    assert "alice" not in server.log_path.read_text()  # nor logged as an attempt
    ok = http.request("GET", "/v2/_catalog", headers={"Authorization": basic("alice", "wonderland")})
    assert ok.status == 200
    # The version check does check them: that is how `docker login` verifies a password.
    assert http.request("GET", "/v2/", headers={"Authorization": basic("alice", "wrong")}).status == 401
