"""Registry counters: transfers, pushes/pulls/deletes by outcome, upload sessions, auth attempts."""
from __future__ import annotations

import json
from typing import Callable, Iterator

import pytest
from django.test import Client
from prometheus_client import REGISTRY

from tests.support.auth import auth_on, auth_paths, basic, bearer  # noqa: F401  (fixtures)
from tests.support.registry_client import (
    OCTET,
    body_of,
    digest_of,
    make_manifest,
    patch,
    post_upload,
    push_blob,
    push_image,
    put_upload,
    start_upload,
)
from tokens import services

pytestmark = pytest.mark.django_db

Delta = Callable[[str, dict[str, str] | None], float]


def _key(name: str, labels: dict[str, str] | None) -> tuple[str, str]:
    return name, json.dumps(labels or {}, sort_keys=True)


@pytest.fixture
def delta() -> Iterator[Delta]:
    """How much a registry counter grew during the test (counters are process-wide)."""
    start = {
        _key(sample.name, sample.labels): sample.value
        for family in REGISTRY.collect()
        for sample in family.samples
        if sample.name.startswith("registry_") and sample.name.endswith("_total")
    }

    def grown(name: str, labels: dict[str, str] | None = None) -> float:
        now = REGISTRY.get_sample_value(name, labels or {}) or 0.0
        return now - start.get(_key(name, labels), 0.0)

    yield grown


def blob_ops(operation: str, outcome: str) -> tuple[str, dict[str, str]]:
    return "registry_blob_operations_total", {"operation": operation, "outcome": outcome}


def manifest_ops(operation: str, outcome: str) -> tuple[str, dict[str, str]]:
    return "registry_manifest_operations_total", {"operation": operation, "outcome": outcome}


def sessions(event: str) -> tuple[str, dict[str, str]]:
    return "registry_upload_sessions_total", {"event": event}


def test_it_counts_a_pushed_and_pulled_image(client: Client, delta: Delta) -> None:
    layer = b"layer" * 200
    body, digest = push_image(client, "team/app", "v1", layers=[layer])
    config_size = len(b'{"architecture":"amd64","os":"linux","ref":"v1"}')
    assert delta(*blob_ops("push", "success")) == 2
    assert delta(*sessions("started")) == 2
    assert delta(*sessions("completed")) == 2
    assert delta(*manifest_ops("push", "success")) == 1
    assert delta("registry_bytes_uploaded_total") == len(layer) + config_size + len(body)

    assert body_of(client.get(f"/v2/team/app/blobs/{digest_of(layer)}")) == layer
    assert client.get("/v2/team/app/manifests/v1").content == body
    assert delta(*blob_ops("pull", "success")) == 1
    assert delta(*manifest_ops("pull", "success")) == 1
    assert delta("registry_bytes_downloaded_total") == len(layer) + len(body)


def test_it_does_not_count_head_requests_as_pulls(client: Client, delta: Delta) -> None:
    digest = push_blob(client, "team/app", b"data")
    client.head(f"/v2/team/app/blobs/{digest}")
    assert delta(*blob_ops("pull", "success")) == 0
    assert delta("registry_bytes_downloaded_total") == 0


def test_it_counts_ranged_blob_reads_by_the_bytes_sent(client: Client, delta: Delta) -> None:
    digest = push_blob(client, "team/app", b"0123456789")
    response = client.get(f"/v2/team/app/blobs/{digest}", headers={"Range": "bytes=2-5"})
    assert body_of(response) == b"2345"
    assert delta("registry_bytes_downloaded_total") == 4


def test_it_counts_failed_pulls_by_outcome(client: Client, delta: Delta) -> None:
    push_blob(client, "team/app", b"data")
    client.get(f"/v2/team/app/blobs/{digest_of(b'other')}")
    client.get("/v2/team/app/manifests/missing")
    client.get("/v2/team/app/manifests/bad:tag:")
    assert delta(*blob_ops("pull", "not_found")) == 1
    assert delta(*manifest_ops("pull", "not_found")) == 1
    assert delta(*manifest_ops("pull", "invalid")) == 1


def test_it_counts_a_digest_mismatch_as_a_failed_session_and_push(client: Client, delta: Delta) -> None:
    location = start_upload(client, "team/app")["Location"]
    response = put_upload(client, location, digest_of(b"something else"), b"data")
    assert response.status_code == 400
    assert delta(*sessions("failed")) == 1
    assert delta(*blob_ops("push", "invalid")) == 1
    assert delta("registry_bytes_uploaded_total") == 0


def test_it_counts_chunks_and_a_chunk_out_of_order(client: Client, delta: Delta) -> None:
    location = start_upload(client, "team/app")["Location"]
    assert patch(client, location, b"abc", "0-2").status_code == 202
    assert patch(client, location, b"def", "7-9").status_code == 416
    assert delta("registry_bytes_uploaded_total") == 3
    assert delta(*sessions("failed")) == 1


def test_it_counts_a_cancelled_session(client: Client, delta: Delta) -> None:
    location = start_upload(client, "team/app")["Location"]
    assert client.delete(location).status_code == 204
    assert delta(*sessions("cancelled")) == 1


def test_it_counts_monolithic_pushes_and_mounts(client: Client, delta: Delta) -> None:
    data = b"monolithic"
    digest = digest_of(data)
    assert post_upload(client, "team/app", f"?digest={digest}", data).status_code == 201
    assert post_upload(client, "other/app", f"?mount={digest}&from=team/app").status_code == 201
    assert post_upload(client, "team/app", f"?digest={digest_of(b'x')}", data).status_code == 400
    assert delta(*blob_ops("push", "success")) == 2
    assert delta(*blob_ops("push", "invalid")) == 1
    assert delta("registry_bytes_uploaded_total") == len(data)
    assert delta(*sessions("started")) == 0


def test_it_counts_deletes(client: Client, delta: Delta) -> None:
    _, manifest_digest = push_image(client, "team/app", "v1", layers=[b"layer"])
    assert client.delete(f"/v2/team/app/manifests/{manifest_digest}").status_code == 202
    assert client.delete(f"/v2/team/app/blobs/{digest_of(b'layer')}").status_code == 202
    assert client.delete(f"/v2/team/app/blobs/{digest_of(b'layer')}").status_code == 404
    assert delta(*manifest_ops("delete", "success")) == 1
    assert delta(*blob_ops("delete", "success")) == 1
    assert delta(*blob_ops("delete", "not_found")) == 1


def test_it_counts_manifest_pushes_refused_for_missing_blobs(client: Client, delta: Delta) -> None:
    body = make_manifest(layers=[b"never pushed"])
    response = client.generic("PUT", "/v2/team/app/manifests/v1", body,
                              "application/vnd.oci.image.manifest.v1+json")
    assert response.status_code == 400
    assert delta(*manifest_ops("push", "invalid")) == 1
    assert delta("registry_bytes_uploaded_total") == 0


def auth(mechanism: str, outcome: str) -> tuple[str, dict[str, str]]:
    return "registry_auth_attempts_total", {"mechanism": mechanism, "outcome": outcome}


def test_it_counts_auth_attempts_by_mechanism_and_outcome(client: Client, auth_on, delta: Delta) -> None:
    token = services.create_token("alice", "read").token
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland")).status_code == 200
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "nope")).status_code == 401
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("token", token)).status_code == 200
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("token", "svc_" + "x" * 43)).status_code == 401
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=bearer(token)).status_code == 200
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=bearer("svc_wrong")).status_code == 401
    assert client.get("/v2/_catalog").status_code == 401  # no credentials: not an attempt
    assert delta(*auth("basic", "success")) == 1
    assert delta(*auth("basic", "failure")) == 1
    assert delta(*auth("token", "success")) == 1
    assert delta(*auth("token", "failure")) == 1
    assert delta(*auth("bearer", "success")) == 1
    assert delta(*auth("bearer", "failure")) == 1


def test_it_counts_a_role_refusal_as_a_denied_operation(client: Client, auth_on, delta: Delta) -> None:
    token = services.create_token("alice", "read").token
    response = client.generic("POST", "/v2/team/app/blobs/uploads/?digest=" + digest_of(b"x"), b"x", OCTET,
                              HTTP_AUTHORIZATION=bearer(token))
    assert response.status_code == 403
    assert delta(*blob_ops("push", "denied")) == 1
    assert delta(*auth("bearer", "success")) == 1


def test_it_counts_token_endpoint_logins(client: Client, auth_on, delta: Delta) -> None:
    def post(path: str, body: dict) -> int:
        return client.post(path, json.dumps(body), content_type="application/json").status_code

    assert post("/api/tokens", {"username": "alice", "password": "wonderland"}) == 201
    assert post("/api/tokens/list", {"username": "alice", "password": "bad"}) == 401
    assert delta(*auth("password", "success")) == 1
    assert delta(*auth("password", "failure")) == 1


def test_it_counts_no_auth_attempts_with_auth_off(client: Client, delta: Delta) -> None:
    client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "anything"))
    for mechanism in ("basic", "token", "bearer"):
        for outcome in ("success", "failure"):
            assert delta(*auth(mechanism, outcome)) == 0
