"""What the gunicorn master and a worker import on the default set-up (filesystem storage, SQLite),
once the worker has started (its application and post_worker_init's threads) and served the
requests of a quiet registry (probes, a scrape, the version check, a tag list, a UI page).

A worker holds its own copy of every module it imports beyond the master's (bench/RESULTS.md, "Idle
memory"): what it does not use it does not load. Neither does the master, which has not read the
configuration (SIGHUP makes new workers read it again)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from regsite import preload
from tests.support.server import REPO, _migrated_database

PROCESSES = """
import gc, io, json, os, runpy, sys
conf = runpy.run_path("gunicorn.conf.py")  # as the master: gunicorn's settings
master = sorted(sys.modules)
from django.conf import settings
configured = settings.configured
conf["pre_fork"](None, None)
frozen = gc.get_freeze_count()
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
print(json.dumps({"master": master, "started": started, "served": sorted(sys.modules),
                  "configured": configured, "frozen": frozen}))
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
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The modules of the master, of a worker just started, and of that worker after the requests;
    whether the master had loaded the settings, and how many objects it froze before forking."""
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
    return {key: set(value) if isinstance(value, list) else value for key, value in found.items()}


def _library(top: str) -> bool:
    spec = importlib.util.find_spec(top)
    return spec is not None and "site-packages" in str(spec.origin)


def _packages(modules: set[str]) -> set[str]:
    return {name for name in UNNEEDED if any(m == name or m.startswith(name + ".") for m in modules)}


def test_a_default_worker_loads_none_of_what_only_other_set_ups_need(imported: dict[str, Any]) -> None:
    loaded = _packages(imported["served"])
    assert loaded == set(), {name: UNNEEDED[name] for name in loaded}


def test_the_master_imports_the_framework_but_not_the_configuration(imported: dict[str, Any]) -> None:
    assert set(preload.FRAMEWORK) <= imported["master"]
    # The workers read the settings, so that SIGHUP's new workers read a changed file.
    assert "regsite.settings" not in imported["master"] and imported["configured"] is False
    # In multiprocess mode, a metric defined in the master would write a file under its pid.
    assert "prometheus_client" not in imported["master"]


def test_a_worker_imports_of_the_libraries_only_what_needs_the_settings(imported: dict[str, Any]) -> None:
    """Models, migrations and the metrics' libraries (above); every other module of Django and the
    libraries a worker uses is the master's, shared. One missing: add it to regsite/preload.py."""
    own = {m for m in imported["served"] - imported["master"] if _library(m.split(".")[0])
           and not m.startswith(("prometheus_client", "django_prometheus"))}
    needs_settings = {m for m in own if m.endswith((".models", ".base_session")) or ".migrations" in m}
    assert own - needs_settings == set()


def test_the_master_freezes_what_the_workers_inherit(imported: dict[str, Any]) -> None:
    # A worker's full collection would otherwise write to every inherited object's header: 7 MiB
    # more of its pages its own (bench/RESULTS.md, "Idle memory").
    assert imported["frozen"] > 10_000
