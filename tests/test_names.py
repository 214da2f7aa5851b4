"""Repository names: the OCI grammar, nesting, the length limit, and no way out of the storage root."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.registry_client import (
    digest_of,
    error_code,
    make_manifest,
    post_upload,
    push_image,
    put_manifest,
)

pytestmark = pytest.mark.django_db

DATA = b"name test"
VALID = ["a", "0", "a/b/c/d/e", "team/app/api", "a.b", "a_b", "a__b", "a-b", "a---b", "x1.y2_z3__w4-v5", "a" * 255,
         "/".join(["abc"] * 64)]
INVALID = ["A", "Team/app", "a_", "_a", "-a", "a-", ".a", "a.", "a..b", "a___b", "a._b", "a//b", "a/",
           "a b", "a%20b", "caf%C3%A9", "a" * 256, "/".join(["abc"] * 63) + "/abcd"]


def _post_blob(client, name: str):
    return post_upload(client, name, f"?digest={digest_of(DATA)}", DATA)


@pytest.mark.parametrize("name", VALID)
def test_it_accepts_a_name_of_the_grammar(client, name) -> None:
    response = _post_blob(client, name)
    assert response.status_code == 201, (name, response.content)
    assert client.get(response["Location"]).status_code == 200


@pytest.mark.parametrize("name", INVALID)
def test_it_refuses_a_name_outside_the_grammar_with_name_invalid(client, name) -> None:
    response = _post_blob(client, name)
    assert response.status_code == 400, name
    assert error_code(response) == "NAME_INVALID"


def test_it_serves_a_deeply_nested_repository(client) -> None:
    body, digest = push_image(client, "org/team/app/api", "v1")
    assert client.get("/v2/org/team/app/api/manifests/v1").content == body
    assert client.get("/v2/org/team/app/api/tags/list").json() == {"name": "org/team/app/api", "tags": ["v1"]}
    assert client.get("/v2/_catalog").json()["repositories"] == ["org/team/app/api"]


def test_it_keeps_a_parent_and_a_nested_repository_apart(client) -> None:
    push_image(client, "team", "parent")
    push_image(client, "team/app", "child")
    assert client.get("/v2/team/tags/list").json()["tags"] == ["parent"]
    assert client.get("/v2/team/app/tags/list").json()["tags"] == ["child"]


TRAVERSALS = ["..", "../..", "a/../b", "a/./b", "%2e%2e", "%2e%2e/%2e%2e/etc", "a%2f..%2f..", "a%00b",
              "%00", "a/%2e%2e", "..%5c..", "a\\..\\b"]


def _requests(name: str) -> list[tuple[str, str, bytes]]:
    digest = digest_of(DATA)
    return [
        ("POST", f"/v2/{name}/blobs/uploads/?digest={digest}", DATA),
        ("POST", f"/v2/{name}/blobs/uploads/", b""),
        ("GET", f"/v2/{name}/blobs/{digest}", b""),
        ("DELETE", f"/v2/{name}/blobs/{digest}", b""),
        ("PUT", f"/v2/{name}/manifests/v1", make_manifest()),
        ("GET", f"/v2/{name}/manifests/v1", b""),
        ("GET", f"/v2/{name}/tags/list", b""),
        ("GET", f"/v2/{name}/referrers/{digest}", b""),
    ]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("name", TRAVERSALS)
def test_it_refuses_traversal_in_a_name_and_writes_nothing(client, storage_root, name) -> None:
    outside = storage_root.parent
    before = _tree(outside)
    for method, url, body in _requests(name):
        response = client.generic(method, url, body, "application/octet-stream")
        assert response.status_code in (400, 404), (method, url, response.status_code)
        assert response.json()["errors"], (method, url)
    assert _tree(outside) == before
    assert not os.listdir(storage_root) or _tree(storage_root) <= {"uploads"}


@pytest.mark.parametrize("reference", ["..", "%2e%2e", "a%00", "..%2f..", "sha256:..", "sha256:%2e%2e%2f"])
def test_it_refuses_traversal_in_a_reference(client, storage_root, reference) -> None:
    push_image(client, "team/app", "v1")
    before = _tree(storage_root.parent)
    response = put_manifest(client, "team/app", reference, make_manifest())
    assert response.status_code in (400, 404)
    assert response.json()["errors"]
    for method in ("GET", "DELETE"):
        response = client.generic(method, f"/v2/team/app/blobs/{reference}")
        assert response.status_code in (400, 404)
        assert response.json()["errors"]
    assert _tree(storage_root.parent) == before
