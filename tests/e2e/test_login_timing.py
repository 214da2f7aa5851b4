"""Under gunicorn: a login as a user who does not exist takes as long to refuse as one with a wrong
password for a user who does, whatever the costs of the file's entries (the dummy bcrypt check
used the first entry's cost: behind a cost-4 first entry, unknown users were refused 60 times
faster than a cost-10 user, which told a guesser which names exist)."""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Callable

import bcrypt
import pytest

from tests.support.rawhttp import Client
from tests.support.server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # timing-sensitive: run alone (make test)


def entry(username: str, password: str, cost: int) -> str:
    return f"{username}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=cost)).decode()}\n"


def refusal_seconds(http: Client, username: str) -> float:
    body = json.dumps({"username": username, "password": "not the password"}).encode()
    started = time.perf_counter()
    reply = http.request("POST", "/api/tokens/list", body, {"Content-Type": "application/json"})
    elapsed = time.perf_counter() - started
    assert reply.status == 401, reply.body
    return elapsed


def test_unknown_and_known_users_take_as_long_to_refuse(start_registry: Callable[..., RegistryServer],
                                                        tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "users.htpasswd").write_text(
        entry("ci", "fast-entry", 4) + entry("alice", "wonderland", 10))
    server = start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_LOGIN_FAILURES="1000", workers=1)
    http = Client(server.host)
    refusal_seconds(http, "nobody")  # the worker makes its dummy hash once
    known, unknown = [], []
    for _ in range(7):
        known.append(refusal_seconds(http, "alice"))
        unknown.append(refusal_seconds(http, "mallory"))
    ratio = statistics.median(unknown) / statistics.median(known)
    assert 0.6 < ratio < 1.6, (known, unknown)
