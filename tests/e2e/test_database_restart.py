"""PostgreSQL restarted under a serving registry: no request fails once it is back (the pool checks
a connection before handing it out), and /ready is green again within a second."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.faults.wire import Registry
from tests.support.postgres import Postgres

pytestmark = pytest.mark.e2e


def _ready(url: str) -> int:
    try:
        with urllib.request.urlopen(f"{url}/ready", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_no_request_fails_after_the_database_comes_back(start_registry, postgres: Postgres) -> None:
    server = start_registry(workers=2, SVC_DATABASE_URL=postgres.new_database(), SVC_SERVER_THREADS="4")
    client = Registry(server.host)
    manifest_digest, _ = client.push_image("team/app", "v1", [b"layer"])
    for _ in range(64):  # every pooled connection of both workers is used
        assert client.request("GET", "/v2/team/app/manifests/v1").status == 200

    postgres.restart()  # every connection the workers hold is now dead
    back = time.monotonic()
    while _ready(server.url) != 200:
        assert time.monotonic() - back < 1.0, "/ready still failing a second after the database came back"
        time.sleep(0.05)
    statuses = [client.request("GET", f"/v2/team/app/manifests/{ref}").status
                for ref in ("v1", manifest_digest) * 32]
    assert statuses == [200] * 64
    log = server.log_path.read_text()
    assert '"status":500' not in log and '"status":503' not in log
    assert json.loads(client.request("GET", "/v2/team/app/tags/list").body)["tags"] == ["v1"]
