"""/ready on a real S3 server (Ceph RGW), called as a crowd of probes would: 1,000 calls in 10 s cost
the store at most one small request per ``[server] ready_cache_seconds`` (5 s by default), counted in
the store's own request log."""
from __future__ import annotations

import http.client
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from registry.storage.s3 import S3Driver
from tests.support.rgw import RGW
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


def _call_ready(host: str, calls: int, until: float) -> list[int]:
    """``calls`` GET /ready on one keep-alive connection, spread evenly until ``until``."""
    connection = http.client.HTTPConnection(host, timeout=10)
    statuses = []
    for n in range(calls):
        connection.request("GET", "/ready")
        response = connection.getresponse()
        assert json.loads(response.read())["checks"]["storage"] == "ok"
        statuses.append(response.status)
        time.sleep(max(0.0, (until - time.monotonic()) / (calls - n)))
    connection.close()
    return statuses


def test_a_thousand_calls_in_ten_seconds_cost_the_store_at_most_three_requests(rgw: RGW, tmp_path: Path) -> None:
    bucket = f"registry-{uuid.uuid4().hex[:10]}"
    S3Driver(bucket, endpoint=rgw.endpoint, access_key=rgw.access_key, secret_key=rgw.secret_key
             ).client.create_bucket(Bucket=bucket)
    # One worker: the bound is per process (each worker keeps its own last results).
    server = RegistryServer(tmp_path / "server", workers=1, env_overrides={
        "SVC_STORAGE_BACKEND": "s3", "SVC_STORAGE_S3_ENDPOINT": rgw.endpoint, "SVC_STORAGE_S3_BUCKET": bucket,
        "SVC_STORAGE_S3_ACCESS_KEY": rgw.access_key, "SVC_STORAGE_S3_SECRET_KEY": rgw.secret_key}).start()
    try:
        time.sleep(1)  # the start-up checks' requests are in the log before counting starts
        before = rgw.requests(bucket, method=None)
        started = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            statuses = [s for part in pool.map(lambda _: _call_ready(server.host, 250, started + 10), range(4))
                        for s in part]
        took = time.monotonic() - started
        time.sleep(1)  # RGW writes its log a moment after it answers
        made = rgw.requests(bucket, method=None) - before
    finally:
        server.stop()
    assert statuses == [200] * 1000
    # A run at the first call, then at most one per 5 s: 3 in 10 s (in 15 s too, on a busy machine).
    assert 1 <= made <= 1 + int(took // 5), (made, took)
    assert made <= 3 or took >= 15, (made, took)
    assert rgw.requests(bucket, ".probe-ready", "PUT") == made  # all of them the one small probe write
