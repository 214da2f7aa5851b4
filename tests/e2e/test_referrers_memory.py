"""Under gunicorn: a subject whose referrers carry megabytes of annotations each cannot make a listing
(API or UI) build a huge response: six parallel listings keep the server's memory flat."""
from __future__ import annotations

import json
import threading

import pytest

from bench.servers import process_tree, pss_bytes
from tests.faults.wire import OCI_MANIFEST, Registry, digest

pytestmark = pytest.mark.e2e
MiB = 1024 * 1024


def test_referrers_with_huge_annotations_keep_memory_flat(start_registry) -> None:
    server = start_registry()
    client = Registry(server.host)
    subject_digest, subject_body = client.push_image("team/app", "v1", [b"layer"])
    config = b"{}"
    client.push_blob("team/app", config)
    for n in range(12):
        referrer = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.example.note",
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest(config), "size": 2},
            "layers": [{"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest(config), "size": 2}],
            "subject": {"mediaType": OCI_MANIFEST, "digest": subject_digest, "size": len(subject_body)},
            "annotations": {"note": f"{n}:" + "x" * (3 * MiB + n)},
        }).encode()
        reply = client.request("PUT", f"/v2/team/app/manifests/{digest(referrer)}", referrer,
                               {"Content-Type": OCI_MANIFEST})
        assert reply.status == 201, reply.body

    pids = process_tree(server.process.pid)
    before = pss_bytes(pids)
    peak = [before]
    sizes: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], pss_bytes(pids))
            done.wait(0.02)

    def listing(path: str) -> None:
        reply = Registry(server.host).request("GET", path)
        assert reply.status == 200
        sizes.append(len(reply.body))

    sampler = threading.Thread(target=sample)
    sampler.start()
    paths = [f"/v2/team/app/referrers/{subject_digest}"] * 6 + [f"/ui/r/team/app/-/manifests/{subject_digest}"] * 2
    readers = [threading.Thread(target=listing, args=(path,)) for path in paths]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    done.set()
    sampler.join()
    assert len(sizes) == len(paths) and max(sizes) < 200_000, sizes
    assert peak[0] - before < 64 * MiB, (before / MiB, peak[0] / MiB)
    listed = json.loads(client.request("GET", f"/v2/team/app/referrers/{subject_digest}").body)["manifests"]
    assert len(listed) == 12 and all("annotations" not in d for d in listed)
