"""Shared fixtures. Unit tests use the Django test client over an isolated storage root."""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Iterator

# Settings are derived from SVC_* variables when Django first loads them: point every path of the
# test process at a scratch directory so that no test writes into the working tree.
_SCRATCH = Path(tempfile.mkdtemp(prefix="registry-tests-"))
atexit.register(shutil.rmtree, _SCRATCH, True)
os.environ.setdefault("SVC_STORAGE_ROOT", str(_SCRATCH / "registry"))
os.environ.setdefault("SVC_DATABASE_URL", f"sqlite:///{_SCRATCH / 'db.sqlite3'}")
os.environ.setdefault("SVC_AUTH_TOKEN_STORAGE", str(_SCRATCH / "tokens"))
os.environ.setdefault("SVC_SERVER_SECRET_KEY_FILE", str(_SCRATCH / "secret_key"))
os.environ.setdefault("SVC_AUTH_HTPASSWD_FILE", str(_SCRATCH / "users.htpasswd"))

import botocore.session  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings as hypothesis_settings  # noqa: E402

from registry.locks import default_locks  # noqa: E402
# The `database` mark on the tests that reach the database (tests/support/database_mark.py).
from tests.support.database_mark import pytest_itemcollected  # noqa: E402, F401  (hook)
from registry.storage import default_driver  # noqa: E402
# pytest-xdist's scheduling: which tests share a process (tests/support/parallel.py).
from tests.support.parallel import (  # noqa: E402, F401  (hooks)
    pytest_collection_modifyitems, pytest_configure_node, pytest_xdist_make_scheduler)

# The suite runs in parallel processes, on machines others share: an example can take several times
# its usual time there. Hypothesis's 200 ms deadline per example and its data-generation speed check
# then fail a property that holds; a 2 s deadline still catches a parser gone quadratic. Derandomized:
# every run tries the same examples, so a failure in CI is one every run (and every developer) gets.
hypothesis_settings.register_profile("suite", deadline=timedelta(seconds=2), derandomize=True,
                                     suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("suite")

# Every S3Driver opens a boto3 session, and each session read and parsed botocore's data files again
# (endpoints.json and the S3 model: 0.2 to 0.4 s of CPU a driver, two drivers a test on moto). One
# loader for the test process: the files do not change, and a session already shares its loader's
# parsed data between its clients.
botocore.session.create_loader = functools.lru_cache(maxsize=None)(botocore.session.create_loader)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """The test database is a file, not SQLite's shared-cache memory database: threads of a test
    then wait for the write lock (busy timeout, IMMEDIATE transactions) as workers do in service."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        database.setdefault("TEST", {})["NAME"] = str(_SCRATCH / "test-db.sqlite3")


@pytest.fixture(autouse=True)
def ready_on_every_call(settings) -> Iterator[None]:
    """Unit tests change what /ready checks and call it again at once: no results are kept between
    calls (tests/test_ready_cache.py sets a period), nor from one test to the next."""
    from ops import readiness

    settings.READY_CACHE_SECONDS = 0
    yield
    readiness.forget()


@pytest.fixture(autouse=True)
def storage_root(settings, tmp_path: Path) -> Iterator[Path]:
    """Each test gets an empty storage root, used by the default filesystem driver and file locks."""
    root = tmp_path / "storage"
    root.mkdir()
    settings.REGISTRY_STORAGE_ROOT = root
    default_driver.cache_clear()
    default_locks.cache_clear()
    yield root
    default_driver.cache_clear()
    default_locks.cache_clear()
