"""Helpers for authentication tests: htpasswd files, Authorization headers, an auth-on fixture."""
from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import bcrypt
import pytest

from tokens import htpasswd

UNIT_TEST_COST = 4  # the lowest bcrypt cost: unit tests check behaviour, not hash strength


def bcrypt_entry(username: str, password: str, prefix: str = "$2b$") -> str:
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=UNIT_TEST_COST)).decode()
    return f"{username}:{prefix}{hashed[4:]}"


def write_htpasswd(path: Path, users: dict[str, str]) -> Path:
    path.write_text("".join(bcrypt_entry(u, p) + "\n" for u, p in users.items()))
    return path


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def bearer(token: str) -> str:
    return f"Bearer {token}"


@dataclass
class AuthSetup:
    htpasswd_file: Path
    token_storage: Path


@pytest.fixture
def auth_paths(settings, tmp_path: Path) -> Iterator[AuthSetup]:
    """A fresh htpasswd file (alice/wonderland, bob/builder) and token directory; auth still off."""
    setup = AuthSetup(tmp_path / "users.htpasswd", tmp_path / "tokens")
    write_htpasswd(setup.htpasswd_file, {"alice": "wonderland", "bob": "builder"})
    settings.AUTH_HTPASSWD_FILE = setup.htpasswd_file
    settings.AUTH_TOKEN_STORAGE = setup.token_storage
    htpasswd.clear_cache()
    yield setup
    htpasswd.clear_cache()


@pytest.fixture
def auth_on(settings, auth_paths: AuthSetup) -> AuthSetup:
    settings.AUTH_ENABLED = True
    return auth_paths
