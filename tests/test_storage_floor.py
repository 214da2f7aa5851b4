"""Below [storage] min_free_bytes: new uploads are refused with 507 in the OCI envelope, while pulls
and uploads already in progress go on, and /ready stays ready (saying why pushes fail)."""
from __future__ import annotations

import json

import pytest

from tests.support.registry_client import digest_of, patch, post_upload, push_image, put_upload, start_upload

pytestmark = pytest.mark.django_db


def test_new_uploads_are_refused_and_everything_else_goes_on(client, settings) -> None:
    _body, manifest = push_image(client, "team/app", "v1")
    in_progress = start_upload(client, "team/app")["Location"]
    settings.REGISTRY_MIN_FREE_BYTES = 2**62

    for response in (client.post("/v2/team/app/blobs/uploads/"),
                     post_upload(client, "team/app", f"?digest={digest_of(b'x')}", b"x")):
        assert response.status_code == 507
        error = json.loads(response.content)["errors"][0]
        assert error["code"] == "BLOB_UPLOAD_INVALID" and "min_free_bytes" in error["message"]

    assert client.get(f"/v2/team/app/manifests/{manifest}").status_code == 200
    assert patch(client, in_progress, b"late", "0-3").status_code == 202
    assert put_upload(client, in_progress, digest_of(b"late")).status_code == 201
    assert client.get("/ready").status_code == 200
