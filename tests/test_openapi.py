"""/api-docs/openapi.json: a valid OpenAPI 3.1 document that describes every route of the project."""
from __future__ import annotations

import json
import re
from typing import Any, Iterator

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from openapi_spec_validator import validate

from ops import openapi

pytestmark = pytest.mark.django_db

METHODS = ("get", "head", "post", "put", "patch", "delete")
# A value for every path parameter the document uses, so that documented paths can be resolved.
SAMPLES = {
    "name": "team/app",
    "reference": "v1",
    "digest": "sha256:" + "a" * 64,
    "upload_id": "0" * 32,
    "rest": "no/such/page",
}


@pytest.fixture
def plain_static(settings) -> None:
    """Static URLs without collectstatic's manifest, which only `make static` builds."""
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return openapi.document()


def concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], path)


def routes(patterns: list[Any], namespace: str = "") -> Iterator[str]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from routes(pattern.url_patterns, inner)
        elif isinstance(pattern, URLPattern):
            assert pattern.name, f"URL pattern {pattern.pattern} has no name"
            yield namespace + pattern.name


def test_it_serves_the_document_as_json(client: Client, document: dict[str, Any]) -> None:
    response = client.get("/api-docs/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == json.loads(json.dumps(document))


def test_it_is_a_valid_openapi_3_1_document(document: dict[str, Any]) -> None:
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_it_describes_every_url_route_of_the_project(document: dict[str, Any]) -> None:
    described = {resolve(concrete(path)).view_name for path in document["paths"]}
    every_route = set(routes(get_resolver().url_patterns))
    assert every_route - described == set(), "routes missing from the OpenAPI document"


def test_it_documents_only_paths_that_reach_their_own_route(document: dict[str, Any]) -> None:
    # A documented path must not fall through to a catch-all route by mistake.
    catch_alls = {"unknown-endpoint", "ui:unknown"}
    for path in document["paths"]:
        view_name = resolve(concrete(path)).view_name
        if "{rest}" not in path:
            assert view_name not in catch_alls, path


def test_it_documents_only_methods_the_routes_accept(client: Client, document: dict[str, Any],
                                                    plain_static: None) -> None:
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                response = client.generic(method.upper(), concrete(path))
                assert response.status_code != 405, (method, path, response.content[:200])


def test_it_describes_the_oci_error_envelope_with_every_code(document: dict[str, Any]) -> None:
    envelope = document["components"]["schemas"]["ErrorEnvelope"]
    codes = envelope["properties"]["errors"]["items"]["properties"]["code"]["enum"]
    assert {"BLOB_UNKNOWN", "MANIFEST_UNKNOWN", "NAME_UNKNOWN", "UNAUTHORIZED", "DENIED", "UNSUPPORTED"} <= set(codes)


def test_it_gives_every_registry_operation_its_status_codes(document: dict[str, Any]) -> None:
    for path, item in document["paths"].items():
        if not path.startswith("/v2/"):
            continue
        for method in METHODS:
            if method in item:
                statuses = set(item[method]["responses"])
                assert "401" in statuses, (method, path)
                assert any(s.startswith("2") for s in statuses) or path == "/v2/{rest}", (method, path)


def test_it_documents_the_registry_headers(document: dict[str, Any]) -> None:
    paths = document["paths"]
    blob_get = paths["/v2/{name}/blobs/{digest}"]["get"]
    assert {"200", "206", "416"} <= set(blob_get["responses"])
    assert "Docker-Content-Digest" in blob_get["responses"]["200"]["headers"]
    assert blob_get["parameters"][0]["name"] == "Range"
    patch = paths["/v2/{name}/blobs/uploads/{upload_id}"]["patch"]
    assert set(patch["responses"]["202"]["headers"]) == {"Location", "Range", "Docker-Upload-UUID"}
    assert "WWW-Authenticate" in document["components"]["responses"]["Unauthorized"]["headers"]


@pytest.mark.parametrize("path,request_schema,ok,response_schema", [
    ("/api/tokens", "TokenCreateRequest", "201", "TokenCreated"),
    ("/api/tokens/list", "Credentials", "200", "TokenList"),
    ("/api/tokens/revoke", "TokenRevokeRequest", "200", "TokenRevoked"),
])
def test_it_describes_the_token_endpoints_with_schemas_and_examples(
    document: dict[str, Any], path: str, request_schema: str, ok: str, response_schema: str
) -> None:
    operation = document["paths"][path]["post"]
    assert operation["security"] == []
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": f"#/components/schemas/{request_schema}"}
    success = operation["responses"][ok]["content"]["application/json"]["schema"]
    assert success == {"$ref": f"#/components/schemas/{response_schema}"}
    assert {"400", "401", "405", "429"} <= set(operation["responses"])
    schemas = document["components"]["schemas"]
    assert "example" in schemas[response_schema]
    if request_schema != "Credentials":
        assert "example" in schemas[request_schema]


def test_its_token_example_has_the_token_shape(document: dict[str, Any]) -> None:
    created = document["components"]["schemas"]["TokenCreated"]
    assert re.fullmatch(created["properties"]["token"]["pattern"], created["example"]["token"])
    assert set(created["required"]) <= set(created["example"])


def test_it_marks_the_open_endpoints_as_needing_no_credentials(document: dict[str, Any]) -> None:
    for path in ("/health", "/ready", "/metrics", "/api-docs/", "/api-docs/openapi.json", "/ui/"):
        assert document["paths"][path]["get"]["security"] == [], path
    assert {} in document["security"]  # auth is optional: off by default
