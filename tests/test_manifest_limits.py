"""Bounded work per manifest: at most [registry] max_descriptors descriptors; no text that is not
Unicode (it broke every page showing the manifest); big manifests shown in pages in the UI, and
pages that render whatever was stored before these rules."""
from __future__ import annotations

import json

import pytest

from registry.models import Manifest, Repository
from tests.support.registry_client import (
    OCI_INDEX,
    OCI_MANIFEST,
    digest_of,
    error_code,
    push_blob,
    push_image,
    put_manifest,
)

pytestmark = pytest.mark.django_db
NAME = "team/app"


def _many_layers(client, count: int) -> bytes:
    config, layer = b"{}", b"the one layer"
    push_blob(client, NAME, config)
    push_blob(client, NAME, layer)
    return json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest_of(config), "size": 2},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest_of(layer),
                    "size": len(layer)}] * count,
    }).encode()


def test_it_refuses_a_manifest_listing_more_descriptors_than_the_limit(client, settings) -> None:
    settings.REGISTRY_MAX_DESCRIPTORS = 10
    response = put_manifest(client, NAME, "big", _many_layers(client, 10))
    assert response.status_code == 400 and error_code(response) == "MANIFEST_INVALID"
    assert "at most 10 descriptors" in response.json()["errors"][0]["message"]
    assert put_manifest(client, NAME, "fits", _many_layers(client, 9)).status_code == 201


def test_the_default_limit_refuses_one_blob_listed_thousands_of_times(client) -> None:
    response = put_manifest(client, NAME, "huge", _many_layers(client, 5_000))
    assert response.status_code == 400 and not Manifest.objects.filter(repository__name=NAME).exists()


@pytest.mark.parametrize("where", ["platform", "annotations"])
def test_it_refuses_text_that_is_not_unicode_anywhere(client, where) -> None:
    child_body, child = push_image(client, NAME, "amd64")
    entry = {"mediaType": OCI_MANIFEST, "digest": child, "size": len(child_body)}
    entry[where] = {"os": "\ud800", "architecture": "amd64"} if where == "platform" else {"k": "\udfff"}
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [entry]}).encode()
    assert b"\\ud" in index  # JSON allows the escape; UTF-8 cannot encode the character
    response = put_manifest(client, NAME, "multi", index, OCI_INDEX)
    assert response.status_code == 400 and "not valid Unicode" in response.json()["errors"][0]["message"]


def test_pages_render_a_manifest_stored_before_it_was_refused(client) -> None:
    child_body, child = push_image(client, NAME, "amd64")
    body = ('{"schemaVersion": 2, "mediaType": "%s", "manifests": [{"mediaType": "%s", "digest": "%s", '
            '"size": %d, "platform": {"os": "\\ud800", "architecture": "amd64"}}]}'
            % (OCI_INDEX, OCI_MANIFEST, child, len(child_body))).encode()
    stored = Manifest.objects.create(repository=Repository.objects.get(name=NAME), digest=digest_of(body),
                                     media_type=OCI_INDEX, size=len(body), body=body)
    for path in (f"/ui/r/{NAME}/-/manifests/{stored.digest}", f"/ui/r/{NAME}/"):
        response = client.get(path)
        assert response.status_code == 200, path
    assert "\\ud800/amd64" in client.get(f"/ui/r/{NAME}/-/manifests/{stored.digest}").content.decode()


def test_the_ui_shows_a_big_manifest_in_pages(client) -> None:
    response = put_manifest(client, NAME, "wide", _many_layers(client, 250))
    assert response.status_code == 201
    first = client.get(f"/ui/r/{NAME}/-/manifests/wide").content.decode()
    assert "1–100 of 250" in first and first.count("the one layer") == 0
    last = client.get(f"/ui/r/{NAME}/-/manifests/wide?page=3").content.decode()
    assert "201–250 of 250" in last


def test_the_ui_manifest_page_follows_its_keys(client, settings) -> None:
    settings.UI_MANIFEST_ENTRIES_PER_PAGE = 7
    settings.UI_MANIFEST_JSON_BYTES = 600
    body = _many_layers(client, 15)
    assert put_manifest(client, NAME, "wide", body).status_code == 201
    first = client.get(f"/ui/r/{NAME}/-/manifests/wide").content.decode()
    assert "1–7 of 15" in first
    assert f"({len(body)} bytes in all: the manifest" in first
    assert "15–15 of 15" in client.get(f"/ui/r/{NAME}/-/manifests/wide?page=3").content.decode()
    settings.UI_MANIFEST_JSON_BYTES = 256 * 1024
    assert "bytes in all" not in client.get(f"/ui/r/{NAME}/-/manifests/wide").content.decode()


def test_pages_render_an_image_config_holding_text_that_is_not_unicode(client) -> None:
    # A config is a blob: its bytes are whatever was pushed, so a lone surrogate cannot be refused.
    config = (b'{"architecture":"amd64","os":"linux","config":{"Labels":{"evil":"\\ud800"},"Env":["A=\\udfff"]},'
              b'"history":[{"created_by":"RUN \\ud83d"}]}')
    push_image(client, NAME, "v1", config=config)
    response = client.get(f"/ui/r/{NAME}/-/manifests/v1")
    assert response.status_code == 200
    page = response.content.decode()
    assert "\\ud800" in page and "A=\\udfff" in page and "RUN \\ud83d" in page
