"""Property tests through the whole view stack (Django test client): hostile references, digests,
Range, Content-Range, pagination and manifest bodies get a 4xx in the OCI envelope, never a 5xx."""
from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.registry_client import OCI_MANIFEST, digest_of, make_manifest, push_image, start_upload

pytestmark = pytest.mark.django_db

DJANGO = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.too_slow])
LAYER = b"property-layer" * 100
hostile_text = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["..", "../../etc/passwd", "%2e%2e", "a\x00b", "sha256:../../x", "sha256:" + "0" * 64,
                     "sha512:" + "f" * 128, "v1", "x" * 129, "latest", "sha256:", ":", "/abs"]),
)
HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40)


@pytest.fixture
def image(client: Client) -> str:
    _body, digest = push_image(client, "team/app", "v1", layers=[LAYER])
    return digest


def assert_clean(response, allowed: set[int]) -> None:
    assert response.status_code in allowed, (response.status_code, getattr(response, "content", b""))
    if response.status_code >= 400 and response.request["REQUEST_METHOD"] != "HEAD":
        errors = json.loads(response.content)["errors"]
        assert errors and all(e["code"].replace("_", "").isupper() for e in errors)


@DJANGO
@given(reference=hostile_text, method=st.sampled_from(["GET", "HEAD", "DELETE"]))
def test_it_answers_any_manifest_reference_with_a_clean_status(client: Client, image: str, reference: str,
                                                               method: str) -> None:
    response = client.generic(method, f"/v2/team/app/manifests/{quote(reference, safe='')}")
    assert_clean(response, {200, 202, 400, 404})


@DJANGO
@given(digest=hostile_text, method=st.sampled_from(["GET", "HEAD", "DELETE"]))
def test_it_answers_any_blob_digest_with_a_clean_status(client: Client, image: str, digest: str,
                                                        method: str) -> None:
    response = client.generic(method, f"/v2/team/app/blobs/{quote(digest, safe='')}")
    assert_clean(response, {200, 202, 400, 404})


@DJANGO
@given(header=st.one_of(HEADER_TEXT, st.builds("bytes={}-{}".format, st.integers(0, 3000), st.integers(0, 3000))))
def test_it_serves_a_blob_for_any_range_header(client: Client, image: str, header: str) -> None:
    response = client.get(f"/v2/team/app/blobs/{digest_of(LAYER)}", headers={"Range": header})
    assert_clean(response, {200, 206, 416})
    if response.status_code in (200, 206):
        body = b"".join(response.streaming_content)
        assert len(body) == int(response["Content-Length"])
        assert body in LAYER


@DJANGO
@given(content_range=HEADER_TEXT, data=st.binary(max_size=64))
def test_it_answers_any_content_range_with_a_clean_status(client: Client, content_range: str, data: bytes) -> None:
    location = start_upload(client, "team/app")["Location"]
    response = client.generic("PATCH", location, data, "application/octet-stream",
                              headers={"Content-Range": content_range})
    assert_clean(response, {202, 400, 416})
    status = client.get(location)
    assert status.status_code == 204
    expected_end = max(len(data) - 1, 0) if response.status_code == 202 else 0
    assert status["Range"] == f"0-{expected_end}"


@DJANGO
@given(n=st.one_of(st.none(), HEADER_TEXT, st.integers(-5, 5000).map(str)), last=st.one_of(st.none(), hostile_text))
def test_it_answers_any_pagination_with_a_clean_status(client: Client, image: str, n: str | None,
                                                       last: str | None) -> None:
    params = {k: v for k, v in {"n": n, "last": last}.items() if v is not None}
    for path in ("/v2/_catalog", "/v2/team/app/tags/list"):
        assert_clean(client.get(path, params), {200, 400})


@DJANGO
@given(body=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)),
       content_type=st.one_of(st.just(OCI_MANIFEST), HEADER_TEXT))
def test_it_answers_any_manifest_body_with_a_clean_status(client: Client, body: bytes, content_type: str) -> None:
    response = client.generic("PUT", "/v2/team/app/manifests/v2", body, content_type)
    assert_clean(response, {201, 400})


@pytest.mark.parametrize("field, value", [("artifactType", "\\ud800"), ("artifactType", "a\\u0000b"),
                                          ("annotations", {"k": "\\udfff"}), ("annotations", {"\\u0000": "v"})])
def test_it_refuses_manifest_text_no_database_can_store(client: Client, field: str, value) -> None:
    config = b'{"architecture":"amd64","os":"linux"}'
    push_image(client, "team/app", "base", layers=[LAYER], config=config)
    doc = json.loads(make_manifest(config, [LAYER]))
    doc[field] = "PLACEHOLDER" if isinstance(value, str) else {"PK": "PV"}
    body = json.dumps(doc)
    if isinstance(value, str):
        body = body.replace("PLACEHOLDER", value)
    else:
        (key, val), = value.items()
        body = body.replace("PK", key).replace("PV", val)
    response = client.generic("PUT", "/v2/team/app/manifests/odd", body.encode(), OCI_MANIFEST)
    assert_clean(response, {400})
