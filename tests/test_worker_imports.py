"""What a worker imports on the default set-up (filesystem storage, SQLite) once it has served the
requests of a quiet registry (probes, a scrape, the version check, a UI page): not the S3 client, the
PostgreSQL driver or the API description. Each worker holds its own copy of every module it imports
(bench/RESULTS.md, "Idle memory"), so what it does not use it does not load."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.server import REPO

WORKER = """
import io, json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "regsite.settings")
from django.core.management import call_command
import django; django.setup()
call_command("migrate", verbosity=0)
loaded = set(sys.modules)  # migrate's own imports are not a worker's
for name in list(sys.modules):
    if name.startswith(("boto3", "botocore", "psycopg", "ops.openapi")):
        del sys.modules[name]  # as a worker that never migrated
from regsite.wsgi import application
for path in ("/health", "/ready", "/metrics", "/v2/", "/v2/_catalog", "/ui/"):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "SERVER_NAME": "x", "SERVER_PORT": "80",
               "wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
               "QUERY_STRING": "", "REMOTE_ADDR": "127.0.0.1"}
    statuses = []
    b"".join(application(environ, lambda status, headers, exc=None: statuses.append(status)))
    assert statuses[0][:3] in ("200", "401"), (path, statuses)
print(json.dumps(sorted(sys.modules)))
"""


def test_a_default_worker_loads_neither_s3_postgresql_nor_the_api_description(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SVC_")}, "SVC_CONFIG": os.devnull,
           "SVC_STORAGE_ROOT": str(tmp_path / "registry"), "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "tokens"), "SVC_SERVER_SECRET_KEY_FILE": str(tmp_path / "key"),
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", WORKER], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    modules = set(json.loads(done.stdout.splitlines()[-1]))
    unneeded = {"boto3", "botocore", "psycopg", "psycopg_pool", "ops.openapi"}
    assert modules & unneeded == set()
