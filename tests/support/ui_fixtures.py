"""Fixtures shared by the web UI's Django test-client tests (import them into the test module)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterator

import bcrypt
import pytest
from django.test import Client, override_settings

from ops.ui import tallies
from tests.support.ui_seed import Pushed, Seeder

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def plain_static(settings) -> None:
    """Templates link /static/ files by name; the test client needs no collectstatic manifest."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


def client_seeder(client: Client) -> Seeder:
    def send(method: str, path: str, body: bytes, content_type: str) -> int:
        return client.generic(method, path, body, content_type=content_type).status_code

    return Seeder(send)


@pytest.fixture
def showcase(db) -> dict[str, Pushed]:
    """Pushed through the registry API with auth off, whatever the test itself switches on."""
    with override_settings(AUTH_ENABLED=False):
        return client_seeder(Client()).showcase()


@pytest.fixture
def users(settings, tmp_path: Path) -> Iterator[Path]:
    """An htpasswd file with alice and bob (bcrypt, cost 4 to keep tests fast)."""
    from tokens import htpasswd

    path = tmp_path / "users.htpasswd"
    lines = [f"{user}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()}" for user in ("alice", "bob")]
    path.write_text("\n".join(lines) + "\n")
    settings.AUTH_HTPASSWD_FILE = path
    settings.AUTH_TOKEN_STORAGE = tmp_path / "tokens"
    htpasswd.clear_cache()
    yield path
    htpasswd.clear_cache()


@pytest.fixture
def auth_on(settings, users: Path) -> Path:
    settings.AUTH_ENABLED = True
    return users


def sign_in(client: Client, username: str = "alice", password: str = PASSWORD) -> None:
    response = client.post("/ui/sign-in", {"username": username, "password": password})
    assert response.status_code == 302, response.content[:500]


class _Inline(threading.Thread):
    """Runs the background count at once, in the test's transaction."""

    def start(self) -> None:
        self.run()


@pytest.fixture
def big_registry(monkeypatch) -> None:
    """Every registry is big to ops.ui.tallies: totals read as last counted, recounts run inline."""
    monkeypatch.setattr(tallies, "SMALL", 0)
    monkeypatch.setattr(tallies.threading, "Thread", _Inline)
    monkeypatch.setattr(tallies.connection, "close", lambda: None)
