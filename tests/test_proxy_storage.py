"""Cached blobs are stored like pushed ones: in the S3 backend too (fetched through a multipart
upload, then served by redirect), and scrub treats them as any other; a cached blob that scrub
removes as corrupt is fetched again from the upstream on the next pull."""
from __future__ import annotations

from typing import Iterator

import pytest

from registry.digests import Digest
from registry.models import Blob
from registry.services import scrub
from registry.storage import default_driver, paths
from registry.storage.s3 import S3Driver
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, stored, upstream  # noqa: F401
from tests.support.registry_client import body_of
from tests.support.s3 import BUCKET, moto_driver
from tests.support.upstreams import OCI_MANIFEST, push_image

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def s3(settings) -> Iterator[S3Driver]:
    with moto_driver(prefix="reg"):
        settings.REGISTRY_STORAGE = {**settings.REGISTRY_STORAGE, "backend": "s3", "s3_bucket": BUCKET,
                                     "s3_prefix": "reg", "s3_access_key": "testing", "s3_secret_key": "testing",
                                     "s3_endpoint": "", "redirect_endpoint": ""}
        default_driver.cache_clear()
        driver = default_driver()
        driver.client.create_bucket(Bucket=BUCKET)
        assert isinstance(driver, S3Driver)
        yield driver
        default_driver.cache_clear()


def test_a_cached_blob_on_s3_is_then_served_by_redirect(client, settings, s3, upstream, mirror) -> None:
    mirror()
    settings.REGISTRY_REDIRECT = True
    pushed = push_image(upstream.url, "library/alpine", "v1", layers=1, layer_size=7 * 1024 * 1024)
    layer = max(pushed.blobs, key=lambda d: len(pushed.blobs[d]))
    first = client.get(f"/v2/hub/library/alpine/blobs/{layer}")
    assert first.status_code == 200 and body_of(first) == pushed.blobs[layer]
    stored()
    assert s3.read(paths.blob_data(Digest.parse(layer))) == pushed.blobs[layer]
    assert list(s3.walk("uploads")) == []  # the fetch's upload went with the commit
    again = client.get(f"/v2/hub/library/alpine/blobs/{layer}")
    assert again.status_code == 307
    assert upstream.served("GET", f"/v2/library/alpine/blobs/{layer}") == 1


def test_scrub_repairs_a_corrupt_cached_blob_and_the_next_pull_fetches_it(client, upstream, mirror,
                                                                         storage_root) -> None:
    mirror()
    pushed = push_image(upstream.url, "library/alpine", "v1", layers=1)
    assert client.get("/v2/hub/library/alpine/manifests/v1", headers={"Accept": OCI_MANIFEST}).status_code == 200
    layer = max(pushed.blobs, key=lambda d: len(pushed.blobs[d]))
    body_of(client.get(f"/v2/hub/library/alpine/blobs/{layer}"))
    stored()
    data_path = storage_root.joinpath(*paths.blob_data(Digest.parse(layer)).split("/"))
    data_path.write_bytes(b"rot" + data_path.read_bytes()[3:])
    result = scrub.scrub(repair=True)
    assert [(p.kind, p.digest, p.repaired) for p in result.problems] == [(scrub.CORRUPT, layer, True)]
    assert not Blob.objects.filter(digest=layer).exists()
    assert body_of(client.get(f"/v2/hub/library/alpine/blobs/{layer}")) == pushed.blobs[layer]
    assert upstream.served("GET", f"/v2/library/alpine/blobs/{layer}") == 2
