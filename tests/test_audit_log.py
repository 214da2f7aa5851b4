"""The audit log: every state change and every refusal once, in order, as a row and a JSON log line;
`manage.py audit` with its filters; pruning past [audit] retention_days without a scheduler."""
from __future__ import annotations

import io
import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from audit import log as audit
from audit import queries
from tests.support.access import PASSWORDS, teams  # noqa: F401  (fixture)
from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tests.support.registry_client import push_image

pytestmark = pytest.mark.django_db


def as_user(name: str, password: str | None = None) -> Client:
    return Client(HTTP_AUTHORIZATION=basic(name, password or PASSWORDS[name]))


def _api(path: str, who: str, **body: Any) -> Any:
    return Client().post(path, json.dumps({"username": who, "password": PASSWORDS[who], **body}),
                         content_type="application/json")


def audit_json(*args: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    call_command("audit", "--json", *args, stdout=out)
    return json.loads(out.getvalue())["events"]


def _steps(events: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    return [(e["actor"] + (f"/{e['token']}" if e["token"] else ""), e["action"], e["repository"] or e["reference"],
             e["outcome"]) for e in events]


def test_every_step_is_recorded_once_in_order(teams) -> None:
    alice = as_user("alice")
    assert alice.get("/v2/").status_code == 200
    _, first = push_image(alice, "team-a/app", "v1")
    _, second = push_image(alice, "team-a/app", "v1", layers=[b"another layer"])
    assert as_user("carol").post("/v2/team-a/app/blobs/uploads/").status_code == 403
    assert alice.get("/v2/team-b/app/manifests/v1").status_code == 404
    assert as_user("bob").delete("/v2/team-a/app/manifests/v1").status_code == 403
    assert as_user("alice", "not-her-password").get("/v2/team-a/app/tags/list").status_code == 401
    token = _api("/api/tokens", "alice", role="write", repositories=["team-a/app"]).json()
    _api("/api/tokens/revoke", "alice", hash_prefix=token["hash_prefix"])
    _api("/api/robots", "erin", name="ci", repositories=["team-a/*"])
    _api("/api/robots/disable", "erin", name="ci")
    assert as_user("erin").delete("/v2/team-a/app/manifests/v1").status_code == 202

    assert _steps(audit_json()) == [
        ("alice", "sign-in", "", "success"),
        ("alice", "blob.push", "team-a/app", "success"),
        ("alice", "blob.push", "team-a/app", "success"),
        ("alice", "push", "team-a/app", "success"),
        ("alice", "blob.push", "team-a/app", "success"),
        ("alice", "blob.push", "team-a/app", "success"),
        ("alice", "push", "team-a/app", "success"),
        ("alice", "tag.move", "team-a/app", "success"),
        ("carol", "push", "team-a/app", "denied"),
        ("alice", "pull", "team-b/app", "denied"),
        ("bob", "delete", "team-a/app", "denied"),
        ("alice", "sign-in", "", "failed"),
        ("alice", "token.create", token["hash_prefix"], "success"),
        ("alice", "token.revoke", token["hash_prefix"], "success"),
        ("erin", "robot.create", "robot$ci", "success"),
        ("erin", "robot.disable", "robot$ci", "success"),
        ("erin", "tag.delete", "team-a/app", "success"),
    ]
    events = audit_json()
    move = events[7]
    assert (move["reference"], move["digest"], move["detail"]) == ("v1", second, f"from {first}")
    assert events[8]["detail"] == "carol has role read on team-a/*; push needs write"
    assert events[9]["detail"] == ("alice has role none on team-b/*; pull needs read (answered as if the "
                                   "repository did not exist)")
    assert events[11]["detail"] == "basic credentials on GET /v2/team-a/app/tags/list"
    assert all(event["address"] == "127.0.0.1" and event["request_id"] for event in events)


def test_a_token_is_named_by_its_owner_and_hash_prefix(teams) -> None:
    token = _api("/api/tokens", "bob", role="write").json()
    push_image(Client(HTTP_AUTHORIZATION=basic("token", token["token"])), "team-a/app", "v1")
    pushed = audit_json("--action", "push")
    assert [(e["actor"], e["actor_kind"], e["token"]) for e in pushed] == [("bob", "token", token["hash_prefix"])]
    assert audit_json("--actor", token["hash_prefix"]) == audit_json("--actor", "bob")[1:]  # not the creation


def test_each_event_is_also_one_json_log_line(teams, caplog) -> None:
    caplog.set_level(logging.INFO, logger="audit")
    as_user("carol").post("/v2/team-a/app/blobs/uploads/")
    records = [r for r in caplog.records if r.name == "audit"]
    assert len(records) == 1
    assert records[0].getMessage() == "audit: carol push team-a/app denied"
    fields = records[0].audit  # type: ignore[attr-defined]
    assert (fields["actor"], fields["action"], fields["repository"], fields["outcome"]) == \
        ("carol", "push", "team-a/app", "denied")


def test_the_command_filters_by_time_actor_repository_action_and_outcome(teams) -> None:
    push_image(as_user("alice"), "team-a/app", "v1")
    push_image(as_user("carol"), "team-b/app", "v1")
    as_user("dave").post("/v2/team-b/app/blobs/uploads/")
    assert {e["actor"] for e in audit_json("--actor", "carol")} == {"carol"}
    assert {e["repository"] for e in audit_json("--repository", "team-b/")} == {"team-b/app"}
    assert {e["repository"] for e in audit_json("--repository", "team-a/app")} == {"team-a/app"}
    assert [e["actor"] for e in audit_json("--outcome", "denied")] == ["dave"]
    assert len(audit_json("--action", "push", "--outcome", "success")) == 2
    assert len(audit_json("--since", "1h")) == len(audit_json()) > 0
    assert audit_json("--since", "2999-01-01") == []
    assert audit_json("--until", "2000-01-01T00:00:00Z") == []
    table = io.StringIO()
    call_command("audit", "--actor", "dave", stdout=table)
    lines = table.getvalue().splitlines()
    assert lines[0].split() == ["TIME", "ACTOR", "ADDRESS", "ACTION", "REPOSITORY", "REFERENCE", "OUTCOME", "DETAIL"]
    assert "dave" in lines[1] and "denied" in lines[1] and "dave has role none on team-b/*" in lines[1]


def test_events_past_retention_are_pruned_as_events_are_written(teams, settings, monkeypatch) -> None:
    settings.AUDIT_RETENTION_DAYS = 30
    now = timezone.now()
    for days in (45, 31, 29):
        audit.record("push", repository=f"old/{days}", at=now - timedelta(days=days))
    monkeypatch.setattr(audit, "_next_prune", 0.0)  # an hour has passed since this process last pruned
    audit.record("push", repository="new/app")
    assert [e["repository"] for e in audit_json()] == ["old/29", "new/app"]
    audit.record("push", repository="old/40", at=now - timedelta(days=40))
    audit.record("push", repository="newer/app")  # not due again within the hour
    assert len(audit_json()) == 4


def test_the_command_prunes_on_demand(teams, settings) -> None:
    settings.AUDIT_RETENTION_DAYS = 7
    audit.record("push", repository="old/app", at=timezone.now() - timedelta(days=8))
    audit.record("push", repository="new/app")
    out = io.StringIO()
    call_command("audit", "--prune", stdout=out)
    assert out.getvalue().strip() == "removed 1 events older than 7 days"
    assert [e["repository"] for e in audit_json()] == ["new/app"]


def test_an_event_the_database_cannot_take_never_fails_the_request(teams, monkeypatch, caplog) -> None:
    def broken(row: queries.EventRow) -> int:
        raise RuntimeError("disk full")

    monkeypatch.setattr(queries, "add", broken)
    response = as_user("carol").post("/v2/team-a/app/blobs/uploads/")
    assert response.status_code == 403
    assert "audit: the event could not be written to the database: disk full" in caplog.text


def test_a_command_is_the_actor_outside_requests(teams) -> None:
    call_command("createtoken", "--username", "alice", stdout=io.StringIO(), stderr=io.StringIO())
    call_command("createrobot", "ci", "--repository", "team-a/*", stdout=io.StringIO(), stderr=io.StringIO())
    assert [(e["actor"], e["actor_kind"], e["action"]) for e in audit_json()] == [
        ("manage.py", "system", "token.create"), ("manage.py", "system", "robot.create")]


def test_text_no_database_takes_is_written_out(teams) -> None:
    # A claimed username or a detail may hold a NUL or a lone surrogate (PostgreSQL takes neither).
    audit.record("sign-in", repository="al\x00ice", detail="bad \udc80 text", outcome=audit.Outcome.FAILED)
    [event] = audit_json()
    assert (event["repository"], event["detail"]) == ("al\\x00ice", "bad \\udc80 text")


@pytest.mark.parametrize("option", ["--actor", "--repository", "--action"])
def test_the_command_refuses_a_filter_no_database_takes(teams, option: str) -> None:
    # An argument holds a lone surrogate when the terminal sent bytes that are no UTF-8 ("\xff").
    with pytest.raises(CommandError, match=f"^{option}: is not valid Unicode text"):
        call_command("audit", option, "al\udcffice", stdout=io.StringIO())
