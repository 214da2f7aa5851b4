"""Under gunicorn, every line the server writes (stderr and stdout) is one JSON object with time, level,
logger and message: while starting (with the warning that authentication is off), serving requests,
failing one (its traceback on one line, with the request id), cutting off a slow client, losing a
worker, and shutting down."""
from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from tests.faults.wire import Registry
from tests.support.server import RegistryServer, free_port

pytestmark = pytest.mark.e2e


def _wait_for(server: RegistryServer, found, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 15
    while not any(found(entry) for entry in server.log_entries()):
        assert time.monotonic() < deadline, f"no log line {what}:\n{server.log_path.read_text()[-3000:]}"
        time.sleep(0.1)


def test_every_line_the_server_writes_is_json(tmp_path: Path) -> None:
    port = free_port()
    server = RegistryServer(tmp_path / "server", {"SVC_SERVER_BIND": f"0.0.0.0:{port}",
                                                  "SVC_SERVER_CLIENT_TIMEOUT": "1"}, port=port).start()
    try:
        client = Registry(server.host)
        client.push_image("team/app", "v1", [b"a layer"])
        assert client.pull_image("team/app", "v1")
        for path in ("/health", "/v2/team/app/manifests/nothing", "/ui/r/team/app/"):
            client.request("GET", path)

        with sqlite3.connect(server.workdir / "db.sqlite3") as db:  # the database fails under one request
            db.execute("ALTER TABLE registry_tag RENAME TO registry_tag_away")
        failed = client.request("GET", "/v2/team/app/tags/list", headers={"X-Request-ID": "failing-1"})
        with sqlite3.connect(server.workdir / "db.sqlite3") as db:
            db.execute("ALTER TABLE registry_tag_away RENAME TO registry_tag")
        assert failed.status >= 500

        with socket.create_connection(("127.0.0.1", port)) as slow:  # a head that never completes
            slow.sendall(b"GET /v2/ HTTP/1.1\r\n")
            _wait_for(server, lambda e: "request head not complete" in e["message"], "about the slow client")

        worker = next(pid for pid in server.pids() if pid != server.process.pid)  # type: ignore[union-attr]
        os.kill(worker, signal.SIGKILL)
        _wait_for(server, lambda e: f"pid:{worker}" in e["message"], "about the killed worker")
        assert client.request("GET", "/v2/").status == 200
    finally:
        server.stop()

    lines = server.log_path.read_text().splitlines()
    entries = [json.loads(line) for line in lines]  # fails on the first line that is not JSON
    assert len(entries) > 20
    for entry in entries:
        assert list(entry)[:4] == ["time", "level", "logger", "message"], entry
        assert entry["time"].endswith("+00:00") and entry["level"] in {"debug", "info", "warning", "error", "critical"}

    def said(logger: str, level: str, text: str) -> list[dict]:
        return [e for e in entries if e["logger"] == logger and e["level"] == level and text in e["message"]]

    assert said("gunicorn.error", "info", "Starting gunicorn")
    assert len(said("gunicorn.error", "warning", "authentication is off and the registry listens on 0.0.0.0")) == 1
    assert said("ops.requests", "info", "GET /v2/team/app/manifests/v1 200")
    failure = said("registry.errors", "error", "GET /v2/team/app/tags/list failed")
    assert len(failure) == 1 and failure[0]["request_id"] == "failing-1"
    assert failure[0]["traceback"].startswith("Traceback") and "registry_tag" in failure[0]["traceback"]
    assert said("ops.requests", "error", "GET /v2/team/app/tags/list 50")[0]["request_id"] == "failing-1"
    assert said("gunicorn.error", "warning", "request head not complete within 1")
    assert said("gunicorn.error", "error", f"Worker (pid:{worker}) was sent SIGKILL")
    assert said("gunicorn.error", "info", "Shutting down: Master")
    assert len({e["pid"] for e in entries}) >= 3  # the master and workers, old and new
