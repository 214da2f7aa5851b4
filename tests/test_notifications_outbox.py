"""Events written to the outbox: distribution's fields, one per change, in the change's transaction,
only for the endpoints whose events and repositories want them."""
from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from django.test import Client

from notifications import queries as notification_queries
from notifications.models import PendingEvent
from registry.models import Manifest
from registry.services import repositories
from regsite import config
from tests.support.auth import auth_on, auth_paths, basic, bearer  # noqa: F401
from tests.support.notify import entry, queued, summary
from tests.support.registry_client import (
    OCI_MANIFEST,
    digest_of,
    make_manifest,
    post_upload,
    push_blob,
    push_image,
    put_manifest,
)
from tokens import services as tokens

pytestmark = pytest.mark.django_db
CONFIG = b'{"architecture":"amd64","os":"linux","ref":"v1"}'
LAYER = b"layer-of-v1"


@pytest.fixture
def endpoints(settings):
    settings.SERVER_EXTERNAL_URL = "https://registry.example.internal"  # what target.url names

    def configure(*entries: dict) -> None:
        settings.NOTIFICATIONS = list(entries)

    configure(entry())
    return configure


def test_a_push_writes_its_blobs_and_its_tagged_manifest_with_distributions_fields(client: Client, endpoints) -> None:
    body, digest = push_image(client, "team/app", "v1", layers=[LAYER], config=CONFIG)
    events = queued()
    assert summary(events) == [("push", "team/app", digest_of(CONFIG)), ("push", "team/app", digest_of(LAYER)),
                               ("push", "team/app", "v1")]
    manifest = events[-1]
    assert manifest["target"] == {
        "mediaType": OCI_MANIFEST, "digest": digest, "size": len(body), "length": len(body),
        "repository": "team/app", "tag": "v1", "url": f"https://registry.example.internal/v2/team/app/manifests/{digest}",
    }
    layer = events[1]
    assert layer["target"] == {
        "mediaType": "application/octet-stream", "digest": digest_of(LAYER), "size": len(LAYER),
        "length": len(LAYER), "repository": "team/app", "url": f"https://registry.example.internal/v2/team/app/blobs/{digest_of(LAYER)}",
    }
    assert set(manifest) == {"id", "timestamp", "action", "target", "request", "actor", "source"}
    uuid.UUID(manifest["id"])
    assert len({event["id"] for event in events}) == 3
    assert datetime.fromisoformat(manifest["timestamp"].replace("Z", "+00:00")).tzinfo is not None
    assert manifest["request"]["method"] == "PUT" and manifest["request"]["host"] == "registry.example.internal"
    assert manifest["actor"] == {}  # authentication is off: nobody is named
    assert manifest["source"]["addr"].endswith(":4000") and manifest["source"]["instanceID"]


def test_the_request_record_carries_the_request_id_address_and_user_agent(client: Client, endpoints) -> None:
    push_blob(client, "team/app", LAYER)
    body = make_manifest(b"{}", [])
    push_blob(client, "team/app", b"{}")
    response = client.generic("PUT", "/v2/team/app/manifests/v1", body, OCI_MANIFEST,
                              headers={"X-Request-ID": "req-42", "User-Agent": "skopeo/1.13"}, REMOTE_PORT="50123")
    assert response.status_code == 201
    assert queued()[-1]["request"] == {"id": "req-42", "addr": "127.0.0.1:50123", "host": "registry.example.internal",
                                       "method": "PUT", "useragent": "skopeo/1.13"}


def test_behind_a_trusted_proxy_the_address_is_the_forwarded_client_without_a_port(client: Client, endpoints,
                                                                                   settings) -> None:
    settings.SERVER_TRUSTED_PROXIES = config.proxy_networks(["10.0.0.2"])
    headers = {"X-Forwarded-For": "198.51.100.1, 203.0.113.9"}
    assert post_upload(client, "team/app", f"?digest={digest_of(b'a')}", b"a", headers=headers,
                       REMOTE_ADDR="10.0.0.2", REMOTE_PORT="40000").status_code == 201
    # The right-most hop that is not a trusted proxy, as the request log and the login throttle have it.
    assert queued()[-1]["request"]["addr"] == "203.0.113.9"
    # From anyone else X-Forwarded-For proves nothing: the peer, with its port.
    assert post_upload(client, "team/app", f"?digest={digest_of(b'b')}", b"b", headers=headers,
                       REMOTE_ADDR="192.0.2.7", REMOTE_PORT="40001").status_code == 201
    assert queued()[-1]["request"]["addr"] == "192.0.2.7:40001"


def test_the_actor_is_the_user_or_the_tokens_hash_prefix_never_the_secret(client: Client, endpoints,
                                                                          auth_on) -> None:
    response = post_upload(client, "team/app", f"?digest={digest_of(b'by alice')}", b"by alice",
                           headers={"Authorization": basic("alice", "wonderland")})
    assert response.status_code == 201
    token = tokens.create_token("bob", role="write")
    response = post_upload(client, "team/app", f"?digest={digest_of(b'by token')}", b"by token",
                           headers={"Authorization": bearer(token.token)})
    assert response.status_code == 201
    alice, bob = queued()
    assert alice["actor"] == {"name": "alice"}
    assert bob["actor"] == {"name": token.hash_prefix}
    assert token.token not in str(queued())


def test_a_signed_tokens_actor_is_its_user_or_the_api_tokens_hash_prefix(client: Client, endpoints,
                                                                          auth_on) -> None:
    def signed(authorization: str) -> str:
        response = client.get("/auth/token", {"scope": "repository:team/app:pull,push"},
                              HTTP_AUTHORIZATION=authorization)
        assert response.status_code == 200, response.content
        return response.json()["token"]

    api_token = tokens.create_token("bob", role="write")
    for authorization in (basic("alice", "wonderland"), basic("token", api_token.token)):
        content = authorization.encode()
        response = post_upload(client, "team/app", f"?digest={digest_of(content)}", content,
                               headers={"Authorization": bearer(signed(authorization))})
        assert response.status_code == 201, response.content
    alice, bob = queued()
    assert alice["actor"] == {"name": "alice"}
    assert bob["actor"] == {"name": api_token.hash_prefix}
    assert api_token.token not in str(queued())


def test_a_push_with_several_tags_writes_one_event_per_tag(client: Client, endpoints) -> None:
    push_blob(client, "team/app", b"{}")
    body = make_manifest(b"{}", [])
    assert put_manifest(client, "team/app", "v1", body, query="?tag=v1.0&tag=latest").status_code == 201
    assert [e["target"]["tag"] for e in queued() if e["target"].get("tag")] == ["v1", "v1.0", "latest"]


def test_a_push_by_digest_has_no_tag(client: Client, endpoints) -> None:
    push_blob(client, "team/app", b"{}")
    body = make_manifest(b"{}", [])
    assert put_manifest(client, "team/app", digest_of(body), body).status_code == 201
    assert "tag" not in queued()[-1]["target"] and queued()[-1]["target"]["digest"] == digest_of(body)


def test_deletes_of_a_tag_a_manifest_a_blob_and_a_repository_write_events(client: Client, endpoints) -> None:
    _body, digest = push_image(client, "team/app", "v1", layers=[LAYER], config=CONFIG)
    PendingEvent.objects.all().delete()
    assert client.delete("/v2/team/app/manifests/v1").status_code == 202
    assert client.delete(f"/v2/team/app/manifests/{digest}").status_code == 202
    assert client.delete(f"/v2/team/app/blobs/{digest_of(LAYER)}").status_code == 202
    repositories.delete_repository("team/app")
    events = queued()
    assert [(e["action"], e["target"]) for e in events] == [
        ("delete", {"repository": "team/app", "tag": "v1"}),
        ("delete", {"repository": "team/app", "digest": digest}),
        ("delete", {"repository": "team/app", "digest": digest_of(LAYER)}),
        ("delete", {"repository": "team/app"}),
    ]
    assert events[0]["request"]["method"] == "DELETE"


def test_a_delete_of_nothing_writes_nothing(client: Client, endpoints) -> None:
    push_image(client, "team/app", "v1")
    PendingEvent.objects.all().delete()
    assert client.delete("/v2/team/app/manifests/v9").status_code == 404
    assert client.delete(f"/v2/team/app/blobs/{digest_of(b'never')}").status_code == 404
    assert queued() == []


def test_a_mount_is_sent_as_distribution_sends_it_to_push_subscribers(client: Client, endpoints) -> None:
    digest = push_blob(client, "team/source", LAYER)
    PendingEvent.objects.all().delete()
    assert post_upload(client, "team/target", f"?mount={digest}&from=team/source").status_code == 201
    (mounted,) = queued()
    assert mounted["action"] == "mount"
    assert mounted["target"]["repository"] == "team/target" and mounted["target"]["fromRepository"] == "team/source"


def test_only_the_listed_events_and_matching_repositories_are_queued(client: Client, endpoints) -> None:
    endpoints(entry("team", repositories="team/*"), entry("deletes", events=["delete"]),
              entry("all", repositories="**"))
    push_blob(client, "team/app", b"a")
    push_blob(client, "team/a/b", b"b")
    push_blob(client, "other/app", b"c")
    assert [e["target"]["repository"] for e in queued("team")] == ["team/app"]
    assert queued("deletes") == []
    assert [e["target"]["repository"] for e in queued("all")] == ["team/app", "team/a/b", "other/app"]
    # One event, one id, whichever endpoints it goes to.
    assert queued("team")[0]["id"] == queued("all")[0]["id"]


def test_pulls_are_queued_only_when_listed(client: Client, endpoints) -> None:
    _body, digest = push_image(client, "team/app", "v1", layers=[LAYER], config=CONFIG)
    PendingEvent.objects.all().delete()
    assert client.get("/v2/team/app/manifests/v1").status_code == 200
    assert queued() == []
    endpoints(entry(events=["pull"]))
    assert client.get("/v2/team/app/manifests/v1").status_code == 200
    assert client.head("/v2/team/app/manifests/v1").status_code == 200
    assert client.get(f"/v2/team/app/manifests/{digest}").status_code == 200
    assert client.get(f"/v2/team/app/blobs/{digest_of(LAYER)}").status_code == 200
    assert client.head(f"/v2/team/app/blobs/{digest_of(LAYER)}").status_code == 200
    # The pull by digest is the same image within a minute: one event (tests/test_notifications_bounded.py).
    assert summary(queued()) == [("pull", "team/app", "v1"), ("pull", "team/app", digest_of(LAYER))]
    assert queued()[0]["request"]["method"] == "GET"


def test_nothing_is_written_without_endpoints(client: Client, settings) -> None:
    settings.NOTIFICATIONS = []
    push_image(client, "team/app", "v1")
    client.get("/v2/team/app/manifests/v1")
    client.delete("/v2/team/app/manifests/v1")
    assert PendingEvent.objects.count() == 0


def test_an_event_and_its_change_commit_together_or_not_at_all(client: Client, endpoints, monkeypatch) -> None:
    push_blob(client, "team/app", b"{}")
    body = make_manifest(b"{}", [])
    real_add = notification_queries.add

    def add_then_crash(*args, **kwargs):
        real_add(*args, **kwargs)
        raise RuntimeError("the process fails after writing the event, before the commit")

    monkeypatch.setattr(notification_queries, "add", add_then_crash)
    before = len(queued())
    assert put_manifest(client, "team/app", "v1", body).status_code == 500
    assert not Manifest.objects.exists() and len(queued()) == before

    monkeypatch.setattr(notification_queries, "add", real_add)
    assert put_manifest(client, "team/app", "v1", body).status_code == 201
    monkeypatch.setattr(notification_queries, "add", add_then_crash)
    assert client.delete("/v2/team/app/manifests/v1").status_code == 500
    assert client.get("/v2/team/app/manifests/v1").status_code == 200  # the tag is still there
    assert queued()[-1]["action"] == "push"
