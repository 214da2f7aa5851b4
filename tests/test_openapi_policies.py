"""The OpenAPI document describes the 403s the governance rules add: an immutable tag on manifest PUT
and DELETE, a quota on upload start and completion; their examples are the envelope the registry sends."""
from __future__ import annotations

import json

import jsonschema
import pytest
from django.test import Client

from ops import openapi
from tests.support.auth import auth_on, auth_paths, basic, write_htpasswd  # noqa: F401  (fixtures)
from tests.support.registry_client import push_blob, push_image
from tokens import services

pytestmark = pytest.mark.django_db


def _resolve(document: dict, spec: dict) -> dict:
    name = spec["$ref"].rsplit("/", 1)[1]
    return document["components"]["responses"][name]


def test_the_operations_a_rule_can_refuse_document_it() -> None:
    document = openapi.document()
    paths = document["paths"]
    cases = {("/v2/{name}/manifests/{reference}", "put"): "DeniedOrImmutable",
             ("/v2/{name}/manifests/{reference}", "delete"): "DeniedOrImmutable",
             ("/v2/{name}/blobs/uploads/", "post"): "DeniedOrQuota",
             ("/v2/{name}/blobs/uploads/{upload_id}", "put"): "DeniedOrQuota"}
    for (path, method), name in cases.items():
        assert paths[path][method]["responses"]["403"] == {"$ref": f"#/components/responses/{name}"}
    assert paths["/v2/{name}/manifests/{reference}"]["get"]["responses"]["403"] == {
        "$ref": "#/components/responses/Denied"}


def test_its_examples_match_what_the_registry_answers(client: Client, settings) -> None:
    settings.REGISTRY_IMMUTABLE = [{"name": "", "repositories": "prod/*", "tags": ["^v.*"]}]
    settings.REGISTRY_QUOTAS = [{"name": "", "repositories": "team/*", "max_bytes": "10B"}]
    document = openapi.document()
    envelope = {**document["components"]["schemas"]["ErrorEnvelope"], "components": document["components"]}
    push_image(client, "prod/app", "v1", layers=[b"one"])
    refused = client.delete("/v2/prod/app/manifests/v1")
    push_blob(client, "team/app", b"x" * 10)
    full = client.post("/v2/team/app/blobs/uploads/")
    for response, name in ((refused, "DeniedOrImmutable"), (full, "DeniedOrQuota")):
        assert response.status_code == 403
        body = json.loads(response.content)
        example = _resolve(document, {"$ref": f"#/components/responses/{name}"})["content"]["application/json"][
            "examples"]["policy"]["value"]
        for instance in (body, example):
            jsonschema.validate(instance, envelope)
        assert set(body["errors"][0]) == set(example["errors"][0]) == {"code", "message", "detail"}
        assert set(body["errors"][0]["detail"]) <= set(example["errors"][0]["detail"])


def test_its_role_example_is_what_a_read_token_gets_for_a_push(client: Client, auth_on) -> None:  # noqa: F811
    read = services.create_token("alice", "read")
    response = client.post("/v2/team/app/blobs/uploads/", HTTP_AUTHORIZATION=basic("token", read.token))
    assert response.status_code == 403
    document = openapi.document()
    for name in ("DeniedOrImmutable", "DeniedOrQuota"):
        content = _resolve(document, {"$ref": f"#/components/responses/{name}"})["content"]["application/json"]
        assert content["schema"] == {"$ref": "#/components/schemas/ErrorEnvelope"}
        example = content["examples"]["role"]["value"]
        assert set(example) == set(response.json()) == {"errors"}
        assert example["errors"][0]["message"].replace("3f9a1c0e5b7d2a64", read.hash_prefix) == \
            response.json()["errors"][0]["message"]
