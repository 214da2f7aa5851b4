"""What the gunicorn master and a worker import on the default set-up (filesystem storage, SQLite),
once the worker has started (its application and post_worker_init's threads) and served the
requests of a quiet registry (probes, a scrape, the version check, a tag list, a UI page).

A worker holds its own copy of every module it imports beyond the master's (bench/RESULTS.md, "Idle
memory"): what it does not use it does not load. Neither does the master, which has not read the
configuration (SIGHUP makes new workers read it again)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from tests.support.server import REPO, _migrated_database

PROCESSES = """
import io, json, os, runpy, sys
conf = runpy.run_path("gunicorn.conf.py")  # as the master: gunicorn's settings
master = sorted(sys.modules)
from regsite.wsgi import application  # as a worker: its application, then its threads
conf["post_worker_init"](None)
started = sorted(sys.modules)
for path in ("/health", "/ready", "/metrics", "/v2/", "/v2/_catalog", "/v2/team/app/tags/list", "/ui/"):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "SERVER_NAME": "x", "SERVER_PORT": "80",
               "wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
               "QUERY_STRING": "", "REMOTE_ADDR": "127.0.0.1"}
    statuses = []
    b"".join(application(environ, lambda status, headers, exc=None: statuses.append(status)))
    assert statuses[0][:3] in ("200", "401", "404"), (path, statuses)
print(json.dumps({"master": master, "started": started, "served": sorted(sys.modules)}))
"""

# Each with what needs it: a worker without it does without.
UNNEEDED = {
    "boto3": "[storage] backend = s3", "botocore": "[storage] backend = s3",
    "psycopg": "a postgresql:// database_url", "psycopg_pool": "a postgresql:// database_url",
    "ops.openapi": "the first request for the API description",
    "jwt": "a Bearer token, or [oidc]", "cryptography": "a Bearer token, or [oidc] (PyJWT loads it)",
    "urllib3": "a pull through a [[proxy]], or a [[replication]] policy",
    "ldap3": "[ldap]", "authlib": "[oidc]", "requests": "[oidc]",
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The modules of the master, of a worker just started, and of that worker after the requests."""
    tmp = tmp_path_factory.mktemp("imports")
    shutil.copy2(_migrated_database(), tmp / "db.sqlite3")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SVC_")}, "SVC_CONFIG": os.devnull,
           "SVC_STORAGE_ROOT": str(tmp / "registry"), "SVC_DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
           "SVC_AUTH_TOKEN_STORAGE": str(tmp / "tokens"), "SVC_SERVER_SECRET_KEY_FILE": str(tmp / "key"),
           "PROMETHEUS_MULTIPROC_DIR": str(tmp), "DJANGO_SETTINGS_MODULE": "regsite.settings"}
    done = subprocess.run([sys.executable, "-c", PROCESSES], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return {state: set(modules) for state, modules in found.items()}


def _packages(modules: set[str]) -> set[str]:
    return {name for name in UNNEEDED if any(m == name or m.startswith(name + ".") for m in modules)}


def test_a_default_worker_loads_none_of_what_only_other_set_ups_need(imported: dict[str, set[str]]) -> None:
    loaded = _packages(imported["served"])
    assert loaded == set(), {name: UNNEEDED[name] for name in loaded}
