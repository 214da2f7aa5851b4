"""GET /ready: 200 when every check passes, 503 naming each failing check, no secrets shown."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.test import Client

from registry.storage import default_driver, paths
from tests.support.auth import auth_on, auth_paths  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


def _ready(client: Client) -> tuple[int, dict]:
    response = client.get("/ready")
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    return response.status_code, json.loads(response.content)


def test_it_is_ready_with_every_check_ok(client: Client) -> None:
    status, body = _ready(client)
    assert status == 200
    assert body == {"status": "ready", "checks": {"database": "ok", "storage": "ok", "storage_low": "ok"}}


def test_it_leaves_no_probe_file_behind(client: Client, storage_root: Path) -> None:
    _ready(client)
    _ready(client)
    assert [p for p in storage_root.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("area", [paths.UPLOADS, paths.BLOBS])
def test_it_fails_storage_when_pushes_could_not_write(client: Client, storage_root: Path, area: str) -> None:
    # A file where the directory must be: every write below it fails, as on a read-only mount.
    (storage_root / area).write_text("in the way")
    status, body = _ready(client)
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["failing"] == ["storage"]
    assert body["checks"]["storage"] == f"{area}/ in the storage root is not writable"
    assert body["checks"]["database"] == "ok"


def test_it_fails_storage_when_the_root_cannot_exist(client: Client, settings, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    settings.REGISTRY_STORAGE_ROOT = blocker / "registry"
    default_driver.cache_clear()
    status, body = _ready(client)
    assert status == 503
    assert body["failing"] == ["storage"]
    assert str(tmp_path) not in json.dumps(body)


def test_it_stays_ready_for_pulls_below_the_free_space_floor_and_says_why(client: Client, settings) -> None:
    settings.REGISTRY_MIN_FREE_BYTES = 2**62
    status, body = _ready(client)
    assert status == 200 and body["status"] == "ready" and "failing" not in body
    assert f"below the floor of {2**62}: new uploads are refused" in body["checks"]["storage_low"]


def test_it_passes_disk_at_a_zero_floor(client: Client, settings) -> None:
    settings.REGISTRY_MIN_FREE_BYTES = 0
    assert _ready(client)[0] == 200


def test_it_checks_htpasswd_and_token_directory_only_with_auth_on(client: Client, auth_on) -> None:
    status, body = _ready(client)
    assert status == 200
    assert body["checks"] == {"database": "ok", "storage": "ok", "storage_low": "ok", "htpasswd": "ok",
                              "tokens": "ok"}
    assert auth_on.token_storage.is_dir()
    assert list(auth_on.token_storage.iterdir()) == []


def test_it_fails_htpasswd_when_the_file_is_missing(client: Client, auth_on) -> None:
    auth_on.htpasswd_file.unlink()
    status, body = _ready(client)
    assert status == 503
    assert body["failing"] == ["htpasswd"]
    assert body["checks"]["htpasswd"] == "htpasswd file is not readable"
    assert str(auth_on.htpasswd_file) not in json.dumps(body)


def test_it_fails_htpasswd_when_the_path_is_a_directory(client: Client, settings, auth_on, tmp_path: Path) -> None:
    settings.AUTH_HTPASSWD_FILE = tmp_path
    status, body = _ready(client)
    assert status == 503
    assert body["failing"] == ["htpasswd"]


def test_it_fails_tokens_when_the_directory_is_not_writable(client: Client, settings, auth_on,
                                                            tmp_path: Path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    settings.AUTH_TOKEN_STORAGE = blocker / "tokens"
    status, body = _ready(client)
    assert status == 503
    assert body["failing"] == ["tokens"]
    assert body["checks"]["tokens"] == "token directory is not writable"


def test_it_reports_every_failing_check_at_once(client: Client, settings, auth_on, storage_root: Path) -> None:
    (storage_root / paths.UPLOADS).write_text("in the way")
    settings.REGISTRY_MIN_FREE_BYTES = 2**62
    auth_on.htpasswd_file.unlink()
    status, body = _ready(client)
    assert status == 503
    assert body["failing"] == ["storage", "htpasswd"]


def test_it_stays_open_with_auth_on(client: Client, auth_on) -> None:
    assert client.get("/ready").status_code == 200


def test_it_refuses_post(client: Client) -> None:
    assert client.post("/ready").status_code == 405


def test_troubleshooting_names_the_checks_ready_has(settings) -> None:
    from ops import readiness
    from tests.support.server import REPO

    settings.AUTH_ENABLED, settings.AUTH_TOKEN_BACKEND = True, "files"
    names = set(readiness.checks()) | readiness.INFORMATIONAL
    lines = (REPO / "docs" / "troubleshooting.md").read_text().splitlines()
    row = next(line for line in lines if line.startswith("| `/ready` answers 503"))
    named = set(re.findall(r"`([a-z_]+)`", row))
    assert named == names, named ^ names
