"""kill -9 of the whole server in the middle of a push, then a restart on the same data: nothing
partial becomes visible, interrupted uploads resume or are unknown, storage and database agree."""
from __future__ import annotations

import os
import time

from tests.faults.wire import MiB, Registry, digest, image_manifest, scrub_problems, send_partial, \
    storage_problems, upload_files, wait_until


def restart(server) -> Registry:
    server.kill()
    assert server.pids() == []
    server.start()
    return Registry(server.host)


def test_it_forgets_a_monolithic_upload_killed_halfway(start_registry) -> None:
    server = start_registry()
    client = Registry(server.host)
    before, _ = client.push_image("team/app", "v1", [os.urandom(256 * 1024)])
    blob = os.urandom(8 * MiB)
    sock = send_partial(server.host, "POST", f"/v2/team/app/blobs/uploads/?digest={digest(blob)}",
                        {"Content-Length": str(len(blob)), "Content-Type": "application/octet-stream"},
                        blob[:3 * MiB])
    wait_until(lambda: any(size >= MiB for size in upload_files(server).values()), what="bytes on disk")

    client = restart(server)
    sock.close()
    assert client.request("HEAD", f"/v2/team/app/blobs/{digest(blob)}").status == 404
    assert storage_problems(server) == []
    assert client.pull_image("team/app", "v1") and client.pull_image("team/app", before)

    client.push_blob("team/app", blob)
    assert client.request("GET", f"/v2/team/app/blobs/{digest(blob)}").body == blob
    assert storage_problems(server) == []
    assert scrub_problems(server) == []


def test_it_resumes_a_chunked_upload_killed_inside_a_chunk(start_registry) -> None:
    server = start_registry()
    client = Registry(server.host)
    blob = os.urandom(6 * MiB)
    location = client.request("POST", "/v2/team/app/blobs/uploads/").header("Location")
    first = client.request("PATCH", location, blob[:MiB], {"Content-Range": f"0-{MiB - 1}",
                                                           "Content-Type": "application/octet-stream"})
    assert first.status == 202
    sock = send_partial(server.host, "PATCH", location,
                        {"Content-Length": str(4 * MiB), "Content-Range": f"{MiB}-{5 * MiB - 1}",
                         "Content-Type": "application/octet-stream"}, blob[MiB:MiB + 2 * MiB])
    wait_until(lambda: max(upload_files(server).values()) >= 2 * MiB, what="the second chunk on disk")

    client = restart(server)
    sock.close()
    status = client.request("GET", location)
    # The spec also allows BLOB_UPLOAD_UNKNOWN here; this registry keeps sessions in storage and
    # the database precisely so that they survive, so it must report the offset.
    assert status.status == 204, status.body
    offset = int(status.header("Range").split("-")[1]) + 1
    assert MiB <= offset <= 5 * MiB
    assert offset == max(upload_files(server).values())  # what it reports is what is stored
    assert storage_problems(server) == []

    rest = client.request("PATCH", location, blob[offset:], {"Content-Range": f"{offset}-{len(blob) - 1}",
                                                             "Content-Type": "application/octet-stream"})
    assert rest.status == 202, rest.body
    done = client.request("PUT", f"{location}?digest={digest(blob)}")
    assert done.status == 201, done.body
    assert client.request("GET", f"/v2/team/app/blobs/{digest(blob)}").body == blob
    assert storage_problems(server) == []
    assert scrub_problems(server) == []


def test_it_stores_nothing_of_a_manifest_put_killed_halfway(start_registry) -> None:
    server = start_registry()
    client = Registry(server.host)
    layer, config = os.urandom(64 * 1024), b'{"architecture":"amd64","os":"linux"}'
    client.push_blob("team/app", layer)
    client.push_blob("team/app", config)
    manifest = image_manifest(config, [layer])
    sock = send_partial(server.host, "PUT", "/v2/team/app/manifests/v1",
                        {"Content-Length": str(len(manifest)),
                         "Content-Type": "application/vnd.oci.image.manifest.v1+json"},
                        manifest[: len(manifest) // 2])
    time.sleep(0.5)  # the worker is now blocked reading the rest of the body

    client = restart(server)
    sock.close()
    assert client.request("GET", "/v2/team/app/manifests/v1").status == 404
    assert client.request("GET", f"/v2/team/app/manifests/{digest(manifest)}").status == 404
    assert storage_problems(server) == []
    put = client.request("PUT", "/v2/team/app/manifests/v1", manifest,
                         {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    assert put.status == 201
    assert client.pull_image("team/app", "v1")


def test_it_keeps_every_acknowledged_image_across_repeated_kills(start_registry) -> None:
    """Three kills, each with four uploads in flight right after an image was acknowledged: after
    every restart each acknowledged image still pulls, and storage agrees with the database."""
    server = start_registry()
    acknowledged: dict[str, str] = {}
    for round_ in range(3):
        client = Registry(server.host)
        socks = []
        for i in range(4):
            blob = os.urandom(4 * MiB)
            socks.append(send_partial(server.host, "POST", f"/v2/team/app/blobs/uploads/?digest={digest(blob)}",
                                      {"Content-Length": str(len(blob))}, blob[: (i + 1) * MiB - 1]))
        tag = f"r{round_}"
        acknowledged[tag], _ = client.push_image("team/app", tag, [os.urandom(512 * 1024)])
        client = restart(server)
        for sock in socks:
            sock.close()
        assert storage_problems(server) == []
        for tag_name, manifest_digest in acknowledged.items():
            assert client.pull_image("team/app", tag_name)
            assert client.request("HEAD", f"/v2/team/app/manifests/{tag_name}").header(
                "Docker-Content-Digest") == manifest_digest
    assert scrub_problems(server) == []
