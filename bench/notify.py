"""notify-push: image pushes with webhook endpoints that never keep up, against the same pushes with none.

The hooked server has three [[notifications]] endpoints for every push: one answering 200 after a
second (so the sender is busy all the time, in one of the serving workers), one answering 500 at once
and one refusing connections (both backing off). A push only writes its outbox rows in its own
transaction, so the figures should match the server without endpoints: images per second, the p99
of one image push (blob POST + PUT, manifest PUT) and the server CPU per image.
"""
from __future__ import annotations

import os
import statistics
import time
import urllib.request

from bench.client import EMPTY_JSON, Client, tiny_manifest
from bench.parallel import run_parallel
from bench.workloads import Figure, Side, Sizes, Workload
from tests.support.receiver import Receiver
from tests.support.server import free_port

REPO = "bench/notify"
_receivers: list[Receiver] = []


def hooks_config() -> str:
    """The [[notifications]] of the hooked server; starts its receivers (stopped by stop_receivers)."""
    slow = Receiver(delay=1.0).start()
    failing = Receiver(status=500).start()
    _receivers.extend([slow, failing])
    dead = f"http://127.0.0.1:{free_port()}/hooks"
    entries = [("slow", slow.url), ("failing", failing.url), ("dead", dead)]
    return "\n".join(f'[[notifications]]\nname = "{name}"\nurl = "{url}"\nsecret = "bench"\n' for name, url in entries)


def stop_receivers() -> None:
    while _receivers:
        _receivers.pop().stop()


def _push_image(client: Client, item: tuple[str, bytes, str]) -> None:
    tag, layer, timings = item
    start = time.perf_counter()
    digest = client.push_small(REPO, layer)
    client.put_manifest(REPO, tag, tiny_manifest(tag, [(digest, len(layer))]))
    with open(timings, "a") as fh:  # one file per client process: appends of one line do not mix
        fh.write(f"{(time.perf_counter() - start) * 1000:.3f}\n")


def _prepare(side: Side, sizes: Sizes) -> None:
    client = Client(side.endpoint)
    client.push_small(REPO, EMPTY_JSON)
    client.close()


def _run(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    timings = side.scratch / f"notify-{i}"
    timings.mkdir(parents=True, exist_ok=True)
    noise = os.urandom(sizes.small_size)
    # run_parallel gives client k the items k, k + clients, ...: each client its own timings file.
    items = [(f"r{i}-{n}", f"{side.label}:{i}:{n}:".encode() + noise, str(timings / str(n % sizes.clients)))
             for n in range(sizes.small_blobs)]
    took = run_parallel(side.endpoint, _push_image, items, sizes.clients)
    latencies = sorted(float(line) for f in timings.iterdir() for line in f.read_text().split())
    if len(latencies) != len(items):
        raise RuntimeError(f"{side.label}: {len(latencies)} push timings for {len(items)} pushes")
    _check_hooks(side)
    return {"notify_images": len(items) / took, "notify_p50": statistics.median(latencies),
            "notify_p99": latencies[int(len(latencies) * 0.99) - 1], "ops": len(items)}


def _check_hooks(side: Side) -> None:
    """The hooked server really has events to send and endpoints failing, or the run means nothing."""
    with urllib.request.urlopen(f"http://{side.endpoint.netloc}/metrics", timeout=30) as response:
        text = response.read().decode()
    if "registry_notifications" not in text:
        if side.label == "ours hooks":
            raise RuntimeError("the hooked server shows no notification metrics")
        return
    values = _samples(text)
    if values.get(("registry_notifications_failed_total", "failing"), 0) < 1 or \
            values.get(("registry_notifications_failed_total", "dead"), 0) < 1:
        raise RuntimeError(f"{side.label}: the failing endpoints were never tried: {values}")


def _samples(text: str) -> dict[tuple[str, str], float]:
    found: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("registry_notifications_") and '{endpoint="' in line:
            name, rest = line.split("{", 1)
            endpoint = rest.split('"')[1]
            found[(name, endpoint)] = float(line.rsplit(" ", 1)[1])
    return found


def workload(sizes: Sizes) -> Workload:
    what = f"{sizes.small_blobs} image pushes, {sizes.clients} clients, 3 failing webhooks (vs none)"
    return Workload("notify-push", "notify", [
        Figure("notify_images", what, "images/s", True, 0.9),
        Figure("notify_p50", "  image push p50", "ms", False),
        Figure("notify_p99", "  image push p99", "ms", False, 1.25),
    ], _run, _prepare, rounds=2, op="image push")

