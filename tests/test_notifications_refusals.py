"""A change the governance rules refuse writes no event, and one they let through writes its event
with the rule's bookkeeping: events and quota figures commit together or not at all."""
from __future__ import annotations

import pytest
from django.test import Client

from notifications.models import PendingEvent
from registry.policies import quotas
from registry.policies.rules import current
from registry.services.exceptions import ImmutableTag
from registry.services.repositories import delete_repository
from tests.support.notify import entry, queued, summary
from tests.support.registry_client import digest_of, make_manifest, post_upload, push_blob, push_image, put_manifest

pytestmark = pytest.mark.django_db
LIMIT = 10_000


@pytest.fixture(autouse=True)
def rules(settings) -> None:
    settings.NOTIFICATIONS = [entry()]
    settings.REGISTRY_IMMUTABLE = [{"name": "", "repositories": "prod/*", "tags": ["^v.*"]}]
    settings.REGISTRY_QUOTAS = [{"name": "team", "repositories": "team/*", "max_bytes": f"{LIMIT}B"}]


def test_a_push_that_would_move_an_immutable_tag_writes_no_event(client: Client) -> None:
    _body, digest = push_image(client, "prod/app", "v1")
    push_blob(client, "prod/app", b"{}")
    other = make_manifest(b"{}", [])
    PendingEvent.objects.all().delete()

    assert put_manifest(client, "prod/app", "v1", other).status_code == 403
    assert client.delete("/v2/prod/app/manifests/v1").status_code == 403
    assert client.delete(f"/v2/prod/app/manifests/{digest}").status_code == 403
    with pytest.raises(ImmutableTag):
        delete_repository("prod/app")

    assert queued() == []
    # Pushing the same digest again is accepted, and is a push as any other.
    assert put_manifest(client, "prod/app", "v1", client.get("/v2/prod/app/manifests/v1").content).status_code == 201
    assert summary(queued()) == [("push", "prod/app", "v1")]


def test_an_upload_over_the_quota_writes_no_event_and_an_unlink_gives_back_with_its_event(client: Client) -> None:
    own = push_blob(client, "team/app", b"a" * 9000)
    PendingEvent.objects.all().delete()
    data = b"b" * 1001

    assert post_upload(client, "team/app", f"?digest={digest_of(data)}", data).status_code == 403
    assert queued() == []

    assert client.delete(f"/v2/team/app/blobs/{own}").status_code == 202
    assert summary(queued()) == [("delete", "team/app", own)]
    assert quotas.usage(current().quotas[0]) == 0


def test_an_unlink_whose_event_cannot_be_written_keeps_the_link_and_the_quota_figure(client: Client,
                                                                                    monkeypatch) -> None:
    own = push_blob(client, "team/app", b"a" * 4000)

    def fail(*_args: object) -> None:
        raise RuntimeError("the outbox write fails")

    monkeypatch.setattr("notifications.queries.add", fail)
    assert client.delete(f"/v2/team/app/blobs/{own}").status_code == 500
    assert client.head(f"/v2/team/app/blobs/{own}").status_code == 200
    assert quotas.usage(current().quotas[0]) == 4000
