"""The database under write contention: 16 clients pushing distinct images while 8 push different
manifests to one tag. No 5xx, no "database is locked", the tag ends on one of the 8, and every
pushed manifest is complete."""
from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from tests.faults.wire import Registry, digest, image_manifest, storage_problems

ROUNDS = 3


def test_it_serves_concurrent_pushes_without_errors(start_registry) -> None:
    server = start_registry()
    replies: list[tuple[str, int, bytes]] = []
    lock = threading.Lock()
    start = threading.Barrier(24)

    class Recording(Registry):
        def request(self, method, path, body=None, headers=None):  # type: ignore[no-untyped-def]
            reply = super().request(method, path, body, headers)
            with lock:
                replies.append((f"{method} {path}", reply.status, reply.body))
            return reply

    def distinct(i: int) -> list[str]:
        client = Recording(server.host)
        start.wait()
        return [client.push_image(f"team/app{i}", f"v{r}", [os.urandom(48 * 1024), os.urandom(16 * 1024)])[0]
                for r in range(ROUNDS)]

    def same_tag(i: int) -> list[str]:
        client = Recording(server.host)
        shared = b"shared-layer" * 1000
        start.wait()
        pushed = []
        for r in range(ROUNDS):
            config = json.dumps({"architecture": "amd64", "os": "linux", "writer": i, "round": r}).encode()
            client.push_blob("team/shared", shared)
            client.push_blob("team/shared", config)
            manifest = image_manifest(config, [shared])
            reply = client.request("PUT", "/v2/team/shared/manifests/latest", manifest,
                                   {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
            assert reply.status == 201, (reply.status, reply.body)
            pushed.append(digest(manifest))
        return pushed

    with ThreadPoolExecutor(max_workers=24) as pool:
        distinct_jobs = [pool.submit(distinct, i) for i in range(16)]
        tag_jobs = [pool.submit(same_tag, i) for i in range(8)]
        distinct_digests = [job.result() for job in distinct_jobs]
        tag_digests = {d for job in tag_jobs for d in job.result()}

    failures = [r for r in replies if r[1] >= 500 or b"locked" in r[2]]
    assert failures == []
    assert len(replies) == 16 * ROUNDS * 4 + 8 * ROUNDS * 3
    log = server.log_path.read_text()
    assert "database is locked" not in log and "Traceback" not in log

    client = Registry(server.host)
    final = client.request("HEAD", "/v2/team/shared/manifests/latest").header("Docker-Content-Digest")
    assert final in tag_digests
    for manifest_digest in tag_digests:
        assert client.pull_image("team/shared", manifest_digest)
    for i, digests in enumerate(distinct_digests):
        for r, manifest_digest in enumerate(digests):
            assert client.request("HEAD", f"/v2/team/app{i}/manifests/v{r}").header(
                "Docker-Content-Digest") == manifest_digest
            assert client.pull_image(f"team/app{i}", manifest_digest)
    assert storage_problems(server) == []
