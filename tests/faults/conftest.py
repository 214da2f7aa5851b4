"""Fault tests run the registry under gunicorn, like the end-to-end tests, and share their fixtures."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.conftest import postgres, require_tool, rgw, skopeo, start_registry  # noqa: F401  (fixtures)
from tests.support.server import RegistryServer


@pytest.fixture(scope="module")
def shared_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """One server for a whole module whose tests do not restart or break it (starting one costs seconds)."""
    server = RegistryServer(Path(tmp_path_factory.mktemp("shared")), workers=2)
    server.start()
    yield server
    server.stop()
