"""Under gunicorn: a subject whose referrers carry megabytes of annotations each cannot make a listing
(API or UI) build a huge response: the list comes a page at a time (`Link: <...>; rel="next"`),
bounded by [registry] referrers_per_page and referrers_page_annotation_bytes, and walking every page
six times in parallel keeps the server's memory flat."""
from __future__ import annotations

import json
import re
import threading

import pytest

from bench.servers import process_tree, pss_bytes
from tests.faults.wire import OCI_MANIFEST, Registry, digest

pytestmark = pytest.mark.e2e
MiB = 1024 * 1024
NEXT = re.compile(r'^<([^>]+)>; rel="next"$')


def push_referrer(client: Registry, subject: tuple[str, bytes], config: bytes, note: str) -> str:
    body = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.example.note",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest(config), "size": 2},
        "layers": [{"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest(config), "size": 2}],
        "subject": {"mediaType": OCI_MANIFEST, "digest": subject[0], "size": len(subject[1])},
        "annotations": {"note": note},
    }).encode()
    reply = client.request("PUT", f"/v2/team/app/manifests/{digest(body)}", body, {"Content-Type": OCI_MANIFEST})
    assert reply.status == 201, reply.body
    return digest(body)


def walk(host: str, subject_digest: str) -> list[tuple[list[dict], int]]:
    """Every page of the listing, following rel="next": each page's descriptors and its size in bytes."""
    client, url, pages = Registry(host), f"/v2/team/app/referrers/{subject_digest}", []
    while url:
        reply = client.request("GET", url)
        assert reply.status == 200, reply.body
        pages.append((json.loads(reply.body)["manifests"], len(reply.body)))
        link = reply.headers.get("link", "")
        url = NEXT.match(link).group(1) if link else ""
        assert len(pages) < 20, "the next links do not end"
    return pages


def test_referrers_with_huge_annotations_come_in_pages_and_keep_memory_flat(start_registry) -> None:
    # Small pages, so that a dozen referrers take several of them under gunicorn.
    server = start_registry(SVC_REGISTRY_REFERRERS_PER_PAGE="5",
                            SVC_REGISTRY_REFERRERS_PAGE_ANNOTATION_BYTES="100000")
    client = Registry(server.host)
    subject = client.push_image("team/app", "v1", [b"layer"])
    config = b"{}"
    client.push_blob("team/app", config)
    huge = [push_referrer(client, subject, config, f"{n}:" + "x" * (3 * MiB + n)) for n in range(12)]
    medium = [push_referrer(client, subject, config, f"{n}:" + "y" * 40_000) for n in range(6)]

    pages = walk(server.host, subject[0])
    listed = [d for descriptors, _size in pages for d in descriptors]
    assert [d["digest"] for d in listed] == huge + medium  # each once, in the order pushed
    # 5, 5, then 2 huge ones (listed without their annotations) and 2 of 40 KB (a third would pass
    # 100,000 bytes), 2, 2.
    assert [len(descriptors) for descriptors, _size in pages] == [5, 5, 4, 2, 2]
    assert all("annotations" not in d for d in listed[:12])
    assert all(len(d["annotations"]["note"]) > 40_000 for d in listed[12:])
    assert max(size for _descriptors, size in pages) < 100_000 + 10_000

    pids = process_tree(server.process.pid)
    before = pss_bytes(pids)
    peak = [before]
    walked: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], pss_bytes(pids))
            done.wait(0.02)

    def ui_page() -> None:
        reply = Registry(server.host).request("GET", f"/ui/r/team/app/-/manifests/{subject[0]}")
        assert reply.status == 200 and len(reply.body) < 400_000
        walked.append(1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    readers = [threading.Thread(target=lambda: walked.append(len(walk(server.host, subject[0]))))
               for _ in range(6)] + [threading.Thread(target=ui_page) for _ in range(2)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    done.set()
    sampler.join()
    assert sorted(walked) == [1, 1] + [5] * 6
    assert peak[0] - before < 64 * MiB, (before / MiB, peak[0] / MiB)
