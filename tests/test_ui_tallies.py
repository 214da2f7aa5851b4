"""On a big registry the web UI reads its totals as last counted and counts them again in the
background; a big repository's figures likewise; the untagged list looks among the newest manifests
only; repositories are sorted by the push time each push keeps on its row."""
from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ops.ui import queries as ui_queries
from ops.ui import tallies
from registry import queries
from registry.models import Repository, Tally
from tests.support.lifecycle import push_blob, push_image
from tests.support.ui_fixtures import big_registry, plain_static  # noqa: F401

pytestmark = pytest.mark.django_db
fill_pushed_at = importlib.import_module("registry.migrations.0008_pushed_order_and_tallies").fill_pushed_at


def _overview(client: Client) -> str:
    return client.get("/ui/").content.decode()


def test_the_totals_of_a_big_registry_are_read_as_last_counted_and_counted_again_when_old(
        client: Client, big_registry) -> None:
    push_image("team/one", "v1", [b"one"])
    assert "1</span>" in _overview(client)  # never counted: counted for this view
    push_image("team/two", "v1", [b"two"])

    body = _overview(client)
    assert "held when its totals were last counted" in body and "1</span>" in body  # not counted again yet

    Tally.objects.filter(name="registry").update(counted_at=timezone.now() - tallies.FRESH - timedelta(seconds=1))
    _overview(client)  # this view starts the count (here: at once) and shows the old figures
    assert Tally.objects.get(name="registry").data["repositories"] == 2
    assert "2</span>" in _overview(client)


def test_one_process_counts_a_tally_at_a_time(big_registry) -> None:
    now = timezone.now()
    assert queries.claim_tally("registry", now + tallies.COUNTING, now)
    assert not queries.claim_tally("registry", now + tallies.COUNTING, now)
    assert queries.claim_tally("registry", now + 2 * tallies.COUNTING, now + tallies.COUNTING + timedelta(seconds=1))


def test_a_big_repository_shows_its_figures_as_last_counted(client: Client, big_registry, monkeypatch) -> None:
    monkeypatch.setattr(queries.tallies, "BIG_REPOSITORY", 2)
    queries.tallies._figures_sql.cache_clear()
    for i in range(3):
        push_image("team/big", f"t{i}", [f"layer {i}".encode()])
    push_image("team/small", "v1", [b"small"])
    try:
        big = client.get("/ui/r/team/big/").content.decode()
        assert "<strong>3</strong> tags" in big
        push_image("team/big", "t3", [b"layer 3"])
        big = client.get("/ui/r/team/big/").content.decode()
        assert "<strong>3</strong> tags" in big and "tags, manifests and size counted" in big
        small = client.get("/ui/r/team/small/").content.decode()
        assert "counted" not in small.split("<h1", 1)[1].split("</p>", 1)[0]
    finally:
        queries.tallies._figures_sql.cache_clear()


def test_the_untagged_list_looks_among_the_newest_manifests_and_counts_them_all(client: Client, monkeypatch) -> None:
    monkeypatch.setattr(ui_queries, "UNTAGGED_SCAN", 3)
    for i in range(4):
        push_image("team/app", None, [f"untagged {i}".encode()])
    push_image("team/app", "v1", [b"tagged"])
    body = client.get("/ui/r/team/app/").content.decode()
    assert "newest 2 of 4:" in body and "The list looks among the 3 newest manifests." in body


def test_a_big_repository_shows_its_untagged_manifests_as_last_counted(client: Client, big_registry,
                                                                        monkeypatch) -> None:
    # Counting them is a look at every manifest of the repository (issue 25: 10-35 ms of each tag
    # page at 100,000, growing with it): a big repository's count is its tally's, not the page's.
    monkeypatch.setattr(queries.tallies, "BIG_REPOSITORY", 2)
    queries.tallies._figures_sql.cache_clear()
    try:
        for i in range(3):
            push_image("team/big", None, [f"untagged {i}".encode()])
        push_image("team/big", "v1", [b"tagged"])
        assert "newest 3 of 3" not in client.get("/ui/r/team/big/").content.decode()  # 3 in all: "3:"
        push_image("team/big", None, [b"untagged 3"])
        with CaptureQueriesContext(connection) as captured:
            body = client.get("/ui/r/team/big/").content.decode()
        assert "newest 4 of 3" not in body and "Untagged manifests" in body
        assert "3 (counted" in body  # the tally's count, said to be one; the list shows all four
        assert not [q for q in captured.captured_queries if q["sql"].startswith("SELECT COUNT(*)")]
        Tally.objects.filter(name__startswith="repository:").update(
            counted_at=timezone.now() - tallies.FRESH - timedelta(seconds=1))
        client.get("/ui/r/team/big/")  # counted again (here: at once)
        assert "4 (counted" in client.get("/ui/r/team/big/").content.decode()
    finally:
        queries.tallies._figures_sql.cache_clear()


def _order(client: Client) -> list[str]:
    body = client.get("/ui/repositories/", {"sort": "recent"}).content.decode().split("<tbody>", 1)[1]
    return sorted(["team/a", "team/b"], key=body.index)


def test_a_push_keeps_the_repositorys_push_time_at_most_once_a_minute(client: Client) -> None:
    push_image("team/a", "v1", [b"a"])
    push_image("team/b", "v1", [b"b"])
    assert _order(client) == ["team/b", "team/a"]
    push_image("team/a", "v2", [b"a2"])  # within the minute: the row is not written again
    assert _order(client) == ["team/b", "team/a"]
    Repository.objects.filter(name="team/a").update(pushed_at=timezone.now() - timedelta(minutes=2))
    Repository.objects.filter(name="team/b").update(pushed_at=timezone.now() - timedelta(minutes=3))
    push_image("team/a", "v3", [b"a3"])
    assert _order(client) == ["team/a", "team/b"]


def test_the_migration_fills_the_push_time_of_existing_repositories() -> None:
    push_image("team/a", "v1", [b"a"])
    push_blob("team/empty", b"a blob only")
    Repository.objects.update(pushed_at=None)
    fill_pushed_at(apps, None)
    pushed: dict[str, Any] = dict(Repository.objects.values_list("name", "pushed_at"))
    assert pushed["team/a"] is not None and pushed["team/empty"] is None
