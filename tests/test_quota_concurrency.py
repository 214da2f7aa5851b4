"""Parallel pushers into one namespace, together pushing just over its quota: the usage never passes
the limit, every refusal was needed, and the figure equals the bytes of the blob files linked there.
Run on SQLite and, by scripts/with-postgres.sh, on PostgreSQL (row lock instead of the write lock)."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import Client

from registry.digests import Digest
from registry.models import Blob, BlobLink, QuotaUsage
from registry.policies import quotas
from registry.policies.rules import current
from registry.storage import default_driver, paths
from tests.support.registry_client import digest_of, patch, post_upload, put_upload

pytestmark = pytest.mark.django_db(transaction=True)

PUSHERS = 8
BLOBS_EACH = 6
SIZE = 5000
SHARED = [bytes([200 + i]) * SIZE for i in range(2)]  # pushed by every pusher, into its own repository
# Every pusher's own blobs plus the shared ones: 50,000 bytes + 240,000 bytes; the limit is a little
# less than the lot, so that the last few pushes must be refused.
LIMIT = SIZE * (len(SHARED) + PUSHERS * BLOBS_EACH) - 3 * SIZE - 1234


@pytest.fixture(autouse=True)
def quota(settings) -> None:
    settings.REGISTRY_QUOTAS = [{"name": "team", "repositories": "team/**", "max_bytes": str(LIMIT)}]


def _push(client: Client, name: str, data: bytes, chunked: bool) -> int:
    digest = digest_of(data)
    if not chunked:
        return post_upload(client, name, f"?digest={digest}", data).status_code
    started = client.post(f"/v2/{name}/blobs/uploads/")
    if started.status_code != 202:
        return started.status_code
    location = started["Location"]
    assert patch(client, location, data[:1000], "0-999").status_code == 202
    return put_upload(client, location, digest, data[1000:]).status_code


def test_parallel_pushes_never_pass_the_quota_and_usage_matches_the_files(storage_root) -> None:
    barrier = threading.Barrier(PUSHERS)

    def pusher(i: int) -> list[tuple[bytes, int]]:
        client = Client()
        own = [f"{i}-{j}|".encode() * (SIZE // len(f"{i}-{j}|".encode()) + 1) for j in range(BLOBS_EACH)]
        own = [data[:SIZE] for data in own]
        outcomes = []
        try:
            barrier.wait(timeout=30)
            for j, data in enumerate(own[:3] + SHARED + own[3:]):
                outcomes.append((data, _push(client, f"team/app{i}", data, chunked=bool((i + j) % 2))))
        finally:
            connection.close()
        return outcomes

    with ThreadPoolExecutor(PUSHERS) as pool:
        results = [outcome for outcomes in pool.map(pusher, range(PUSHERS)) for outcome in outcomes]

    assert {status for _data, status in results} <= {201, 403}, results
    refused = [data for data, status in results if status == 403]
    used = quotas.usage(current().quotas[0])
    linked = set(BlobLink.objects.filter(repository__name__startswith="team/").values_list("blob__digest", flat=True))
    on_disk = sum(default_driver().stat(paths.blob_data(Digest.parse(d))).size for d in linked)

    assert refused, "the pushes were meant to end over the quota"
    assert used <= LIMIT
    assert used == on_disk == sum(Blob.objects.filter(digest__in=linked).values_list("size", flat=True))
    assert used == QuotaUsage.objects.get(name="team").used_bytes
    # Each refusal was needed: that blob was not stored, and adding it would pass the limit.
    for data in refused:
        assert digest_of(data) not in linked or data in SHARED
        assert used + len(data) > LIMIT
    assert list((storage_root / "uploads").iterdir()) == []
