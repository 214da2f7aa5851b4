"""/ready under gunicorn reports the database check failing while the database cannot be opened."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


def _ready(server: RegistryServer) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{server.url}/ready", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_it_fails_database_while_the_database_file_is_gone(tmp_path: Path) -> None:
    server = RegistryServer(tmp_path / "server", workers=1).start()
    try:
        assert _ready(server)[0] == 200
        database = server.workdir / "db.sqlite3"
        moved = server.workdir / "db.sqlite3.moved"
        database.rename(moved)
        database.mkdir()  # SQLite cannot open a directory: the database does not answer
        status, body = _ready(server)
        assert status == 503
        assert body["failing"] == ["database"]
        assert body["checks"]["database"] == "database does not answer"
        assert body["checks"]["storage"] == "ok"
        database.rmdir()
        moved.rename(database)
        assert _ready(server)[0] == 200
    finally:
        server.stop()
    assert "readiness: database check failed" in server.log_path.read_text()
