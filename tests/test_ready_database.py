"""Under gunicorn, while the database cannot answer registry queries: /ready names it, /metrics still answers."""
from __future__ import annotations

import json
import sqlite3
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


def _rename_table(database: Path, old: str, new: str) -> None:
    # Done from outside, as a broken migration or a restored empty database would: the workers'
    # open connections see the schema change on their next query.
    with sqlite3.connect(database) as db:
        db.execute(f"ALTER TABLE {old} RENAME TO {new}")


def test_it_fails_database_while_the_registry_tables_are_missing(tmp_path: Path) -> None:
    # Checked on every call: the answer changes as soon as the tables do.
    server = RegistryServer(tmp_path / "server", workers=2, env_overrides={"SVC_SERVER_READY_CACHE_SECONDS": "0"}
                            ).start()
    database = server.workdir / "db.sqlite3"
    try:
        assert _ready(server)[0] == 200
        _rename_table(database, "registry_repository", "registry_repository_away")
        _rename_table(database, "registry_blob", "registry_blob_away")
        for _ in range(4):  # whichever worker answers
            status, body = _ready(server)
            assert status == 503
            assert body["failing"] == ["database"]
            assert body["checks"]["database"] == "database does not answer registry queries"
            assert body["checks"]["storage"] == "ok"
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
            scrape = response.read().decode()  # the HTTP metrics matter most during an outage
        assert "django_http_requests_total_by_method_total" in scrape
        assert "registry_storage_blobs" not in scrape
        _rename_table(database, "registry_repository_away", "registry_repository")
        _rename_table(database, "registry_blob_away", "registry_blob")
        assert _ready(server)[0] == 200
    finally:
        server.stop()
    assert "readiness: database check failed" in server.log_path.read_text()


def test_it_says_when_the_schema_is_not_migrated(tmp_path: Path) -> None:
    server = RegistryServer(tmp_path / "server", workers=1).start()
    try:
        with sqlite3.connect(server.workdir / "db.sqlite3") as db:  # as if an upgrade skipped migrate
            db.execute("DELETE FROM django_migrations WHERE app = 'registry' AND name = "
                       "(SELECT MAX(name) FROM django_migrations WHERE app = 'registry')")
        server.stop()
        server.start(migrate=False)  # a new release started without its migrations
        status, body = _ready(server)
        assert status == 503 and body["checks"]["database"] == (
            "database schema is not migrated (1 migrations pending)")
    finally:
        server.stop()
