"""One JSON line per request: fields, request id, principal, and never a secret."""
from __future__ import annotations

import json
import logging
from typing import Iterator

import pytest
from django.conf import settings as django_settings
from django.test import Client

from regsite.logs import JsonLines
from tests.support.auth import auth_on, auth_paths, basic, bearer  # noqa: F401  (fixtures)
from tests.support.registry_client import body_of, push_blob
from tokens import services

pytestmark = pytest.mark.django_db

FIELDS = {"time", "level", "logger", "message", "pid", "request_id", "method", "path", "route", "status",
          "bytes_in", "bytes_out", "duration_ms", "remote_addr", "forwarded_for", "client", "user_agent",
          "principal"}


class Lines(logging.Handler):
    """The request log's lines, as the configured formatter writes them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.setFormatter(JsonLines())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    @property
    def raw(self) -> list[str]:
        return [self.format(record) for record in self.records]

    @property
    def entries(self) -> list[dict]:
        return [json.loads(line) for line in self.raw]


@pytest.fixture
def lines() -> Iterator[Lines]:
    logger = logging.getLogger("ops.requests")
    handler = Lines()
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(previous)


def test_it_writes_one_json_line_with_every_field(client: Client, lines: Lines) -> None:
    response = client.get("/v2/_catalog?n=5", HTTP_USER_AGENT="skopeo/1.13", REMOTE_ADDR="10.1.2.3",
                          HTTP_X_FORWARDED_FOR="192.0.2.7")
    assert len(lines.raw) == 1
    assert "\n" not in lines.raw[0]
    entry = lines.entries[0]
    assert set(entry) == FIELDS
    assert entry["method"] == "GET"
    assert entry["path"] == "/v2/_catalog"  # the query string is not logged
    assert entry["route"] == "catalog"
    assert entry["status"] == 200
    assert entry["bytes_in"] == 0
    assert entry["bytes_out"] == len(response.content)
    assert entry["remote_addr"] == "10.1.2.3"
    assert entry["forwarded_for"] == "192.0.2.7"
    assert entry["client"] == "10.1.2.3"  # 10.1.2.3 is not a trusted proxy: its header proves nothing
    assert entry["user_agent"] == "skopeo/1.13"
    assert entry["principal"] is None
    assert entry["level"] == "info"
    assert entry["logger"] == "ops.requests" and entry["message"] == "GET /v2/_catalog 200"
    assert list(entry)[:5] == ["time", "level", "logger", "message", "pid"]
    assert entry["time"].endswith("+00:00")
    assert 0 <= entry["duration_ms"] < 5000
    assert entry["request_id"] == response["X-Request-ID"]


def test_it_generates_a_request_id_and_echoes_it(client: Client, lines: Lines) -> None:
    first, second = client.get("/health"), client.get("/health")
    assert len(first["X-Request-ID"]) == 32
    assert first["X-Request-ID"] != second["X-Request-ID"]
    assert [e["request_id"] for e in lines.entries] == [first["X-Request-ID"], second["X-Request-ID"]]


def test_it_keeps_the_clients_request_id(client: Client, lines: Lines) -> None:
    response = client.get("/health", HTTP_X_REQUEST_ID="lb-7f3a.42")
    assert response["X-Request-ID"] == "lb-7f3a.42"
    assert lines.entries[0]["request_id"] == "lb-7f3a.42"


@pytest.mark.parametrize("supplied", ["", "x" * 129, "with space", "quote\"injection", "new\nline"])
def test_it_replaces_an_unusable_request_id(client: Client, lines: Lines, supplied: str) -> None:
    response = client.get("/health", HTTP_X_REQUEST_ID=supplied)
    assert response["X-Request-ID"] != supplied
    assert len(response["X-Request-ID"]) == 32


def test_it_counts_bytes_in_and_out_of_a_blob_push_and_pull(client: Client, lines: Lines) -> None:
    data = b"z" * 5000
    digest = push_blob(client, "team/app", data)
    put = lines.entries[-1]
    assert (put["method"], put["status"], put["bytes_in"]) == ("PUT", 201, 5000)
    response = client.get(f"/v2/team/app/blobs/{digest}")
    assert body_of(response) == data
    get = lines.entries[-1]
    assert (get["method"], get["route"], get["bytes_out"]) == ("GET", "blob", 5000)
    client.head(f"/v2/team/app/blobs/{digest}")
    assert lines.entries[-1]["bytes_out"] == 0


def test_it_writes_a_streamed_blob_line_only_after_the_body_is_sent(client: Client, lines: Lines) -> None:
    digest = push_blob(client, "team/app", b"q" * 100)
    count = len(lines.raw)
    response = client.get(f"/v2/team/app/blobs/{digest}")
    assert len(lines.raw) == count  # still streaming
    b"".join(response.streaming_content)
    assert len(lines.raw) == count + 1


def test_it_names_an_htpasswd_user_and_never_logs_the_password(client: Client, lines: Lines, auth_on) -> None:
    client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland"))
    client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wrong-password"))
    ok, refused = lines.entries
    assert ok["principal"] == "alice" and ok["status"] == 200
    assert refused["principal"] is None and refused["status"] == 401
    text = "\n".join(lines.raw)
    for secret in ("wonderland", "wrong-password", basic("alice", "wonderland").split()[1], "Authorization"):
        assert secret not in text


def test_it_names_a_token_by_hash_prefix_and_never_logs_the_token(client: Client, lines: Lines, auth_on) -> None:
    created = services.create_token("alice", "read")
    client.get("/v2/_catalog", HTTP_AUTHORIZATION=bearer(created.token))
    client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("token", created.token))
    assert [e["principal"] for e in lines.entries] == [created.hash_prefix, created.hash_prefix]
    assert created.token not in "\n".join(lines.raw)


def test_it_never_logs_the_token_endpoint_bodies(client: Client, lines: Lines, auth_on) -> None:
    response = client.post("/api/tokens", json.dumps({"username": "alice", "password": "wonderland"}),
                           content_type="application/json")
    token = json.loads(response.content)["token"]
    text = "\n".join(lines.raw)
    assert "wonderland" not in text and token not in text
    assert lines.entries[0]["bytes_in"] > 0
    assert lines.entries[0]["route"] == "tokens-create"


def test_it_logs_refusals_of_the_auth_layer(client: Client, lines: Lines, auth_on) -> None:
    response = client.get("/v2/team/app/tags/list")
    assert response.status_code == 401
    assert lines.entries[0]["status"] == 401
    assert lines.entries[0]["request_id"] == response["X-Request-ID"]


def test_it_writes_nothing_below_the_configured_level(client: Client, lines: Lines) -> None:
    logging.getLogger("ops.requests").setLevel(logging.WARNING)
    client.get("/health")
    assert lines.raw == []


def test_it_takes_its_level_from_server_log_level() -> None:
    configured = django_settings.SVC["server"]["log_level"].upper()
    assert django_settings.LOGGING["loggers"]["ops.requests"]["level"] == configured
    assert django_settings.LOGGING["loggers"]["ops.requests"]["propagate"] is False
