"""Failed password logins are slowed per client address, with backoff, never locked per user."""
from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tokens import throttle
from tokens.models import LoginFailure, LoginThrottle

pytestmark = pytest.mark.django_db


def create(client: Any, password: str, address: str = "10.0.0.1", username: str = "alice") -> Any:
    body = json.dumps({"username": username, "password": password})
    return client.post("/api/tokens", body, content_type="application/json", REMOTE_ADDR=address)


def fail(client: Any, times: int, address: str = "10.0.0.1", username: str = "alice") -> None:
    for _ in range(times):
        assert create(client, "wrong", address, username).status_code == 401


def later(monkeypatch, seconds: float) -> None:
    moment = timezone.now() + timedelta(seconds=seconds)
    monkeypatch.setattr(throttle.timezone, "now", lambda: moment)


def test_it_makes_an_address_wait_a_minute_after_ten_failures(client, auth_on) -> None:
    fail(client, 10)
    response = create(client, "wonderland")
    assert response.status_code == 429
    assert 55 <= int(response["Retry-After"]) <= 60
    assert "retry after" in response.json()["error"]


def test_it_counts_failures_whatever_usernames_the_address_tries(client, auth_on) -> None:
    for n in range(10):  # password spraying: one guess for each of many users
        fail(client, 1, username=f"user{n}")
    assert create(client, "builder", username="bob").status_code == 429


def test_it_never_stops_the_right_password_from_another_address(client, auth_on) -> None:
    fail(client, 10, address="10.0.0.1")
    assert create(client, "wonderland", address="10.0.0.1").status_code == 429
    assert create(client, "wonderland", address="10.0.0.2").status_code == 201
    ok = client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland"), REMOTE_ADDR="10.0.0.3")
    assert ok.status_code == 200


def test_it_refuses_even_a_recently_verified_password_while_the_address_waits(client, auth_on) -> None:
    # Otherwise a guesser would learn the right password from the one answer that is not a 429.
    assert create(client, "wonderland").status_code == 201
    fail(client, 10)
    assert create(client, "wonderland").status_code == 429


def test_it_doubles_the_wait_with_each_further_failure(client, auth_on, monkeypatch) -> None:
    fail(client, 10)
    waits = []
    for step in (61, 61 + 121, 61 + 121 + 241):
        later(monkeypatch, step)
        assert create(client, "wrong").status_code == 401
        waits.append(int(create(client, "wrong")["Retry-After"]))
    assert [round(w, -1) for w in waits] == [120, 240, 480]


def test_it_waits_at_most_login_backoff_max(client, auth_on, settings, monkeypatch) -> None:
    settings.AUTH_LOGIN_BACKOFF_MAX = 300
    fail(client, 10)
    elapsed = 0
    for _ in range(6):
        elapsed += 301
        later(monkeypatch, elapsed)
        assert create(client, "wrong").status_code == 401
    assert int(create(client, "wrong")["Retry-After"]) == 300


def test_a_right_password_takes_back_only_its_own_attempt(client, auth_on) -> None:
    # Signing in to one's own account must not reset a guessing run against someone else.
    fail(client, 9, username="bob")
    assert create(client, "wonderland").status_code == 201
    assert LoginThrottle.objects.get(address="10.0.0.1").failures == 9
    fail(client, 1, username="bob")
    assert create(client, "wonderland").status_code == 429


def test_it_forgets_an_address_after_a_day_without_failures(client, auth_on, monkeypatch) -> None:
    fail(client, 10)
    later(monkeypatch, 24 * 3600 + 1)
    fail(client, 9)
    assert create(client, "wonderland").status_code == 201


def test_it_counts_an_ipv6_client_by_its_slash_64(client, auth_on) -> None:
    for n in range(10):
        fail(client, 1, address=f"2001:db8:1:2::{n + 1:x}")
    assert create(client, "wonderland", address="2001:db8:1:2:ffff::9").status_code == 429
    assert create(client, "wonderland", address="2001:db8:1:3::1").status_code == 201


def test_it_throttles_basic_logins_on_the_registry_api(client, auth_on) -> None:
    wrong = {"HTTP_AUTHORIZATION": basic("alice", "wrong"), "REMOTE_ADDR": "10.0.0.9"}
    for _ in range(10):
        assert client.get("/v2/_catalog", **wrong).status_code == 401
    response = client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland"),
                          REMOTE_ADDR="10.0.0.9")
    assert response.status_code == 429
    assert response["Retry-After"]
    assert response.json()["errors"][0]["code"] == "TOOMANYREQUESTS"


def test_it_keeps_the_count_in_the_database_for_every_worker(client, auth_on) -> None:
    fail(client, 3)
    assert LoginThrottle.objects.get(address="10.0.0.1").failures == 3
    assert throttle.retry_after("10.0.0.1") is None
    fail(client, 7)
    assert 55 <= throttle.retry_after("10.0.0.1") <= 60


def test_it_logs_failures_against_one_user_from_many_addresses(client, auth_on, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="tokens.throttle"):
        for n in range(8):
            fail(client, 1, address=f"198.51.100.{n + 1}")
    warnings = [r.getMessage() for r in caplog.records if r.name == "tokens.throttle"]
    assert len(warnings) == 1 and "'alice' from 5 client addresses" in warnings[0]
    assert create(client, "wonderland", address="198.51.100.99").status_code == 201


def test_it_prunes_what_it_no_longer_needs(client, auth_on) -> None:
    old = timezone.now() - timedelta(days=3)
    LoginFailure.objects.create(username="old", address="a", failed_at=old)
    LoginThrottle.objects.create(address="192.0.2.1", failures=4, last_failure_at=old, next_attempt_at=old)
    fail(client, 1)
    assert list(LoginFailure.objects.values_list("username", flat=True)) == ["alice"]
    assert list(LoginThrottle.objects.values_list("address", flat=True)) == ["10.0.0.1"]


@pytest.mark.parametrize(("address", "key"), [("192.0.2.7", "192.0.2.7"), ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
                                              ("unknown", "unknown")])
def test_the_key_is_the_address_or_its_ipv6_network(address: str, key: str) -> None:
    assert throttle.throttle_key(address) == key


def test_checks_in_flight_hold_places_of_the_allowance_until_they_end() -> None:
    from tokens import queries

    now, forget, lapse = timezone.now(), timedelta(days=1), throttle.PENDING_LAPSE
    places = [queries.reserve_login_attempt("10.0.0.9", now, 10, forget, lapse) for _ in range(11)]
    assert [p.allowed for p in places] == [True] * 10 + [False]
    assert places[-1].until is None  # not told to wait: it queues for a place
    queries.finish_login_attempt("10.0.0.9", False, now, throttle.delay, forget)  # a right password
    assert queries.reserve_login_attempt("10.0.0.9", now, 10, forget, lapse).allowed
    for _ in range(10):
        queries.finish_login_attempt("10.0.0.9", True, now, throttle.delay, forget)
    refused = queries.reserve_login_attempt("10.0.0.9", now, 10, forget, lapse)
    assert not refused.allowed and refused.until is not None  # ten failures: the address waits


def test_a_place_held_by_a_process_that_died_lapses() -> None:
    from tokens import queries

    now, forget, lapse = timezone.now(), timedelta(days=1), throttle.PENDING_LAPSE
    for _ in range(10):
        assert queries.reserve_login_attempt("10.0.0.8", now, 10, forget, lapse).allowed
    assert not queries.reserve_login_attempt("10.0.0.8", now, 10, forget, lapse).allowed
    assert queries.reserve_login_attempt("10.0.0.8", now + lapse + timedelta(seconds=1), 10, forget, lapse).allowed
