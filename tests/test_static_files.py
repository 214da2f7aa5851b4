"""collectstatic's output is the program's, like its code: readable by any user, whoever collected
it. The container image collects as root and serves as uid 10001 (or whatever uid Kubernetes or
OpenShift picks), and an nginx in front may serve /static/ itself; the service's private umask
(0o077, for its data) must not make the assets unreadable to them."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.support.server import REPO


def test_collected_files_are_readable_by_everyone_and_writable_by_nobody_else(tmp_path: Path) -> None:
    root = tmp_path / "static"
    env = {**os.environ, "SVC_CONFIG": os.devnull, "SVC_STORAGE_ROOT": str(tmp_path / "registry"),
           "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "SVC_SERVER_SECRET_KEY_FILE":
           str(tmp_path / "secret_key"), "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "tokens")}
    code = ("import django, sys; from django.conf import settings; django.setup(); "
            f"settings.STATIC_ROOT = {str(root)!r}; from django.core.management import call_command; "
            "call_command('collectstatic', '--noinput', verbosity=0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**env, "DJANGO_SETTINGS_MODULE":
                                                                       "regsite.settings"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".gz" for p in files) and (root / "staticfiles.json") in files
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))
