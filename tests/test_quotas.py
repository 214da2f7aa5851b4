"""[[quota]]: usage is the bytes of the distinct blobs linked in the rule's repositories; an upload
that would pass the limit is refused at commit (403 DENIED naming the quota and the figures) and its
data removed; a new session into a namespace whose quota is used up is refused at start; unlinking
gives bytes back; the figure always equals a count from the links."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from registry.models import BlobLink, QuotaUsage
from registry.policies import quotas
from registry.policies.rules import current
from registry.services import gc
from registry.services.repositories import delete_repository
from tests.support.registry_client import (
    digest_of,
    patch,
    post_upload,
    push_blob,
    push_image,
    put_upload,
    start_upload,
)

pytestmark = pytest.mark.django_db

LIMIT = 10_000


@pytest.fixture(autouse=True)
def quota(settings) -> None:
    settings.REGISTRY_QUOTAS = [{"name": "team", "repositories": "team/*", "max_bytes": f"{LIMIT}B"}]


def _used() -> int:
    return quotas.usage(current().quotas[0])


def _counted() -> int:
    """The figure counted from scratch (what the row must always equal)."""
    rule = current().quotas[0]
    return quotas._count(rule, current())


def _denied(response) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == 403, response.content
    error = json.loads(response.content)["errors"][0]
    assert error["code"] == "DENIED"
    return error


def test_a_blob_linked_in_two_repositories_of_one_quota_counts_once(client) -> None:
    data = b"a" * 3000
    push_blob(client, "team/one", data)
    push_blob(client, "team/two", data)
    push_blob(client, "other/app", b"b" * 9000)  # no quota applies there
    assert _used() == 3000 == _counted()
    push_blob(client, "team/two", b"c" * 500)
    assert _used() == 3500 == _counted()


def test_an_upload_over_the_quota_is_refused_at_commit_and_its_data_removed(client, storage_root) -> None:
    push_blob(client, "team/app", b"a" * 9000)
    data = b"b" * 1001
    location = start_upload(client, "team/app")["Location"]
    assert patch(client, location, data[:500], "0-499").status_code == 202

    error = _denied(put_upload(client, location, digest_of(data), data[500:]))

    assert error["message"] == (
        'quota [[quota]] #1 "team" exceeded: a blob of 1001 B (1001 bytes) would take team/* to 9.8 KiB '
        "(10001 bytes), over its limit of 9.8 KiB (10000 bytes) (10000B); 8.8 KiB (9000 bytes) are in use")
    assert error["detail"] == {"quota": "team", "repository": "team/app", "limit": LIMIT, "used": 9000,
                               "size": 1001}
    assert client.get(location).status_code == 404  # the session is gone, not resumable
    assert list((storage_root / "uploads").iterdir()) == []
    assert not list(storage_root.glob(f"blobs/**/{digest_of(data).split(':')[1]}*"))
    assert _used() == 9000 == _counted()
    # Exactly the limit fits.
    assert post_upload(client, "team/app", f"?digest={digest_of(data[:1000])}", data[:1000]).status_code == 201
    assert _used() == LIMIT == _counted()


def test_a_monolithic_upload_over_the_quota_is_refused_too(client, storage_root) -> None:
    data = b"x" * (LIMIT + 1)
    error = _denied(post_upload(client, "team/app", f"?digest={digest_of(data)}", data))
    assert error["detail"]["size"] == LIMIT + 1
    assert list((storage_root / "uploads").iterdir()) == []


def test_a_new_session_in_a_namespace_over_its_quota_is_refused_at_start(client) -> None:
    push_blob(client, "team/one", b"a" * LIMIT)
    error = _denied(client.post("/v2/team/two/blobs/uploads/"))
    assert error["message"].startswith('quota [[quota]] #1 "team" is used up: team/* holds 9.8 KiB (10000 bytes)')
    assert client.post("/v2/other/app/blobs/uploads/").status_code == 202


def test_a_blob_already_counted_costs_nothing_even_when_the_quota_is_full(client) -> None:
    data = b"a" * LIMIT
    push_blob(client, "team/one", data)
    mounted = client.post(f"/v2/team/two/blobs/uploads/?mount={digest_of(data)}&from=team/one")
    assert mounted.status_code == 201
    assert _used() == LIMIT


def test_a_mount_that_would_pass_the_quota_is_denied(client) -> None:
    data = b"a" * 6000
    push_blob(client, "other/app", data)
    push_blob(client, "team/one", b"b" * 5000)
    _denied(client.post(f"/v2/team/one/blobs/uploads/?mount={digest_of(data)}&from=other/app"))
    assert not BlobLink.objects.filter(repository__name="team/one", blob__digest=digest_of(data)).exists()
    assert _used() == 5000


def test_unlinking_gives_the_bytes_back_once_no_repository_of_the_quota_links_the_blob(client) -> None:
    shared = b"s" * 4000
    push_blob(client, "team/one", shared)
    push_blob(client, "team/two", shared)
    own = push_blob(client, "team/two", b"o" * 1000)
    assert client.delete(f"/v2/team/one/blobs/{digest_of(shared)}").status_code == 202
    assert _used() == 5000 == _counted()  # team/two still links it
    assert client.delete(f"/v2/team/two/blobs/{own}").status_code == 202
    assert _used() == 4000 == _counted()
    delete_repository("team/two")
    assert _used() == 0 == _counted()


def test_garbage_collection_gives_back_the_bytes_of_what_it_unlinks(client) -> None:
    push_image(client, "team/app", "v1", layers=[b"l" * 2000])
    _, gone = push_image(client, "team/app", "v2", layers=[b"m" * 3000])
    before = _used()
    assert client.delete(f"/v2/team/app/manifests/{gone}").status_code == 202
    BlobLink.objects.update(created_at=BlobLink.objects.first().created_at - timedelta(days=2))
    from registry.models import Blob

    Blob.objects.update(created_at=Blob.objects.first().created_at - timedelta(days=2))
    gc.collect(gc.Options(grace=timedelta(hours=1)))
    assert _used() == _counted() < before
    assert before - _used() == 3000 + len(b'{"architecture":"amd64","os":"linux","ref":"v2"}')


def test_a_changed_glob_makes_the_figure_counted_again(client, settings) -> None:
    push_blob(client, "team/one", b"a" * 1000)
    push_blob(client, "lab/one", b"b" * 2000)
    assert _used() == 1000
    settings.REGISTRY_QUOTAS = [{"name": "team", "repositories": "*/one", "max_bytes": f"{LIMIT}B"}]
    assert _used() == 3000
    push_blob(client, "lab/one", b"c" * 10)  # charged under the new scope, counted first
    assert QuotaUsage.objects.get(name="team").used_bytes == 3010 == _counted()


def test_reconcile_corrects_a_wrong_figure_and_forgets_removed_rules(client) -> None:
    push_blob(client, "team/one", b"a" * 1000)
    QuotaUsage.objects.filter(name="team").update(used_bytes=7)
    QuotaUsage.objects.create(name="gone", used_bytes=5)
    assert quotas.reconcile() == 1
    assert _used() == 1000
    assert list(QuotaUsage.objects.values_list("name", flat=True)) == ["team"]


def test_on_s3_an_upload_over_the_quota_is_refused_before_its_data_is_copied(client, settings) -> None:
    from registry.storage import default_driver
    from tests.support.s3 import BUCKET, moto_driver

    with moto_driver(prefix="reg"):
        settings.REGISTRY_STORAGE = {**settings.REGISTRY_STORAGE, "backend": "s3", "s3_bucket": BUCKET,
                                     "s3_prefix": "reg", "s3_access_key": "testing", "s3_secret_key": "testing",
                                     "s3_endpoint": "", "redirect_endpoint": ""}
        default_driver.cache_clear()
        driver = default_driver()
        driver.client.create_bucket(Bucket=BUCKET)
        try:
            push_blob(client, "team/app", b"a" * 9000)
            data = b"b" * 2000
            location = start_upload(client, "team/app")["Location"]
            _denied(put_upload(client, location, digest_of(data), data))
            kept = digest_of(b"a" * 9000)
            assert [info.path for info in driver.walk("blobs")] == [f"blobs/sha256/{kept[7:9]}/{kept[7:]}/data"]
            assert list(driver.walk("uploads")) == []
            assert _used() == 9000 == _counted()
        finally:
            default_driver.cache_clear()
