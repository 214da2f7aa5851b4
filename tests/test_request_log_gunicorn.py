"""The request log under gunicorn: JSON lines on stderr, chunked bodies measured, level from config."""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from tests.support.rawhttp import Client
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


def _entries(server: RegistryServer) -> list[dict]:
    return server.log_entries("ops.requests")


def _wait_for(server: RegistryServer, request_id: str) -> dict:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for entry in _entries(server):
            if entry["request_id"] == request_id:
                return entry
        time.sleep(0.05)
    raise AssertionError(f"no log line for {request_id}:\n{server.log_path.read_text()[-2000:]}")


def test_it_logs_a_chunked_upload_with_the_bytes_received(tmp_path: Path) -> None:
    server = RegistryServer(tmp_path / "server", workers=2).start()
    try:
        http = Client(server.host)
        start = http.request("POST", "/v2/team/app/blobs/uploads/")
        assert start.status == 202
        data = b"c" * 300_000
        chunks = [data[i:i + 65536] for i in range(0, len(data), 65536)]
        reply = http.request("PATCH", start.header("Location"), chunks, chunked=True,
                             headers={"X-Request-ID": "chunked-patch-1"})
        assert reply.status == 202
        entry = _wait_for(server, "chunked-patch-1")
        assert entry["bytes_in"] == len(data)
        assert entry["route"] == "upload-session"
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        done = http.request("PUT", f"{start.header('Location')}?digest={digest}",
                            headers={"X-Request-ID": "chunked-put-1"})
        assert done.status == 201
        blob = http.request("GET", f"/v2/team/app/blobs/{digest}", headers={"X-Request-ID": "blob-get-1"})
        assert blob.body == data
        assert _wait_for(server, "blob-get-1")["bytes_out"] == len(data)
    finally:
        server.stop()
    assert all(set(e) >= {"time", "method", "path", "status", "request_id"} for e in _entries(server))


def test_it_writes_no_request_lines_at_log_level_warning(tmp_path: Path) -> None:
    server = RegistryServer(tmp_path / "server", workers=1,
                            env_overrides={"SVC_SERVER_LOG_LEVEL": "warning"}).start()
    try:
        http = Client(server.host)
        for _ in range(3):
            assert http.request("GET", "/health").status == 200
    finally:
        server.stop()
    assert _entries(server) == []
