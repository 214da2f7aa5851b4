"""Under gunicorn, the limits on work per request hold: a manifest listing a blob thousands of times,
an index with text that is not Unicode, and new uploads below the storage floor are refused, while
pulls and /ready go on."""
from __future__ import annotations

import json

import pytest

from tests.faults.wire import OCI_MANIFEST, Registry, digest

pytestmark = pytest.mark.e2e
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def test_manifests_that_would_make_unbounded_work_are_refused(start_registry) -> None:
    server = start_registry()
    client = Registry(server.host)
    manifest_digest, manifest = client.push_image("team/app", "v1", [b"layer"])
    layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest(b"layer"), "size": 5}
    wide = json.loads(manifest)
    wide["layers"] = [layer] * 5000
    reply = client.request("PUT", "/v2/team/app/manifests/wide", json.dumps(wide).encode(),
                           {"Content-Type": OCI_MANIFEST})
    assert reply.status == 400 and "at most 1000 descriptors" in reply.body.decode()
    index = ('{"schemaVersion": 2, "mediaType": "%s", "manifests": [{"mediaType": "%s", "digest": "%s", '
             '"size": %d, "platform": {"os": "\\ud800", "architecture": "amd64"}}]}'
             % (OCI_INDEX, OCI_MANIFEST, manifest_digest, len(manifest))).encode()
    reply = client.request("PUT", "/v2/team/app/manifests/multi", index, {"Content-Type": OCI_INDEX})
    assert reply.status == 400 and "not valid Unicode" in reply.body.decode()
    assert client.request("GET", "/ui/r/team/app/").status == 200


def test_below_the_storage_floor_pushes_stop_and_pulls_go_on(start_registry) -> None:
    server = start_registry(SVC_STORAGE_MIN_FREE_BYTES=str(2**62))
    client = Registry(server.host)
    reply = client.request("POST", "/v2/team/app/blobs/uploads/")
    assert reply.status == 507 and json.loads(reply.body)["errors"][0]["code"] == "BLOB_UPLOAD_INVALID"
    ready = client.request("GET", "/ready")
    assert ready.status == 200 and "new uploads are refused" in json.loads(ready.body)["checks"]["storage_low"]
