"""An immutable tag protects what its image needs, not only the tag: deleting a layer or config blob
link, or by digest a child manifest of an immutable index, is 403 DENIED naming the rule, and the
image still pulls. The check is a query, whatever the size of the repository."""
from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.support.registry_client import (
    OCI_INDEX,
    body_of,
    digest_of,
    make_index,
    make_manifest,
    push_blob,
    push_image,
    push_manifest,
)

pytestmark = pytest.mark.django_db

RULE = [{"name": "releases", "repositories": "prod/*", "tags": ["^v.*"]}]
CONFIG = b'{"architecture":"amd64","os":"linux","ref":"v1"}'


@pytest.fixture(autouse=True)
def immutable(settings) -> None:
    settings.REGISTRY_IMMUTABLE = RULE


def _denied(response) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 403, response.content
    error = json.loads(response.content)["errors"][0]
    assert error["code"] == "DENIED"
    return error["message"]


def _pulls(client: Client, name: str, tag: str) -> bool:
    manifest = json.loads(client.get(f"/v2/{name}/manifests/{tag}").content)
    blobs = [manifest["config"], *manifest["layers"]] if "config" in manifest else []
    children = [entry["digest"] for entry in manifest.get("manifests", [])]
    return (all(client.get(f"/v2/{name}/blobs/{d['digest']}").status_code == 200 for d in blobs)
            and all(client.get(f"/v2/{name}/manifests/{c}").status_code == 200 for c in children))


def _index(client: Client, name: str, tag: str) -> tuple[str, str]:
    """An index tagged ``tag`` over two platform images; returns (a child's digest, a child's layer)."""
    children = []
    for arch in ("amd64", "arm64"):
        config = f'{{"architecture":"{arch}","os":"linux"}}'.encode()
        layer = f"{arch} layer".encode()
        push_blob(client, name, config)
        push_blob(client, name, layer)
        children.append(make_manifest(config, [layer]))
        push_manifest(client, name, digest_of(children[-1]), children[-1])
    push_manifest(client, name, tag, make_index(children), OCI_INDEX)
    return digest_of(children[0]), digest_of(b"amd64 layer")


def test_a_layer_of_an_immutable_tags_image_is_not_deleted(client) -> None:
    push_image(client, "prod/app", "v1", layers=[b"base layer", b"app layer"])

    message = _denied(client.delete(f"/v2/prod/app/blobs/{digest_of(b'app layer')}"))

    assert message == (f"blob {digest_of(b'app layer')} is needed by tag 'v1' of prod/app, immutable under "
                       '[[immutable]] #1 "releases" (tags ^v.*): it is never deleted')
    assert _pulls(client, "prod/app", "v1")


def test_the_config_of_an_immutable_tags_image_is_not_deleted(client) -> None:
    push_image(client, "prod/app", "v1", layers=[b"layer"])
    _denied(client.delete(f"/v2/prod/app/blobs/{digest_of(CONFIG)}"))
    assert _pulls(client, "prod/app", "v1")


def test_a_child_of_an_immutable_index_and_its_layers_are_not_deleted(client) -> None:
    child, layer = _index(client, "prod/app", "v2")

    message = _denied(client.delete(f"/v2/prod/app/manifests/{child}"))
    _denied(client.delete(f"/v2/prod/app/blobs/{layer}"))

    assert message == (f"manifest {child} is needed by tag 'v2' of prod/app, immutable under [[immutable]] #1 "
                       '"releases" (tags ^v.*): it is never deleted')
    assert _pulls(client, "prod/app", "v2")


def test_what_only_mutable_tags_need_is_deleted_as_before(client) -> None:
    push_image(client, "prod/app", "v1", layers=[b"shared"])
    push_image(client, "prod/app", "latest", layers=[b"shared", b"own"])
    child, layer = _index(client, "prod/app", "nightly")

    assert client.delete(f"/v2/prod/app/blobs/{digest_of(b'own')}").status_code == 202
    assert client.delete(f"/v2/prod/app/manifests/{child}").status_code == 202
    assert client.delete(f"/v2/prod/app/blobs/{layer}").status_code == 202
    _denied(client.delete(f"/v2/prod/app/blobs/{digest_of(b'shared')}"))  # v1 needs it too


def test_another_repository_or_no_rule_deletes_freely(client, settings) -> None:
    push_image(client, "prod/app", "v1", layers=[b"layer"])
    push_blob(client, "dev/app", b"layer")
    assert client.delete(f"/v2/dev/app/blobs/{digest_of(b'layer')}").status_code == 202
    settings.REGISTRY_IMMUTABLE = []
    assert client.delete(f"/v2/prod/app/blobs/{digest_of(b'layer')}").status_code == 202


def test_the_check_costs_the_same_queries_however_many_images_the_repository_holds(client) -> None:
    def queries_of_a_refused_delete(layer: bytes) -> int:
        with CaptureQueriesContext(connection) as captured:
            _denied(client.delete(f"/v2/prod/app/blobs/{digest_of(layer)}"))
        return len(captured)

    push_image(client, "prod/app", "v0", layers=[b"first"])
    few = queries_of_a_refused_delete(b"first")
    for i in range(1, 40):
        push_image(client, "prod/app", f"v{i}", layers=[b"first", f"layer {i}".encode()])
    assert queries_of_a_refused_delete(b"first") == few
    assert body_of(client.get(f"/v2/prod/app/blobs/{digest_of(b'first')}")) == b"first"
