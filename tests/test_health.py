"""GET/HEAD /health: liveness, no I/O, open with auth on."""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest
from django.test import Client

from registry.storage import default_driver
from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)


def test_it_answers_ok(client: Client) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_it_answers_head_without_a_body(client: Client) -> None:
    response = client.head("/health")
    assert response.status_code == 200
    assert response.content == b""


@pytest.mark.parametrize("method", ["post", "put", "delete", "patch"])
def test_it_refuses_other_methods_with_405_and_allow(client: Client, method: str) -> None:
    response = getattr(client, method)("/health")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert "not allowed" in json.loads(response.content)["error"]


def test_it_touches_neither_database_nor_storage(client: Client, settings, tmp_path: Path) -> None:
    # No django_db mark: pytest-django makes any database query raise here.
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the storage root should be")
    settings.REGISTRY_STORAGE_ROOT = blocked
    default_driver.cache_clear()
    response = client.get("/health")
    assert response.status_code == 200


@pytest.mark.serial  # timing-sensitive: run alone (make test)
def test_it_answers_in_well_under_10_ms(client: Client) -> None:
    client.get("/health")
    timings = []
    for _ in range(50):
        started = time.perf_counter()
        client.get("/health")
        timings.append(time.perf_counter() - started)
    assert statistics.median(timings) < 0.005, timings


@pytest.mark.django_db
def test_it_stays_open_with_auth_on(client: Client, auth_on) -> None:
    assert client.get("/health").status_code == 200
    assert client.get("/health", HTTP_AUTHORIZATION=basic("alice", "wrong")).status_code == 200
