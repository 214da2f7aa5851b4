"""The web UI under the access rules: lists, search and overview show only what the viewer may read; a
repository they may not read is "not found" exactly as one that does not exist; delete buttons and
deletes follow the rules; the access page; admin pages (robots, audit log) for admins only."""
from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from audit import queries as audit_queries
from registry.services import repositories
from tests.support.access import PASSWORDS, teams  # noqa: F401  (fixture)
from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tests.support.notify import entry
from tests.support.replication import policy_entry
from tests.support.registry_client import push_image
from registry.models import Tally
from tests.support.ui_fixtures import big_registry, plain_static  # noqa: F401  (fixture, autouse fixture)

pytestmark = pytest.mark.django_db

REPOSITORIES = ["team-a/app", "team-a/secret/keys", "team-b/app", "public/base", "other/app"]


@pytest.fixture
def seeded(teams) -> None:
    erin = Client(HTTP_AUTHORIZATION=basic("erin", PASSWORDS["erin"]))
    for name in REPOSITORIES:
        push_image(erin, name, "v1")


def signed_in(who: str) -> Client:
    client = Client()
    response = client.post("/ui/sign-in", {"username": who, "password": PASSWORDS[who]})
    assert response.status_code == 302, response.content[:300]
    return client


def _listed(html: str) -> list[str]:
    return re.findall(r'<a class="strong" href="/ui/r/([^"]+)/">', html)


@pytest.mark.parametrize("who, expected", [
    ("alice", ["public/base", "team-a/app"]),
    ("carol", ["public/base", "team-a/app", "team-b/app"]),
    ("dave", ["public/base"]),
    ("erin", sorted(REPOSITORIES)),
])
def test_the_repository_list_shows_only_what_the_viewer_may_read(seeded, who: str, expected: list[str]) -> None:
    page = signed_in(who).get("/ui/repositories/").content.decode()
    assert _listed(page) == expected
    assert f"{len(expected)} repositor" in page


def test_search_and_the_overview_show_only_what_the_viewer_may_read(seeded) -> None:
    alice = signed_in("alice")
    assert _listed(alice.get("/ui/repositories/?q=app").content.decode()) == ["team-a/app"]
    home = alice.get("/ui/").content.decode()
    assert re.search(r'<span class="stat-value">2</span>\s*<span class="stat-label">repositories', home)
    assert "team-b/app" not in home and "secret" not in home and "other/app" not in home
    assert "team-b/app" in signed_in("erin").get("/ui/").content.decode()


def _repositories_stat(html: str) -> str:
    found = re.search(r'<span class="stat-value">(\d+)</span>\s*<span class="stat-label">repositories', html)
    assert found is not None, html[:500]
    return found.group(1)


def test_on_a_big_registry_a_viewer_sees_a_tally_of_what_they_may_read_not_the_registrys(
        seeded, big_registry) -> None:
    erin = signed_in("erin")
    assert _repositories_stat(erin.get("/ui/").content.decode()) == "5"  # the registry's tally, now counted
    alice = signed_in("alice")
    for _ in range(2):  # counted for the first view, read as last counted by the second
        assert _repositories_stat(alice.get("/ui/").content.decode()) == "2"
        assert "2 repositor" in alice.get("/ui/repositories/").content.decode()
    assert "held when its totals were last counted" in alice.get("/ui/").content.decode()
    tallied = Tally.objects.exclude(name="registry").values_list("data", flat=True)
    assert [data["repositories"] for data in tallied] == [2]  # one tally for alice's rules, not the registry's


def _main(html: str) -> str:
    """What the page says (the header differs by who is signed in)."""
    return html[html.index("<main"):html.index("</main>")]


@pytest.mark.parametrize("path", ["/ui/r/team-b/app/", "/ui/r/team-b/app/-/manifests/v1",
                                  "/ui/r/team-b/app/-/manifests/v1/delete", "/ui/r/team-b/app/-/delete"])
def test_a_repository_the_viewer_may_not_read_is_not_found_as_if_absent(seeded, path: str) -> None:
    alice = signed_in("alice")
    refused = alice.get(path)
    repositories.delete_repository("team-b/app")
    absent = signed_in("erin").get(path)
    assert refused.status_code == absent.status_code == 404
    assert _main(refused.content.decode()) == _main(absent.content.decode())


def test_delete_buttons_and_deletes_follow_the_rules(seeded) -> None:
    assert "Delete tag v1" not in signed_in("bob").get("/ui/r/team-a/app/").content.decode()  # write only
    admin_there = signed_in("bob").get("/ui/r/team-a/secret/keys/").content.decode()
    assert "Delete tag v1" in admin_there
    assert f'href="{reverse("ui:delete", args=["team-a/secret/keys", "v1"])}"' in admin_there
    refused = signed_in("bob").post("/ui/r/team-a/app/-/manifests/v1/delete")
    assert refused.status_code == 403
    assert "bob has role write on team-a/*; delete needs admin" in refused.content.decode()
    denied = audit_queries.events(audit_queries.Filters(outcome="denied"))
    assert [(e.actor, e.action, e.repository) for e in denied] == [("bob", "delete", "team-a/app")]
    done = signed_in("erin").post("/ui/r/team-a/app/-/manifests/v1/delete")
    assert done.status_code == 302
    assert [(e.actor, e.action, e.reference) for e in audit_queries.events(audit_queries.Filters(
        action="tag.delete"))] == [("erin", "tag.delete", "v1")]


def test_the_access_page_shows_each_user_their_namespaces(seeded) -> None:
    page = signed_in("alice").get("/ui/access/").content.decode()
    assert "Your groups: <code>team-a</code>" in page
    row = re.search(r"<code>team-a/\*</code>(.*?)</tr>", page, re.S)
    assert row is not None and "except <code>team-a/secret/*</code>: none" in row.group(1)
    assert "badge-role-write" in row.group(1) and "group team-a" in row.group(1)
    assert "anyone, without signing in" in page  # public/*
    assert "Who may use a repository" not in page  # admins only
    assert "admin</span> everywhere" in signed_in("erin").get("/ui/access/").content.decode()


def test_admins_see_who_may_use_a_repository_and_why(seeded) -> None:
    page = signed_in("erin").get("/ui/access/?repository=team-a/secret/keys").content.decode()
    assert "Governed by <code>team-a/secret/*</code>" in page
    rows = dict(re.findall(r'<td class="strong">(\w+)[^<]*(?:<span[^>]*>[^<]*</span>)?</td>\s*'
                           r'<td data-label="Role">(?:<span class="badge badge-role-(\w+)">|none)', page))
    assert rows["bob"] == "admin" and rows["erin"] == "admin" and rows["alice"] == "" and rows["carol"] == ""


@pytest.mark.parametrize("path", ["/ui/robots/", "/ui/audit/"])
def test_admin_pages_are_for_admins_only(seeded, path: str) -> None:
    refused = signed_in("alice").get(path)
    assert refused.status_code == 403 and "For admins only" in refused.content.decode()
    assert signed_in("erin").get(path).status_code == 200
    assert "Robots" not in signed_in("alice").get("/ui/").content.decode()


def test_an_admin_creates_disables_and_rotates_a_robot_in_the_ui(seeded) -> None:
    erin = signed_in("erin")
    created = erin.post("/ui/robots/", {"name": "team-a-ci", "repositories": "team-a/*", "role": "write",
                                        "ttl_days": "30", "description": "CI"})
    assert created.status_code == 200
    secret = re.search(r"svcr_[A-Za-z0-9_-]{43}", created.content.decode()).group(0)
    robot = Client(HTTP_AUTHORIZATION=basic("robot$team-a-ci", secret))
    assert robot.get("/v2/team-a/app/tags/list").status_code == 200
    assert erin.post("/ui/robots/action", {"name": "robot$team-a-ci", "verb": "disable"}).status_code == 302
    assert robot.get("/v2/team-a/app/tags/list").status_code == 401
    rotated = erin.post("/ui/robots/action", {"name": "robot$team-a-ci", "verb": "rotate"})
    new = re.search(r"svcr_[A-Za-z0-9_-]{43}", rotated.content.decode()).group(0)
    assert new != secret
    bad = erin.post("/ui/robots/", {"name": "x", "repositories": "", "role": "write", "ttl_days": "30"})
    assert bad.status_code == 400


def test_the_audit_page_lists_events_newest_first_with_filters(seeded) -> None:
    Client(HTTP_AUTHORIZATION=basic("carol", PASSWORDS["carol"])).post("/v2/team-a/app/blobs/uploads/")
    erin = signed_in("erin")
    page = erin.get("/ui/audit/?outcome=denied").content.decode()
    assert "carol has role read on team-a/*; push needs write" in page
    assert page.count('<td data-label="Action">') == 1
    everything = erin.get("/ui/audit/").content.decode()
    actions = re.findall(r'<td data-label="Action"><code>([^<]+)</code>', everything)
    assert actions[0] == "sign-in" and actions[1] == "push" and "blob.push" in actions  # newest first
    assert erin.get("/ui/audit/?actor=nobody").content.decode().count("No events match these filters") == 1
    assert "is not a time" in erin.get("/ui/audit/?since=yesterday-ish").content.decode()


def test_with_auth_off_the_access_page_says_everyone_may_do_everything(settings, auth_paths) -> None:
    client = Client()
    assert client.post("/ui/sign-in", {"username": "alice", "password": "wonderland"}).status_code == 302
    page = client.get("/ui/access/").content.decode()
    assert "Authentication is off: everyone may pull, push and delete everywhere." in page
    assert "Who may use a repository" in page  # anyone is an admin with auth off


@pytest.mark.parametrize("path, name", [("/ui/notifications/", "Notifications"), ("/ui/replication/", "Replication")])
def test_the_outbound_pages_are_for_admins_once_rules_exist(seeded, settings, path: str, name: str) -> None:
    settings.NOTIFICATIONS = [entry(url="https://ci.example/hook")]
    settings.REPLICATION = [policy_entry(url="https://dr.example")]
    assert signed_in("alice").get(path).status_code == 403
    assert f">{name}</a>" not in signed_in("alice").get("/ui/").content.decode()
    erin = signed_in("erin")
    assert erin.get(path).status_code == 200
    assert f'href="{path}"' in erin.get("/ui/").content.decode()


def test_audit_filters_that_are_not_text_are_refused_not_a_500(seeded) -> None:
    erin = signed_in("erin")
    # A NUL is the text boundary's to refuse (regsite.text), before the page asks the database.
    refused = erin.get("/ui/audit/?actor=al%00ice")
    assert refused.status_code == 400 and "NUL" in refused.json()["error"]
    # Bytes that are no UTF-8 (a lone surrogate's encoding) reach the page as replacement characters.
    page = erin.get("/ui/audit/?repository=%ED%A0%80&actor=%01")
    assert page.status_code == 200 and "No events" in page.content.decode()


def test_the_audit_page_pages_to_older_events(seeded) -> None:
    from audit import log

    for n in range(60):
        log.record("push", repository=f"paged/{n}")
    erin = signed_in("erin")
    first = erin.get("/ui/audit/?action=push&repository=").content.decode()
    older = re.search(r'href="/ui/audit/\?([^"]+)">Older', first).group(1).replace("&amp;", "&")
    assert "paged/59" in first and "paged/0<" not in first
    second = erin.get(f"/ui/audit/?{older}").content.decode()
    assert "paged/0<" in second and "paged/59" not in second
