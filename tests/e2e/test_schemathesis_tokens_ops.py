"""schemathesis against the live server: the token and ops endpoints never answer 5xx."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import require_tool
from tests.support.server import VENV_BIN

pytestmark = pytest.mark.e2e

# The OpenAPI examples use this user, so that the generated cases reach the success paths too.
EXAMPLE_USER = ("alice", "correct horse")
OPERATIONS = r"^/(api/tokens|auth/token|health|ready|metrics|api-docs)"


def test_it_finds_no_server_error_on_the_token_and_ops_endpoints(start_registry, tmp_path: Path) -> None:
    workdir = tmp_path / "server"
    workdir.mkdir()
    subprocess.run([require_tool("htpasswd"), "-cbB", str(workdir / "users.htpasswd"), *EXAMPLE_USER],
                   check=True, capture_output=True)
    server = start_registry(SVC_AUTH_ENABLED="true")
    result = subprocess.run(
        [str(VENV_BIN / "st"), "--no-color", "run", f"{server.url}/api-docs/openapi.json",
         "--url", server.url, "--checks", "not_a_server_error", "--include-path-regex", OPERATIONS,
         "--max-examples", "25", "--seed", "20251121", "--request-timeout", "30",
         # Generation is slow when the machine is busy; the same seeded cases are sent either way.
         "--suppress-health-check", "too_slow"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "15 selected" in result.stdout, result.stdout[-3000:]

    entries = server.log_entries("ops.requests")
    tested = [e for e in entries
              if e["path"].startswith(("/api/tokens", "/auth/token", "/health", "/ready", "/metrics", "/api-docs"))]
    assert len(tested) > 200
    assert [e for e in tested if e["status"] >= 500] == []
    assert any(e["path"] == "/api/tokens" and e["status"] == 201 for e in tested)
    assert any(e["path"] == "/api/tokens/list" and e["status"] == 200 for e in tested)
    assert {e["status"] for e in tested if e["path"] == "/auth/token"} >= {200, 401}
