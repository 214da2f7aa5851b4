"""Replication on the S3 back end (moto) both ways, a bandwidth limit that holds, and a policy's
lock as a database lease on S3 (one holder per policy across replicas)."""
from __future__ import annotations

import time

import pytest
from django.test import Client

from registry.locks import DatabaseLocks, LockHeld
from replication.models import PolicyState
from replication.runner import lock_name
from replication.transfer import Throttle
from tests.support.proxy_fixtures import start_upstream  # noqa: F401
from tests.support.registry_client import push_image
from tests.support.replication import policy_entry, run_until_idle
from tests.support.s3 import s3  # noqa: F401  (fixture)
from tests.support.upstreams import Distribution
from tests.support.upstreams import push_image as push_there

pytestmark = pytest.mark.django_db(transaction=True)


def test_push_and_pull_on_s3(client: Client, settings, s3, start_upstream) -> None:  # noqa: F811
    dest: Distribution = start_upstream("dest")
    source: Distribution = start_upstream("source")
    settings.REPLICATION = [policy_entry(url=dest.url),
                            policy_entry(name="in", direction="pull", trigger="manual", url=source.url,
                                         repositories=["library/tool"], destination_prefix="hub")]
    _body, digest = push_image(client, "team/app", "v1", layers=[b"s3 layer" * 5000])
    run_until_idle()
    assert dest.served("PUT", "/v2/team/app/manifests/v1", 201) == 1
    pulled = push_there(source.url, "library/tool", "1.0", layers=1, layer_size=4096)
    from django.utils import timezone

    from replication import queries

    queries.create_job("in", "manual", timezone.now())
    run_until_idle("in")
    got = client.get("/v2/hub/library/tool/manifests/1.0", HTTP_ACCEPT=pulled.media_type)
    assert got.status_code == 200 and got["Docker-Content-Digest"] == pulled.digest
    assert PolicyState.objects.get(name="in").bytes > 4096
    assert digest


def test_a_bandwidth_limit_holds(client: Client, settings, start_upstream) -> None:  # noqa: F811
    dest: Distribution = start_upstream("dest")
    settings.REPLICATION = [policy_entry(url=dest.url, max_bytes_per_second=256 * 1024)]
    push_image(client, "team/app", "v1", layers=[bytes(768 * 1024)])
    started = time.monotonic()
    run_until_idle()
    assert time.monotonic() - started >= 2.9  # 768 KiB at 256 KiB/s
    assert PolicyState.objects.get(name="dr").bytes >= 768 * 1024


def test_the_throttle_shares_one_rate_between_threads() -> None:
    throttle = Throttle(1024 * 1024)
    started = time.monotonic()
    for _ in range(5):
        throttle.take(256 * 1024)
    assert 1.2 <= time.monotonic() - started < 3.0  # 1.25 MiB at 1 MiB/s
    unlimited = Throttle(0)
    started = time.monotonic()
    unlimited.take(10 ** 9)
    assert time.monotonic() - started < 0.1


def test_a_policy_has_one_holder_as_a_lease() -> None:
    locks = DatabaseLocks(lease_seconds=5)
    with locks.hold(lock_name("to-dr.site_1")):
        with pytest.raises(LockHeld):
            with locks.hold(lock_name("to-dr.site_1")):
                pass
        with locks.hold(lock_name("other")):
            pass
    assert lock_name("To DR") != lock_name("to-dr")
