"""The web UI shows a cache's repositories as mirrors, with their upstream and last pull, and offers
no delete there (the namespace is read-only)."""
from __future__ import annotations

import pytest

from tests.support.proxy_fixtures import (  # noqa: F401
    fresh_upstream_state, mirror, start_upstream, stored, upstream)
from tests.support.ui_fixtures import plain_static  # noqa: F401
from tests.support.upstreams import OCI_INDEX, OCI_MANIFEST, push_image, push_multiarch

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cached(client, upstream, mirror):  # type: ignore[no-untyped-def]
    mirror()
    pushed = push_image(upstream.url, "library/alpine", "3.20", layers=1)
    assert client.get("/v2/hub/library/alpine/manifests/3.20", headers={"Accept": OCI_MANIFEST}).status_code == 200
    return pushed


def test_the_repository_list_marks_mirrors(client, cached) -> None:
    page = client.get("/ui/repositories/").content.decode()
    assert "hub/library/alpine" in page and 'title="pull-through cache of http://127.0.0.1:' in page


def test_the_repository_page_names_the_upstream_and_the_last_pull(client, upstream, cached) -> None:
    page = client.get("/ui/r/hub/library/alpine/").content.decode()
    assert f"{upstream.url}/library/alpine" in page
    assert "last pulled" in page and "last pulled —" not in page
    assert "Delete" not in page


def test_the_manifest_page_too_and_deleting_is_refused(client, upstream, cached) -> None:
    page = client.get(f"/ui/r/hub/library/alpine/-/manifests/{cached.digest}").content.decode()
    assert "mirror" in page and "cached" in page
    # The manifest's own last pull, as any manifest page shows it: the GET that cached it.
    assert "<dt>Last pulled</dt>" in page and '<dt>Last pulled</dt><dd><span class="muted">never' not in page
    refused = client.get("/ui/r/hub/library/alpine/-/manifests/3.20/delete")
    assert refused.status_code == 405 and "read-only pull-through cache" in refused.content.decode()
    assert client.get("/ui/r/hub/library/alpine/-/delete").status_code == 405


def test_a_cache_says_when_it_cached_never_that_someone_pushed(client, cached) -> None:
    page = client.get("/ui/r/hub/library/alpine/").content.decode()
    assert "last push" not in page and "last cached" in page
    assert ">Pushed<" not in page and ">Cached<" in page  # the tags table's column
    listing = client.get("/ui/repositories/").content.decode()
    assert "(cached)" in listing


def test_a_cached_index_whose_platforms_are_not_cached_yet_shows_no_size(client, upstream, mirror) -> None:
    mirror()
    push_multiarch(upstream.url, "library/multi", "1.0")
    fetched = client.get("/v2/hub/library/multi/manifests/1.0", headers={"Accept": OCI_INDEX})
    assert fetched.status_code == 200  # the index alone: its platforms come when first pulled
    stored()
    page = client.get("/ui/r/hub/library/multi/").content.decode()
    row = page[page.index('tag-name"'):]
    row = row[:row.index("</tr>")]
    assert "0 B" not in row and "not cached" in row, row
