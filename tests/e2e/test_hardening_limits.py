"""Under gunicorn, the limits on work per request hold: a manifest listing a blob thousands of times,
an index with text that is not Unicode, and new uploads below the storage floor are refused, while
pulls and /ready go on; and pages render whatever text is already stored."""
from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone

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
    wide["layers"] = [layer] * 999  # the most the default limit takes: its page shows 100 at a time
    assert client.request("PUT", "/v2/team/app/manifests/wide", json.dumps(wide).encode(),
                          {"Content-Type": OCI_MANIFEST}).status == 201
    page = client.request("GET", "/ui/r/team/app/-/manifests/wide")
    assert page.status == 200 and "1–100 of 999" in page.body.decode() and len(page.body) < 512 * 1024


def test_below_the_storage_floor_pushes_stop_and_pulls_go_on(start_registry) -> None:
    server = start_registry()
    client = Registry(server.host)
    manifest_digest, _ = client.push_image("team/app", "v1", [b"layer"])
    in_progress = client.request("POST", "/v2/team/app/blobs/uploads/").header("Location")
    assert client.request("PATCH", in_progress, b"half", {"Content-Range": "0-3"}).status == 202
    server.stop()
    server.env_overrides["SVC_STORAGE_MIN_FREE_BYTES"] = str(2**62)
    server.start()

    for query, body in (("", b""), (f"?digest={digest(b'new')}", b"new")):
        reply = client.request("POST", f"/v2/team/app/blobs/uploads/{query}", body)
        assert reply.status == 507 and json.loads(reply.body)["errors"][0]["code"] == "BLOB_UPLOAD_INVALID"
        assert "min_free_bytes" in json.loads(reply.body)["errors"][0]["message"]
    ready = client.request("GET", "/ready")
    assert ready.status == 200 and "new uploads are refused" in json.loads(ready.body)["checks"]["storage_low"]
    assert client.pull_image("team/app", "v1") and client.pull_image("team/app", manifest_digest)
    finished = client.request("PUT", f"{in_progress}?digest={digest(b'half, then all')}", b", then all")
    assert finished.status == 201  # an upload that started above the floor may finish


def _store_as_an_earlier_release_did(server, body: bytes, media_type: str, tag: str = "", subject: str = "",
                                     annotations: str = "{}") -> str:
    """A manifest row written straight into the database, as releases before the refusal stored it."""
    with sqlite3.connect(server.workdir / "db.sqlite3") as db:
        repository_id = db.execute("SELECT id FROM registry_repository WHERE name = 'team/app'").fetchone()[0]
        now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        row = db.execute("INSERT INTO registry_manifest (repository_id, digest, media_type, size, body, "
                         "artifact_type, subject_digest, annotations, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (repository_id, digest(body), media_type, len(body), body,
                          "application/example" if subject else "", subject, annotations, now)).lastrowid
        if tag:
            db.execute("INSERT INTO registry_tag (repository_id, name, manifest_id, updated_at) VALUES (?, ?, ?, ?)",
                       (repository_id, tag, row, now))
    return digest(body)


def test_pages_render_whatever_text_is_stored(start_registry) -> None:
    server = start_registry()
    client = Registry(server.host)
    manifest_digest, manifest = client.push_image("team/app", "v1", [b"layer"])
    # An image config is a blob, stored as pushed: no manifest rule can refuse what it holds.
    config = (b'{"architecture":"amd64","os":"linux","config":{"Labels":{"evil":"\\ud800"},'
              b'"Env":["A=\\udfff"]},"history":[{"created_by":"RUN \\ud83d"}]}')
    client.push_blob("team/app", config)
    image = json.loads(manifest)
    image["config"] = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config),
                       "size": len(config)}
    assert client.request("PUT", "/v2/team/app/manifests/labels", json.dumps(image).encode(),
                          {"Content-Type": OCI_MANIFEST}).status == 201
    index = ('{"schemaVersion": 2, "mediaType": "%s", "manifests": [{"mediaType": "%s", "digest": "%s", '
             '"size": %d, "platform": {"os": "\\ud800", "architecture": "amd64"}}]}'
             % (OCI_INDEX, OCI_MANIFEST, manifest_digest, len(manifest))).encode()
    _store_as_an_earlier_release_did(server, index, OCI_INDEX, tag="old-multi")
    referrer = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/example",
                           "subject": {"mediaType": OCI_MANIFEST, "digest": manifest_digest,
                                       "size": len(manifest)}}).encode()
    _store_as_an_earlier_release_did(server, referrer, OCI_MANIFEST, subject=manifest_digest,
                                     annotations='{"note": "\\ud800"}')

    for path in ("/ui/", "/ui/repositories/", "/ui/r/team/app/", "/ui/r/team/app/-/manifests/labels",
                 "/ui/r/team/app/-/manifests/old-multi", "/ui/r/team/app/-/manifests/v1"):
        reply = client.request("GET", path)
        assert reply.status == 200, (path, reply.body[-500:])
    assert b"A=\\udfff" in client.request("GET", "/ui/r/team/app/-/manifests/labels").body
    assert b"\\ud800/amd64" in client.request("GET", "/ui/r/team/app/-/manifests/old-multi").body
    listed = client.request("GET", f"/v2/team/app/referrers/{manifest_digest}")
    assert listed.status == 200 and len(json.loads(listed.body)["manifests"]) == 1
    assert "Traceback" not in server.log_path.read_text()
