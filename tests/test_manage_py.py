"""manage.py lists and runs the registry's commands; Django's development server is not one of them:
it would serve the registry without gunicorn, its worker and its limits (`make run` starts it)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.server import REPO


def manage(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SVC_CONFIG": os.devnull, "SVC_STORAGE_ROOT": str(tmp_path / "registry"),
           "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "t"),
           "SVC_SERVER_SECRET_KEY_FILE": str(tmp_path / "secret_key")}
    return subprocess.run([sys.executable, str(REPO / "manage.py"), *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)


def test_help_lists_the_registry_commands_and_not_runserver(tmp_path: Path) -> None:
    listed = manage("help", tmp_path=tmp_path)
    assert listed.returncode == 0
    commands = {line.strip() for line in listed.stdout.splitlines() if line.startswith("    ")}
    assert {"garbagecollect", "createtoken", "adduser", "migrate"} <= commands
    assert "runserver" not in commands and "testserver" not in commands


def test_runserver_says_how_the_registry_is_started(tmp_path: Path) -> None:
    refused = manage("runserver", tmp_path=tmp_path)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.strip() == ("manage.py runserver: the registry runs under gunicorn, not Django's "
                                      "development server: `make run`, or `gunicorn -c gunicorn.conf.py`")
