"""A 1 GiB blob streams through gunicorn into storage while the server's memory stays flat.

The body is generated on the fly and hashed as it is sent; the server's memory is the summed PSS
of the gunicorn master and workers, sampled every 100 ms. Figures go to stdout (pytest -s) and to
tests/artifacts/memory.txt.
"""
from __future__ import annotations

import shutil
import statistics
import time
from typing import Iterator

import pytest

from tests.support.memory import MiB, PeakSampler, total_pss
from tests.support.rawhttp import Client, GeneratedStream, Reply
from tests.support.server import REPO, RegistryServer

pytestmark = pytest.mark.e2e

GiB = 1024 * MiB
GROWTH_LIMIT = 64 * MiB
OCTET = {"Content-Type": "application/octet-stream"}
ARTIFACT = REPO / "tests" / "artifacts" / "memory.txt"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    server = RegistryServer(tmp_path_factory.mktemp("streaming")).start()
    yield server
    server.stop()
    shutil.rmtree(server.workdir / "registry", ignore_errors=True)  # gigabytes nobody looks at


@pytest.fixture(scope="module")
def report() -> Iterator[list[str]]:
    lines: list[str] = []
    yield lines
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text("".join(f"{line}\n" for line in lines))


def warm_up(client: Client) -> None:
    """Exercise every upload path on every worker first, so lazy imports and caches are in the
    baseline and not counted as growth."""
    for _ in range(6):
        stream = GeneratedStream(4 * MiB)
        client.request("POST", f"/v2/warm/up/blobs/uploads/?digest={stream.digest_ahead()}",
                       body=stream, headers={**OCTET, "Content-Length": str(stream.total)})
        location = client.start_upload("warm/up")
        stream = GeneratedStream(4 * MiB)
        client.request("PATCH", location, body=stream, headers=OCTET, chunked=True)
        client.request("PUT", f"{location}?digest={stream.digest}", headers={"Content-Length": "0"})
        client.request("HEAD", f"/v2/warm/up/blobs/{stream.digest}")


def baseline(server: RegistryServer) -> int:
    samples = []
    for _ in range(5):
        samples.append(total_pss(server.pids()))
        time.sleep(0.1)
    return int(statistics.median(samples))


def upload_patch(client: Client, stream: GeneratedStream) -> Reply:
    location = client.start_upload("big/blob")
    patched = client.request("PATCH", location, body=stream, headers=OCTET, chunked=True)
    assert patched.status == 202, patched
    assert patched.header("Range") == f"0-{GiB - 1}"
    return client.request("PUT", f"{location}?digest={stream.digest}", headers={"Content-Length": "0"})


def upload_monolithic(client: Client, stream: GeneratedStream) -> Reply:
    digest = stream.digest_ahead()
    reply = client.request("POST", f"/v2/big/blob/blobs/uploads/?digest={digest}", body=stream,
                           headers={**OCTET, "Content-Length": str(GiB)})
    assert stream.digest == digest
    return reply


@pytest.mark.parametrize("mode", ["chunked PATCH + PUT", "monolithic POST"])
def test_it_streams_1_gib_with_bounded_memory(registry: RegistryServer, report: list[str], mode: str) -> None:
    client = Client(registry.host, timeout=300)
    warm_up(client)
    before = baseline(registry)
    stream = GeneratedStream(GiB)
    started = time.monotonic()
    with PeakSampler(registry.pids, interval=0.1) as sampler:
        done = (upload_patch if mode.startswith("chunked") else upload_monolithic)(client, stream)
    elapsed = time.monotonic() - started
    assert done.status == 201, done
    assert done.header("Docker-Content-Digest") == stream.digest

    head = client.request("HEAD", f"/v2/big/blob/blobs/{stream.digest}")
    assert head.status == 200
    assert head.header("Content-Length") == str(GiB)
    assert head.header("Docker-Content-Digest") == stream.digest

    growth = sampler.peak - before
    line = (f"{mode}: 1 GiB in {elapsed:.1f}s; server PSS baseline {before / MiB:.1f} MiB, "
            f"peak {sampler.peak / MiB:.1f} MiB, growth {growth / MiB:.1f} MiB "
            f"({len(sampler.samples)} samples, limit {GROWTH_LIMIT // MiB} MiB)")
    print(f"\n{line}")
    report.append(line)
    assert growth < GROWTH_LIMIT, line
