"""/api-docs/: a readable page whose assets are served by this service (no CDN), rendered offline."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from ops import openapi
from tests.support.auth import auth_on, auth_paths  # noqa: F401  (fixtures)
from tests.support.server import REPO, VENV_BIN, RegistryServer

ASSET = re.compile(r'(?:src|href)="([^"]+)"')
PAGE_ASSETS = ("ops/api-docs.js", "ops/api-docs.css", "ops/swagger-ui/swagger-ui-bundle.js",
               "ops/swagger-ui/swagger-ui.css")


@pytest.fixture
def plain_static(settings) -> None:
    """Static URLs without collectstatic's manifest, which only `make static` builds."""
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}


def test_it_renders_the_page_with_a_summary_of_every_operation(client: Client, plain_static: None) -> None:
    response = client.get("/api-docs/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    for operation in openapi.operations():
        assert f"<code>{operation.path}</code>" in html
    assert 'data-spec-url="/api-docs/openapi.json"' in html


def test_it_answers_without_the_trailing_slash(client: Client, plain_static: None) -> None:
    assert client.get("/api-docs").status_code == 200


def test_it_loads_only_local_assets_that_exist(client: Client, plain_static: None) -> None:
    html = client.get("/api-docs/").content.decode()
    assets = [url for url in ASSET.findall(html) if url.startswith("/static/")]
    assert len(assets) == 4
    for url in ASSET.findall(html):
        assert url.startswith("/"), f"{url} is not served by this service"
    for url in assets:
        assert finders.find(url.removeprefix("/static/")), url


def test_it_never_calls_the_online_swagger_validator() -> None:
    script = Path(finders.find("ops/api-docs.js")).read_text()
    assert "validatorUrl: null" in script


@pytest.mark.django_db
def test_it_stays_open_with_auth_on(client: Client, auth_on, plain_static: None) -> None:
    assert client.get("/api-docs/").status_code == 200
    assert client.get("/api-docs/openapi.json").status_code == 200


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        message = "chromium is not installed (scripts/install-test-deps.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def collected_static() -> None:
    """The hashed, compressed assets whitenoise serves; `make test` builds them, as `make run` does."""
    manifest = REPO / "staticfiles" / "staticfiles.json"
    if manifest.exists() and all(name in manifest.read_text() for name in PAGE_ASSETS):
        return
    result = subprocess.run([str(VENV_BIN / "python"), "manage.py", "collectstatic", "--noinput", "-v0"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.e2e
def test_it_renders_swagger_ui_in_a_browser_with_no_network_but_this_service(tmp_path: Path) -> None:
    collected_static()
    server = RegistryServer(tmp_path / "server", workers=1).start()
    try:
        with urllib.request.urlopen(f"{server.url}/api-docs/", timeout=10) as response:
            html = response.read().decode()
        for url in ASSET.findall(html):
            if url.startswith("/static/"):
                with urllib.request.urlopen(server.url + url, timeout=10) as asset:
                    assert asset.status == 200
        # Every host name except the loopback address fails to resolve: a CDN could not load.
        result = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp_path / 'chromium'}",
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
             "--virtual-time-budget=15000", "--dump-dom", f"{server.url}/api-docs/"],
            capture_output=True, text=True, timeout=90,
        )
    finally:
        server.stop()
    dom = result.stdout
    rendered = re.findall(r'class="opblock opblock-(get|head|post|put|patch|delete)', dom)
    assert len(rendered) == len(openapi.operations()), result.stderr[-2000:]
    assert "/api/tokens/revoke" in dom
