"""Under gunicorn with several workers, [gc] interval_hours collects once per interval in all."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from registry.storage import paths
from tests.support.rawhttp import Client

pytestmark = pytest.mark.e2e

FINISHED = "scheduled garbage collection finished"


def test_it_collects_once_across_all_workers_when_an_interval_has_passed(start_registry) -> None:  # type: ignore[no-untyped-def]
    registry = start_registry(workers=3, SVC_GC_GRACE_HOURS="0")
    http = Client(registry.host)
    unused = http.push_blob("team/app", b"pushed but never referenced" * 100)
    registry.stop()
    schedule = Path(registry.env()["SVC_STORAGE_ROOT"]) / paths.GC_SCHEDULE
    schedule.parent.mkdir(parents=True, exist_ok=True)
    two_hours_ago = time.time() - 2 * 3600
    schedule.write_text(f"{two_hours_ago!r}\n")

    registry.env_overrides["SVC_GC_INTERVAL_HOURS"] = "1"
    registry.start()

    deadline = time.monotonic() + 20
    while http.request("GET", f"/v2/team/app/blobs/{unused}").status != 404:
        assert time.monotonic() < deadline, registry.log_path.read_text()[-3000:]
        time.sleep(0.2)
    time.sleep(4)  # every worker has polled by now (each first polls 1-3 s after it starts)
    log = registry.log_path.read_text()
    assert log.count(FINISHED) == 1, log[-3000:]
    assert "removed 0 upload sessions, 0 manifests, 1 blob links, 1 blobs" in log
    assert float(schedule.read_text()) > two_hours_ago + 3600
