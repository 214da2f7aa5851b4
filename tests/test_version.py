"""One version number, pyproject.toml's, in the API document, the UI footer, /metrics and
manage.py version."""
from __future__ import annotations

import subprocess
import sys

import django
import pytest
import tomli

from regsite.version import version
from tests.support.server import REPO

pytestmark = pytest.mark.django_db
PYPROJECT = tomli.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_it_is_the_pyproject_version() -> None:
    assert version() == PYPROJECT


def test_every_surface_shows_it(client) -> None:
    assert client.get("/api-docs/openapi.json").json()["info"]["version"] == PYPROJECT
    assert f'registry_build_info{{version="{PYPROJECT}"}} 1.0' in client.get("/metrics").content.decode()
    assert f"svc-registry {PYPROJECT}" in client.get("/ui/").content.decode()


def test_manage_py_version_prints_the_registry_then_django() -> None:
    done = subprocess.run([sys.executable, str(REPO / "manage.py"), "version"], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.splitlines() == [f"svc-registry {PYPROJECT}", f"Django {django.get_version()}"]
