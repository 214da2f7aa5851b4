"""Failed password logins: after 10 a minute for a user from one address, 429 with Retry-After."""
from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tokens import throttle
from tokens.models import LoginFailure

pytestmark = pytest.mark.django_db


def create(client: Any, password: str, address: str = "10.0.0.1", username: str = "alice") -> Any:
    body = json.dumps({"username": username, "password": password})
    return client.post("/api/tokens", body, content_type="application/json", REMOTE_ADDR=address)


def fail(client: Any, times: int, address: str = "10.0.0.1") -> None:
    for _ in range(times):
        assert create(client, "wrong", address).status_code == 401


def test_it_slows_down_the_eleventh_attempt_in_a_minute(client, auth_on) -> None:
    fail(client, 10)
    response = create(client, "wonderland")
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "retry after" in response.json()["error"]


def test_it_refuses_even_a_recently_verified_password_during_a_lockout(client, auth_on) -> None:
    # Otherwise a guesser would learn the right password from the one answer that is not a 429.
    assert create(client, "wonderland").status_code == 201
    fail(client, 10)
    assert create(client, "wonderland").status_code == 429


def test_it_keeps_the_count_in_the_database_for_every_worker(client, auth_on) -> None:
    fail(client, 3)
    assert LoginFailure.objects.filter(username="alice", address="10.0.0.1").count() == 3


def test_it_counts_per_user_and_address(client, auth_on) -> None:
    fail(client, 10)
    assert create(client, "wonderland", address="10.0.0.2").status_code == 201
    bob = client.post("/api/tokens", json.dumps({"username": "bob", "password": "builder"}),
                      content_type="application/json", REMOTE_ADDR="10.0.0.1")
    assert bob.status_code == 201


def test_it_forgets_failures_after_a_success(client, auth_on) -> None:
    fail(client, 9)
    assert create(client, "wonderland").status_code == 201
    fail(client, 9)
    assert create(client, "wonderland").status_code == 201


def test_it_lets_the_user_in_again_once_the_minute_has_passed(client, auth_on, monkeypatch) -> None:
    fail(client, 10)
    later = timezone.now() + timedelta(seconds=61)
    monkeypatch.setattr(throttle.timezone, "now", lambda: later)
    assert create(client, "wonderland").status_code == 201


def test_it_throttles_basic_logins_on_the_registry_api(client, auth_on) -> None:
    wrong = {"HTTP_AUTHORIZATION": basic("alice", "wrong"), "REMOTE_ADDR": "10.0.0.9"}
    for _ in range(10):
        assert client.get("/v2/_catalog", **wrong).status_code == 401
    response = client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland"),
                          REMOTE_ADDR="10.0.0.9")
    assert response.status_code == 429
    assert response["Retry-After"]
    assert response.json()["errors"][0]["code"] == "TOOMANYREQUESTS"


def test_it_reports_when_the_oldest_failure_leaves_the_window(auth_on) -> None:
    now = timezone.now()
    for age in range(10):
        LoginFailure.objects.create(username="carol", address="a", failed_at=now - timedelta(seconds=50 - age))
    assert throttle.retry_after("carol", "a") in (10, 11)
    assert throttle.retry_after("carol", "b") is None


def test_it_prunes_failures_older_than_the_window(auth_on) -> None:
    LoginFailure.objects.create(username="old", address="a", failed_at=timezone.now() - timedelta(minutes=5))
    throttle.record_failure("alice", "a")
    assert list(LoginFailure.objects.values_list("username", flat=True)) == ["alice"]
