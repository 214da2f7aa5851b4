"""Pull replication from a real CNCF registry: exactly the tags the filter selects, byte for byte,
nothing fetched again on the next run, and an immutable local tag, or one someone else moved here,
never overwritten."""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from replication.models import Item, Job, PolicyState
from tests.support.proxy_fixtures import start_upstream  # noqa: F401
from tests.support.replication import policy_entry, run_until_idle
from tests.support.upstreams import Distribution, push_image, push_multiarch

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(start_upstream) -> Distribution:  # noqa: F811
    return start_upstream("source")


def test_it_pulls_the_tags_the_filter_selects_and_a_second_run_moves_nothing(client: Client, settings,
                                                                              source: Distribution) -> None:
    settings.REPLICATION = [policy_entry(direction="pull", url=source.url, trigger="schedule",
                                         repositories=["library/*"], tags=["^1\\."], destination_prefix="hub")]
    wanted = {tag: push_image(source.url, "library/app", tag, layers=1, layer_size=2048) for tag in ("1.0", "1.1")}
    push_image(source.url, "library/app", "2.0", layers=1, layer_size=2048)
    push_image(source.url, "other/app", "1.0", layers=1, layer_size=2048)
    index = push_multiarch(source.url, "library/multi", "1.5", layer_size=1024)
    run_until_idle()
    for tag, pushed in wanted.items():
        got = client.get(f"/v2/hub/library/app/manifests/{tag}", HTTP_ACCEPT=pushed.media_type)
        assert got.status_code == 200 and got["Docker-Content-Digest"] == pushed.digest
    assert client.get("/v2/hub/library/multi/manifests/1.5").headers["Docker-Content-Digest"] == index.digest
    assert client.get("/v2/hub/library/app/tags/list").json()["tags"] == ["1.0", "1.1"]
    assert client.get("/v2/hub/other/app/tags/list").status_code == 404
    moved = PolicyState.objects.get(name="dr").bytes
    assert moved >= 2 * 2048
    blob_gets = source.log_path.read_text().count('"GET /v2/library/app/blobs/')

    Job.objects.update(created_at=Job.objects.get().created_at.replace(year=2000))  # the next run is due
    run_until_idle()
    second = Job.objects.order_by("-id").first()
    assert second is not None and (second.state, second.done, second.skipped, second.bytes) == ("succeeded", 0, 3, 0)
    assert PolicyState.objects.get(name="dr").bytes == moved
    assert source.log_path.read_text().count('"GET /v2/library/app/blobs/') == blob_gets


def test_an_immutable_local_tag_is_never_overwritten(client: Client, settings, source: Distribution) -> None:
    from tests.support.registry_client import push_image as push_here

    settings.REPLICATION = [policy_entry(direction="pull", url=source.url, trigger="manual",
                                         repositories=["library/app"])]
    settings.REGISTRY_IMMUTABLE = [{"name": "releases", "repositories": "library/*", "tags": ["v*"]}]
    _body, ours = push_here(client, "library/app", "v1")
    push_image(source.url, "library/app", "v1", layers=1, layer_size=512)
    from django.utils import timezone

    from replication import queries

    queries.create_job("dr", "manual", timezone.now())
    run_until_idle()
    assert client.head("/v2/library/app/manifests/v1")["Docker-Content-Digest"] == ours
    item = Item.objects.get()
    assert item.state == "skipped" and "immutable" in item.note


def _pull_again() -> None:
    from django.utils import timezone

    from replication import queries

    queries.create_job("dr", "manual", timezone.now())
    run_until_idle()


def test_a_local_tag_moved_by_hand_is_left_while_an_unmoved_one_follows_the_remote(
        client: Client, settings, source: Distribution) -> None:
    from tests.support.registry_client import push_image as push_here

    settings.REPLICATION = [policy_entry(direction="pull", url=source.url, trigger="manual",
                                         repositories=["library/app"])]
    push_image(source.url, "library/app", "moved", layers=1, layer_size=256)
    push_image(source.url, "library/app", "kept", layers=1, layer_size=256)
    _pull_again()
    _body, ours = push_here(client, "library/app", "moved")  # by hand, after the pull
    newer = {tag: push_image(source.url, "library/app", tag, layers=1, layer_size=300).digest
             for tag in ("moved", "kept")}
    assert ours != newer["moved"]

    out = StringIO()
    call_command("replicate", "dr", "--dry-run", stdout=out)
    assert "library/app:moved: moved locally, left as it is" in out.getvalue()
    assert "/library/app:kept" in out.getvalue() and "1 to copy" in out.getvalue()

    _pull_again()
    assert client.head("/v2/library/app/manifests/moved")["Docker-Content-Digest"] == ours
    assert client.head("/v2/library/app/manifests/kept")["Docker-Content-Digest"] == newer["kept"]
    left = Item.objects.filter(tag="moved").latest("id")
    assert left.state == "skipped" and left.note.startswith("moved locally, left as it is")
    assert ours in left.note
    run = Job.objects.latest("id")
    assert (run.state, run.done, run.skipped, run.failed) == ("succeeded", 1, 1, 0)
    assert "moved locally, left as it is" in client.get("/ui/replication/").content.decode()

    _pull_again()  # and stays left: its last done item is still another digest
    assert client.head("/v2/library/app/manifests/moved")["Docker-Content-Digest"] == ours


def test_a_local_tag_that_was_there_before_the_policy_is_left(client: Client, settings,
                                                             source: Distribution) -> None:
    from tests.support.registry_client import push_image as push_here

    settings.REPLICATION = [policy_entry(direction="pull", url=source.url, trigger="manual",
                                         repositories=["library/app"])]
    _body, ours = push_here(client, "library/app", "v1")
    push_image(source.url, "library/app", "v1", layers=1, layer_size=256)
    _pull_again()
    assert client.head("/v2/library/app/manifests/v1")["Docker-Content-Digest"] == ours
    item = Item.objects.get()
    assert item.state == "skipped" and item.note.startswith("moved locally, left as it is")
