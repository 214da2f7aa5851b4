"""replicate: our replication of an image set against ``skopeo sync`` of the same set between the
same two registries; replicate-push: image pushes with an event replication policy on, against none.

``replicate``: the source is ours, holding 5 images (two layers each, ``replication_bytes`` in all);
the destination a CNCF registry whose data is wiped before every run. One side is ``manage.py
replicate`` of a manual policy (the server runs it: its runner reads the blobs from its own store),
the other ``skopeo sync --all --preserve-digests`` from our registry to the same destination. Both
are timed from the command's start to its end, and each run's result is checked at the destination
(every tag, the same digests) or the run fails.

``replicate-push``: as notify-push, the pushes of small images by 8 clients; one server has an event
policy replicating every push to a CNCF registry (so each push writes an item and the runner copies
it, inside the same server, meanwhile), the other has none.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Callable

from bench import notify
from bench.client import Client
from bench.workloads import MIB, Figure, Side, Sizes, Workload
from tests.support.server import free_port
from tests.support.upstreams import OCI_CONFIG, OCI_LAYER, OCI_MANIFEST, Distribution

OURS, SKOPEO = "ours replicate", "skopeo sync"
MIRRORED, PAUSED, PLAIN = "ours replicating", "ours policy on", "ours no policy"
REPO, TAGS = "bench/set", [f"img-{n}" for n in range(5)]
_destinations: dict[str, Distribution] = {}


def _destination(key: str, workdir: Path) -> Distribution:
    if key not in _destinations:
        _destinations[key] = Distribution(workdir, port=free_port())
    return _destinations[key]


def source_config(scratch: Path) -> str:
    """The [[replication]] policy of the replicate workload's source (its destination's port is
    chosen now, the destination started by the first run)."""
    dest = _destination("sync", scratch / "replicate-dest")
    return (f'[[replication]]\nname = "bench"\nurl = "{dest.url}"\ntrigger = "manual"\n'
            f'repositories = ["{REPO}"]\n')


def event_config(scratch: Path, live: bool) -> str:
    """An event policy for every push of the push workloads: to a CNCF registry (``live``), or to
    a port nothing listens on (the items are written, the runner backs off: the push path alone)."""
    url = _destination("event", scratch / "replicate-event-dest").start().url if live \
        else f"http://127.0.0.1:{free_port()}"
    return f'[[replication]]\nname = "mirror"\nurl = "{url}"\nrepositories = ["{notify.REPO}"]\n'


def stop_destinations() -> None:
    while _destinations:
        _destinations.popitem()[1].stop()


def _prepare(side: Side, sizes: Sizes) -> None:
    """The image set in the source, once (both sides share the source)."""
    client = Client(side.endpoint)
    try:
        found, _ = client.call("HEAD", f"/v2/{REPO}/manifests/{TAGS[-1]}", expect=(200, 404))
        if found.status == 200:
            return
        per_layer = sizes.replication_bytes // (2 * len(TAGS))
        for tag in TAGS:
            layers = []
            for _ in range(2):
                data = os.urandom(per_layer)
                layers.append((client.push_small(REPO, data), len(data)))
            config = json.dumps({"architecture": "amd64", "os": "linux", "tag": tag}).encode()
            config_digest = client.push_small(REPO, config)
            manifest = json.dumps({
                "schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
                "layers": [{"mediaType": OCI_LAYER, "digest": d, "size": n} for d, n in layers]}).encode()
            client.put_manifest(REPO, tag, manifest)
    finally:
        client.close()


def _run(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    dest = _destinations["sync"]
    dest.stop()
    shutil.rmtree(dest.workdir / "storage", ignore_errors=True)
    dest.start()
    source = side.server.server
    started = time.perf_counter()
    if side.label == OURS:
        done = source.manage("replicate", "bench")
    else:
        done = subprocess.run(["skopeo", "sync", "--src", "docker", "--dest", "docker", "--all", "--preserve-digests",
                               "--src-tls-verify=false", "--dest-tls-verify=false",
                               f"{source.host}/{REPO}", f"127.0.0.1:{dest.port}/bench"],
                              capture_output=True, text=True, timeout=900)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{side.label} failed: {done.stdout[-1000:]} {done.stderr[-2000:]}")
    _same_digests(source.url, dest.url)
    return {"replicate_mibs": sizes.replication_bytes / MIB / took, "replicate_s": took}


def _same_digests(source: str, dest: str) -> None:
    for tag in TAGS:
        digests = [_digest(base, tag) for base in (source, dest)]
        if digests[0] is None or digests[0] != digests[1]:
            raise RuntimeError(f"{REPO}:{tag}: the destination has {digests[1]}, the source {digests[0]}")


def _digest(base: str, tag: str) -> str | None:
    request = urllib.request.Request(f"{base}/v2/{REPO}/manifests/{tag}", headers={"Accept": OCI_MANIFEST})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return "sha256:" + hashlib.sha256(response.read()).hexdigest()
    except OSError:
        return None


def _run_pushes(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    figures = notify._run(side, sizes, i)
    if side.label == MIRRORED:
        _check(side, lambda v: v.get("registry_replication_items_total", 0) > 0
               and v.get("registry_replication_pending") == 0, "the pushes were not replicated")
    elif side.label == PAUSED:
        _check(side, lambda v: v.get("registry_replication_pending", 0) > 0, "no item waits for the paused policy")
    return figures


def _check(side: Side, holds: Callable[[dict[str, float]], bool], problem: str) -> None:
    """What the side is about really happened (its items replicated, or waiting), or the run means nothing."""
    deadline = time.monotonic() + 120
    values: dict[str, float] = {}
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://{side.endpoint.netloc}/metrics", timeout=30) as response:
            text = response.read().decode()
        values = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if line.startswith("registry_replication_") and 'policy="mirror"' in line}
        if holds(values):
            return
        time.sleep(1.0)
    raise RuntimeError(f"{side.label}: {problem}: {values}")


def workloads(sizes: Sizes) -> list[Workload]:
    total = sizes.replication_bytes // MIB
    return [
        Workload("replicate", "repl", [
            Figure("replicate_mibs", f"replicate 5 images, {total} MiB, ours -> CNCF (vs skopeo sync)", "MiB/s",
                   True, 1.0),
            Figure("replicate_s", "  time to replicate the set", "s", False),
        ], _run, _prepare, rounds=2),
        Workload("replicate-push", "repl-push", [
            Figure("notify_images", f"{sizes.small_blobs} image pushes, {sizes.clients} clients, an event policy on "
                   "(its destination away: the push path) vs none", "images/s", True, 0.95),
            Figure("notify_p50", "  image push p50", "ms", False, 1.05),
            Figure("notify_p99", "  image push p99", "ms", False, 1.25),
        ], _run_pushes, notify._prepare, rounds=2, op="image push"),
        Workload("replicate-live", "repl-live", [
            Figure("notify_images", f"{sizes.small_blobs} image pushes, {sizes.clients} clients, each replicated "
                   "meanwhile by the same server on the same cores (vs no policy)", "images/s", True),
            Figure("notify_p50", "  image push p50", "ms", False),
            Figure("notify_p99", "  image push p99", "ms", False),
        ], _run_pushes, notify._prepare, rounds=2, op="image push"),
    ]
