"""Every 5xx from /v2/ is the OCI envelope (never Django's HTML page) and names the request id that the
log line carries: an unexpected exception (500), the database or the storage failing (503)."""
from __future__ import annotations

import json
import logging

import pytest
from django.db import OperationalError
from django.test import Client

from registry.services import manifests
from registry.storage.driver import StorageError
from regsite.logs import JsonLines
from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tokens import middleware

pytestmark = pytest.mark.django_db


@pytest.fixture
def client() -> Client:  # what a real client sees: no exception re-raised into the test
    return Client(raise_request_exception=False)


@pytest.mark.parametrize("failure, status, code", [
    (RuntimeError("a bug"), 500, "UNKNOWN"),
    (OperationalError("couldn't get a connection after 10.00 sec"), 503, "UNAVAILABLE"),
    (StorageError("S3 AccessDenied on blobs/x"), 503, "UNAVAILABLE"),
])
def test_a_failing_view_answers_in_the_oci_envelope(client, monkeypatch, caplog, failure, status, code) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise failure

    monkeypatch.setattr(manifests, "get", fail)
    with caplog.at_level(logging.ERROR, logger="registry.errors"):
        response = client.get("/v2/team/app/manifests/v1", HTTP_X_REQUEST_ID="req-123")
    assert response.status_code == status and response["Content-Type"] == "application/json"
    error = json.loads(response.content)["errors"][0]
    assert error["code"] == code and error["message"].endswith("request id req-123")
    assert str(failure) not in response.content.decode()  # the cause is logged, not shown
    assert any("req-123" in r.getMessage() and r.exc_info for r in caplog.records)
    assert (response.get("Retry-After") == "1") is (status == 503)


@pytest.mark.parametrize("supplied", [{"HTTP_X_REQUEST_ID": "req-456"}, {}], ids=["client's id", "own id"])
def test_a_failure_outside_the_views_is_json_too(client, monkeypatch, caplog, auth_on, supplied) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the middleware broke")

    monkeypatch.setattr(middleware, "authenticate", fail)
    caplog.handler.setFormatter(JsonLines())  # as the server writes them, while the request is served
    with caplog.at_level(logging.ERROR):
        response = client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland"), **supplied)
    assert response.status_code == 500
    error = json.loads(response.content)["errors"][0]
    request_id = response["X-Request-ID"]
    assert request_id == supplied.get("HTTP_X_REQUEST_ID", request_id)
    assert error["code"] == "UNKNOWN" and error["message"] == f"internal server error; request id {request_id}"
    # Logged with its traceback, and every line it wrote names the request as the response does.
    lines = [json.loads(line) for line in caplog.text.splitlines()]
    failed = [line for line in lines if line["logger"] == "registry.errors"]
    assert len(failed) == 1 and "the middleware broke" in failed[0]["traceback"], lines
    assert request_id in failed[0]["message"]
    assert [line.get("request_id") for line in lines] == [request_id] * len(lines), lines


@pytest.mark.parametrize("path, failing", [("/v2/team/app/manifests/v1", "view"), ("/v2/_catalog", "middleware")])
def test_a_5xx_is_logged_once_with_its_traceback_beside_its_request_line(client, monkeypatch, caplog, auth_on,
                                                                         path, failing) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(manifests, "get", fail)
    if failing == "middleware":
        monkeypatch.setattr(middleware, "authenticate", fail)
    with caplog.at_level(logging.DEBUG):
        response = client.get(path, HTTP_AUTHORIZATION=basic("alice", "wonderland"))
    assert response.status_code == 500
    errors = [(r.name, bool(r.exc_info)) for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [("registry.errors", True), ("ops.requests", False)], errors  # not Django's own as well


def test_a_503_the_registry_answers_is_its_request_line_alone(client, caplog, storage_root) -> None:
    (storage_root / "uploads").write_text("in the way")  # /ready fails its storage check
    with caplog.at_level(logging.DEBUG):
        assert client.get("/ready").status_code == 503
    errors = [r.name for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == ["ops.requests"], errors
