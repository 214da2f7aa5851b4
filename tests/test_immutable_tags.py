"""[[immutable]] tags: once pushed they never point elsewhere and are never deleted (403 DENIED
naming the rule); pushing the same digest again succeeds; other tags and repositories are free."""
from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from registry.models import Repository, Tag
from registry.services.exceptions import ImmutableTag
from registry.services.repositories import delete_repository
from tests.support.registry_client import digest_of, make_manifest, push_blob, push_image, put_manifest

pytestmark = pytest.mark.django_db

RULE = [{"name": "", "repositories": "prod/*", "tags": ["^v.*", "^stable$"]}]


@pytest.fixture(autouse=True)
def immutable(settings) -> None:
    settings.REGISTRY_IMMUTABLE = RULE


def _denied(response) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 403, response.content
    error = json.loads(response.content)["errors"][0]
    assert error["code"] == "DENIED"
    return error["message"]


def _target(client: Client, name: str, tag: str) -> str:
    return client.get(f"/v2/{name}/manifests/{tag}")["Docker-Content-Digest"]


def test_a_push_that_would_move_an_immutable_tag_is_denied_naming_the_rule(client) -> None:
    _, first = push_image(client, "prod/app", "v1", layers=[b"one"])
    push_blob(client, "prod/app", b"two")
    push_blob(client, "prod/app", b"{}")
    other = make_manifest(b"{}", [b"two"])

    message = _denied(put_manifest(client, "prod/app", "v1", other))

    assert message.startswith("tag 'v1' is immutable under [[immutable]] #1 \"prod/*\" (tags ^v.*, ^stable$) "
                              f"in prod/app: it points to {first}")
    assert _target(client, "prod/app", "v1") == first
    # The refused manifest was not stored either.
    assert client.get(f"/v2/prod/app/manifests/{digest_of(other)}").status_code == 404


def test_pushing_the_same_digest_again_succeeds(client) -> None:
    body, digest = push_image(client, "prod/app", "v1", layers=[b"one"])
    assert put_manifest(client, "prod/app", "v1", body).status_code == 201
    assert put_manifest(client, "prod/app", digest, body, query="?tag=v1&tag=stable").status_code == 201
    assert _target(client, "prod/app", "stable") == digest


def test_extra_tags_of_a_push_are_guarded_too(client) -> None:
    body, digest = push_image(client, "prod/app", "stable", layers=[b"one"])
    _, other = push_image(client, "prod/app", "candidate", layers=[b"two"])
    other_body = client.get(f"/v2/prod/app/manifests/{other}").content
    _denied(put_manifest(client, "prod/app", other, other_body, query="?tag=latest&tag=stable"))
    assert _target(client, "prod/app", "stable") == digest
    assert _target(client, "prod/app", "candidate") == other  # nothing of the refused push applied
    assert not Tag.objects.filter(name="latest").exists()


def test_other_tags_and_other_repositories_move_freely(client) -> None:
    push_image(client, "prod/app", "latest", layers=[b"one"])
    _, second = push_image(client, "prod/app", "latest", layers=[b"two"])
    assert _target(client, "prod/app", "latest") == second
    push_image(client, "dev/app", "v1", layers=[b"one"])
    _, moved = push_image(client, "dev/app", "v1", layers=[b"two"])
    assert _target(client, "dev/app", "v1") == moved
    assert client.delete("/v2/prod/app/manifests/latest").status_code == 202


def test_an_immutable_tag_and_a_manifest_carrying_one_are_never_deleted(client) -> None:
    _, digest = push_image(client, "prod/app", "v1.2.3", layers=[b"one"])
    assert "it is never deleted" in _denied(client.delete("/v2/prod/app/manifests/v1.2.3"))
    message = _denied(client.delete(f"/v2/prod/app/manifests/{digest}"))
    assert message == (f"manifest {digest} carries tag 'v1.2.3' in prod/app, immutable under [[immutable]] #1 "
                       "\"prod/*\" (tags ^v.*, ^stable$): it is never deleted")
    assert _target(client, "prod/app", "v1.2.3") == digest


def test_a_repository_holding_immutable_tags_is_not_deleted(client) -> None:
    push_image(client, "prod/app", "v1", layers=[b"one"])
    with pytest.raises(ImmutableTag, match="holds immutable tags \\(v1\\)"):
        delete_repository("prod/app")
    with pytest.raises(CommandError, match="holds immutable tags"):
        call_command("deleterepo", "prod/app", "--no-input")
    assert Repository.objects.filter(name="prod/app").exists()


def test_lifting_the_rule_in_the_configuration_lets_the_tag_move(client, settings) -> None:
    push_image(client, "prod/app", "v1", layers=[b"one"])
    settings.REGISTRY_IMMUTABLE = []
    _, moved = push_image(client, "prod/app", "v1", layers=[b"two"])
    assert _target(client, "prod/app", "v1") == moved


@pytest.mark.django_db(transaction=True)
def test_of_pushes_racing_to_create_an_immutable_tag_exactly_one_wins() -> None:
    setup = Client()
    push_blob(setup, "prod/app", b"{}")
    bodies = []
    for i in range(8):
        bodies.append(make_manifest(b"{}", [], annotations={"n": str(i)}))
    barrier = threading.Barrier(len(bodies))

    def push(i: int) -> int:
        try:
            barrier.wait(timeout=10)
            return put_manifest(Client(), "prod/app", "v1", bodies[i]).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(len(bodies)) as pool:
        statuses = list(pool.map(push, range(len(bodies))))
    assert sorted(statuses) == [201] + [403] * (len(bodies) - 1)
    winner = bodies[statuses.index(201)]
    assert _target(setup, "prod/app", "v1") == digest_of(winner)
