"""The workloads of issue 6. Each ``run`` measures one server once and returns its figures.

A workload is run A B B A over a pair of sides (ours and the reference, or ours with a token and
ours anonymous); ``run_index`` differs between runs on one side so that every run pushes new data.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from bench.client import ACCEPT, EMPTY_DIGEST, EMPTY_JSON, MIB, BlobSource, Client, tiny_manifest
from bench import proxy, rollout
from bench.load import hammer
from bench.parallel import run_parallel
from bench.servers import Endpoint, pss_bytes
from tests.support.images import OCI_MANIFEST, Layout


@dataclass(frozen=True)
class Sizes:
    blob: int = 256 * MIB
    chunk: int = 16 * MIB
    small_blobs: int = 500
    small_size: int = 4096
    clients: int = 8
    connections: int = 16
    load_seconds: float = 10.0
    tags: int = 1000
    catalog_small: int = 1000
    catalog_large: int = 10000
    catalog_page: int = 1000
    list_repeats: int = 15
    image_layers: int = 5
    image_bytes: int = 200 * MIB
    memory_blob: int = 1024 * MIB
    s3_blob: int = 128 * MIB
    rollout_pullers: int = 300
    rollout_blob: int = 32 * MIB
    rollout_pushers: int = 100
    rollout_push_blob: int = 16 * MIB
    rollout_chunk: int = 4 * MIB
    rollout_rate: int = MIB  # bytes per second per client
    proxy_layers: int = 3
    proxy_layer: int = 32 * MIB
    proxy_upstream_rate: int = 100 * MIB  # bytes per second of an upstream across a network (bench/proxy.py)
    replication_bytes: int = 500 * MIB  # the image set of the replicate workload (bench/replicate.py)


QUICK = Sizes(blob=16 * MIB, chunk=4 * MIB, small_blobs=48, load_seconds=0.3, tags=60,
              catalog_small=60, catalog_large=150, catalog_page=50, list_repeats=5,
              image_bytes=5 * MIB, memory_blob=48 * MIB, s3_blob=16 * MIB, rollout_pullers=30, rollout_blob=4 * MIB,
              rollout_pushers=10, rollout_push_blob=2 * MIB, rollout_chunk=MIB, rollout_rate=2 * MIB,
              proxy_layer=2 * MIB, replication_bytes=10 * MIB)


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    ratio_target: float | None = None  # ours / other, same run
    ours_limit: float | None = None    # an absolute ceiling on our figure
    # Compared with another figure of our own side's runs (``versus``, shown as ``versus_label``)
    # instead of the same figure of the other side.
    versus: str | None = None
    versus_label: str = ""


@dataclass
class Side:
    label: str
    endpoint: Endpoint
    server: Any  # bench.servers.Ours or Reference: start/stop/pids
    scratch: Path
    seeded: int = 0  # catalog repositories pushed so far


Runner = Callable[[Side, Sizes, int], dict[str, float]]
Preparer = Callable[[Side, Sizes], None]


@dataclass
class Workload:
    name: str
    pair: str  # which two sides: "anon", "basic" or "bearer" (see bench.__main__)
    figures: list[Figure]
    run: Runner
    prepare: Preparer | None = None
    rounds: int = 1  # full runs repeat A B B A this many times: short, noisy workloads get 2
    op: str = "run"  # what the server CPU is divided by; a run returns "ops" unless it is one run


def _mib_per_s(size: int, seconds: float) -> float:
    return size / MIB / seconds


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# Blobs -------------------------------------------------------------------------------------------

def _push_mono(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    source = BlobSource(f"mono-{i}", sizes.blob)
    _ = source.digest  # hashed before the clock starts
    client = Client(side.endpoint)
    took = _timed(lambda: client.push_monolithic("bench/blobs", source))
    client.close()
    return {"push_mono": _mib_per_s(sizes.blob, took)}


def _push_chunked(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    source = BlobSource(f"chunked-{i}", sizes.blob)
    _ = source.digest
    client = Client(side.endpoint)
    took = _timed(lambda: client.push_chunked("bench/blobs", source, sizes.chunk))
    client.close()
    return {"push_chunked": _mib_per_s(sizes.blob, took)}


def _prepare_pull(side: Side, sizes: Sizes) -> None:
    client = Client(side.endpoint)
    client.push_monolithic("bench/pull", BlobSource("pull", sizes.blob))
    client.close()


def _pull(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    source = BlobSource("pull", sizes.blob)
    client = Client(side.endpoint)
    start = time.perf_counter()
    size, digest = client.pull_hashed("bench/pull", source.digest)
    took = time.perf_counter() - start
    client.close()
    if size != sizes.blob or digest != source.digest:
        raise RuntimeError(f"{side.label}: pulled {size} bytes with digest {digest}, not the blob pushed")
    return {"pull": _mib_per_s(size, took)}


def _push_small_job(client: Client, item: tuple[str, bytes]) -> None:
    client.push_small(item[0], item[1])


def _small_pushes(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    noise = os.urandom(sizes.small_size)
    items = [("bench/small", f"{i}:{n}:".encode() + noise[: sizes.small_size - 16].ljust(sizes.small_size - 16, b"x"))
             for n in range(sizes.small_blobs)]
    took = run_parallel(side.endpoint, _push_small_job, items, sizes.clients)
    return {"small_push": sizes.small_blobs / took, "ops": sizes.small_blobs}


# Manifests by tag ---------------------------------------------------------------------------------

MANIFEST_REPO = "bench/manifest"
MANIFEST_PATH = f"/v2/{MANIFEST_REPO}/manifests/latest"


def _prepare_manifest(side: Side, sizes: Sizes) -> None:
    client = Client(side.endpoint)
    client.push_small(MANIFEST_REPO, EMPTY_JSON)
    client.put_manifest(MANIFEST_REPO, "latest", tiny_manifest("latest"))
    client.call("GET", MANIFEST_PATH, headers={"Accept": ACCEPT})
    client.close()


def _manifest_load(prefix: str) -> Runner:
    def run(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
        figures: dict[str, float] = {}
        for method in ("GET", "HEAD"):
            result = hammer(side.endpoint, method, MANIFEST_PATH, {"Accept": ACCEPT},
                            connections=sizes.connections, duration=sizes.load_seconds)
            if result.errors:
                raise RuntimeError(f"{side.label}: {result.errors} failed {method} requests under load")
            key = f"{prefix}_{method.lower()}"
            figures |= {f"{key}_rps": result.rate, f"{key}_p50": result.p50_ms, f"{key}_p99": result.p99_ms}
            figures["ops"] = figures.get("ops", 0) + result.requests
        return figures

    return run


def _manifest_figures(prefix: str, label: str, rate_target: float, latency_target: float | None
                      ) -> list[Figure]:
    figures = []
    for method in ("GET", "HEAD"):
        key = f"{prefix}_{method.lower()}"
        figures += [
            Figure(f"{key}_rps", f"manifest {method} by tag{label}", "req/s", True, rate_target),
            Figure(f"{key}_p50", f"  {method} p50", "ms", False),
            Figure(f"{key}_p99", f"  {method} p99", "ms", False, latency_target),
        ]
    return figures


# Tags ---------------------------------------------------------------------------------------------

def _put_tag_job(client: Client, item: tuple[str, str, bytes]) -> None:
    client.put_manifest(item[0], item[1], item[2])


def _tags(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    repo = f"bench/tags-{i}"
    body = tiny_manifest("tags")
    client = Client(side.endpoint)
    client.push_small(repo, EMPTY_JSON)
    items = [(repo, f"t{n:05d}", body) for n in range(sizes.tags)]
    took = run_parallel(side.endpoint, _put_tag_job, items, sizes.clients)
    times = []
    for _ in range(sizes.list_repeats):
        start = time.perf_counter()
        listed = client.get_json(f"/v2/{repo}/tags/list")
        times.append(time.perf_counter() - start)
    client.close()
    if not isinstance(listed, dict) or len(listed.get("tags") or []) != sizes.tags:
        raise RuntimeError(f"{side.label}: tags list did not return the {sizes.tags} tags pushed")
    return {"tag_put": sizes.tags / took, "tags_list": statistics.median(times) * 1000}


# Catalog ------------------------------------------------------------------------------------------

CATALOG_BASE = "bench/catalog-base"


def _seed_job(client: Client, repo: str) -> None:
    if not client.mount(repo, EMPTY_DIGEST, CATALOG_BASE):
        client.push_small(repo, EMPTY_JSON)
    client.put_manifest(repo, "v1", tiny_manifest(repo))


def _seed_repositories(side: Side, sizes: Sizes, count: int) -> None:
    """Real pushes over HTTP, in parallel: a mount of one shared blob and a tiny manifest each."""
    client = Client(side.endpoint)
    client.push_small(CATALOG_BASE, EMPTY_JSON)
    client.close()
    repos = [f"catalog/r{n:05d}" for n in range(side.seeded, count)]
    run_parallel(side.endpoint, _seed_job, repos, sizes.clients)
    side.seeded = count


def _catalog_time(side: Side, sizes: Sizes) -> float:
    client = Client(side.endpoint)
    times = []
    for _ in range(sizes.list_repeats):
        start = time.perf_counter()
        listed = client.get_json(f"/v2/_catalog?n={sizes.catalog_page}")
        times.append(time.perf_counter() - start)
    client.close()
    if not isinstance(listed, dict) or len(listed.get("repositories") or []) != sizes.catalog_page:
        raise RuntimeError(f"{side.label}: catalog did not return {sizes.catalog_page} repositories")
    return statistics.median(times) * 1000


def _catalog_run(key: str) -> Runner:
    return lambda side, sizes, i: {key: _catalog_time(side, sizes)}


# skopeo -------------------------------------------------------------------------------------------

@lru_cache(maxsize=8)
def _image(root: Path, layers: int, total: int) -> Path:
    """An OCI layout with new random layers: skopeo, as root, remembers blobs it has pushed in a
    machine-wide cache and would mount them from an earlier run instead of uploading them."""
    if root.exists():
        shutil.rmtree(root)
    layout = Layout(root)
    manifest, _, _ = layout.image_manifest(layers=layers, layer_size=total // layers, seed=root.name)
    layout.tag("v1", OCI_MANIFEST, manifest)
    return root


def _skopeo(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    # Run i of each side copies the same image, built for that run only.
    image = _image(side.scratch.parent / f"image-{i}", sizes.image_layers, sizes.image_bytes)
    home = side.scratch / f"skopeo-{i}"
    home.mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(home)}
    target = f"docker://{side.endpoint.netloc}/bench/skopeo-{i}:v1"
    out = home / "out"

    def copy(*args: str) -> float:
        start = time.perf_counter()
        done = subprocess.run(["skopeo", "copy", "--quiet", *args], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{side.label}: skopeo copy failed: {done.stderr[-1500:]}")
        return time.perf_counter() - start

    took_in = copy("--dest-tls-verify=false", f"oci:{image}:v1", target)
    took_out = copy("--src-tls-verify=false", target, f"oci:{out}:v1")
    shutil.rmtree(home)
    return {"skopeo_in": took_in, "skopeo_out": took_out}


def _prepare_skopeo(side: Side, sizes: Sizes) -> None:
    if not shutil.which("skopeo"):
        raise RuntimeError("skopeo is missing: run scripts/install-test-deps.sh")


# Memory -------------------------------------------------------------------------------------------

def _memory(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    source = BlobSource(f"memory-{i}", sizes.memory_blob)
    _ = source.digest
    baseline = statistics.median(pss_bytes(side.server.pids()) for _ in range(5))
    peak = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], pss_bytes(side.server.pids()))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    client = Client(side.endpoint)
    try:
        client.push_monolithic("bench/memory", source)
    finally:
        done.set()
        sampler.join()
        client.close()
    return {"mem_peak": peak[0] / MIB, "mem_growth": (peak[0] - baseline) / MIB}


# On S3 (Ceph RGW): the same blob workloads, both registries in one bucket --------------------------

def _on_s3(runner: Runner) -> Runner:
    def run(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
        figures = runner(side, dataclasses.replace(sizes, blob=sizes.s3_blob), i)
        return {f"s3_{key}" if key not in ("ops",) else key: value for key, value in figures.items()}

    return run


def _prepare_s3_pull(side: Side, sizes: Sizes) -> None:
    _prepare_pull(side, dataclasses.replace(sizes, blob=sizes.s3_blob))


# Rollout ------------------------------------------------------------------------------------------

ROLLOUT_REPO = "bench/rollout"


def _prepare_rollout(side: Side, sizes: Sizes) -> None:
    source = BlobSource("rollout", sizes.rollout_blob)
    client = Client(side.endpoint)
    client.push_monolithic(ROLLOUT_REPO, source)
    client.push_small(ROLLOUT_REPO, EMPTY_JSON)
    client.put_manifest(ROLLOUT_REPO, "v1", tiny_manifest("rollout", [(source.digest, source.size)]))
    client.close()


def _rollout_figures(result: rollout.RolloutResult, prefix: str) -> dict[str, float]:
    figures = {f"{prefix}_failed": float(result.failed + result.health.failed + result.manifest.failed),
               f"{prefix}_pss": result.peak_pss / MIB}
    for name, probes in (("health", result.health), ("manifest", result.manifest)):
        figures |= {f"{prefix}_{name}_p99": probes.p99, f"{prefix}_{name}_max": probes.worst_after_warmup,
                    f"{prefix}_{name}_worst": probes.worst}
    return figures


def _health_path(side: Side) -> str:
    # The reference has no health endpoint of its own; its root answers 200 without any work.
    return "/health" if side.server.label == "ours" else "/"


def _rollout_pull(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    digest = BlobSource("rollout", sizes.rollout_blob).digest
    start = rollout.pullers(side.endpoint, f"/v2/{ROLLOUT_REPO}/blobs/{digest}", sizes.rollout_rate, digest)
    result = rollout.run(side.endpoint, side.server.pids, _health_path(side), f"/v2/{ROLLOUT_REPO}/manifests/v1",
                         sizes.rollout_pullers, start)
    return _rollout_figures(result, "rollout_pull")


def _rollout_push(side: Side, sizes: Sizes, i: int) -> dict[str, float]:
    start = rollout.pushers(side.endpoint, f"bench/rollout-push-{i}", sizes.rollout_push_blob, sizes.rollout_chunk,
                            sizes.rollout_rate)
    result = rollout.run(side.endpoint, side.server.pids, _health_path(side), f"/v2/{ROLLOUT_REPO}/manifests/v1",
                         sizes.rollout_pushers, start)
    return _rollout_figures(result, "rollout_push")


def _rollout_labels(prefix: str, what: str) -> list[Figure]:
    figures = []
    for name, label in (("health", "health probe"), ("manifest", "manifest GET")):
        figures += [
            Figure(f"{prefix}_{name}_p99", f"{what}: {label} p99 from {rollout.WARMUP:g} s", "ms", False, None, 250.0),
            Figure(f"{prefix}_{name}_max", f"  {label} max from {rollout.WARMUP:g} s", "ms", False, None, 1000.0),
            Figure(f"{prefix}_{name}_worst", f"  {label} max over the run", "ms", False, 1.5),
        ]
    return figures + [
        Figure(f"{prefix}_failed", "  failed transfers and probes", "count", False, None, 1.0),
        Figure(f"{prefix}_pss", "  peak PSS of the server tree", "MiB", False, None, 1024.0),
    ]


# The list -----------------------------------------------------------------------------------------

def workloads(sizes: Sizes) -> list[Workload]:
    from bench import notify, replicate

    page = sizes.catalog_page
    return [
        Workload("push-monolithic", "anon",
                 [Figure("push_mono", f"blob push {sizes.blob // MIB} MiB, monolithic", "MiB/s", True, 1.0)],
                 _push_mono, rounds=2),
        Workload("push-chunked", "anon",
                 [Figure("push_chunked", f"blob push {sizes.blob // MIB} MiB, {sizes.chunk // MIB} MiB chunks",
                         "MiB/s", True, 1.0)], _push_chunked, rounds=2),
        Workload("pull", "anon",
                 [Figure("pull", f"blob pull {sizes.blob // MIB} MiB, hashed", "MiB/s", True, 1.0)],
                 _pull, _prepare_pull, rounds=2),
        Workload("small-pushes", "anon",
                 [Figure("small_push", f"{sizes.small_blobs} x {sizes.small_size // 1024} KiB blob pushes, "
                         f"{sizes.clients} clients", "blobs/s", True, 1.0)], _small_pushes, rounds=2,
                 op="push"),
        Workload("manifest", "anon", _manifest_figures("anon", "", 1.0, 1.0),
                 _manifest_load("anon"), _prepare_manifest, op="request"),
        Workload("manifest-basic", "basic", _manifest_figures("basic", ", Basic auth", 2.0, None),
                 _manifest_load("basic"), _prepare_manifest, op="request"),
        Workload("manifest-bearer", "bearer",
                 _manifest_figures("bearer", ", Bearer token (vs our anonymous)", 0.9, None),
                 _manifest_load("bearer"), _prepare_manifest, op="request"),
        Workload("tags", "anon", [
            Figure("tag_put", f"{sizes.tags} tag PUTs, {sizes.clients} clients", "tags/s", True, 1.0),
            Figure("tags_list", f"tags list of {sizes.tags} tags", "ms", False, 1.0),
        ], _tags, rounds=2),
        Workload("catalog-small", "anon",
                 [Figure("catalog_small", f"catalog first {page} of {sizes.catalog_small} repositories",
                         "ms", False)], _catalog_run("catalog_small"),
                 lambda side, s: _seed_repositories(side, s, s.catalog_small)),
        Workload("catalog-large", "anon",
                 [Figure("catalog_large", f"catalog first {page} of {sizes.catalog_large} repositories",
                         "ms", False, 0.2)], _catalog_run("catalog_large"),
                 lambda side, s: _seed_repositories(side, s, s.catalog_large)),
        Workload("skopeo", "anon", [
            Figure("skopeo_in", f"skopeo copy in, {sizes.image_layers} layers {sizes.image_bytes // MIB} MiB",
                   "s", False),
            Figure("skopeo_out", "skopeo copy out", "s", False),
        ], _skopeo, _prepare_skopeo, rounds=2),
        Workload("s3-push-monolithic", "s3",
                 [Figure("s3_push_mono", f"S3: blob push {sizes.s3_blob // MIB} MiB, monolithic", "MiB/s", True, 1.0)],
                 _on_s3(_push_mono), rounds=2),
        Workload("s3-push-chunked", "s3",
                 [Figure("s3_push_chunked",
                         f"S3: blob push {sizes.s3_blob // MIB} MiB, {sizes.chunk // MIB} MiB chunks",
                         "MiB/s", True, 1.0)], _on_s3(_push_chunked), rounds=2),
        Workload("s3-pull", "s3",
                 [Figure("s3_pull", f"S3: blob pull {sizes.s3_blob // MIB} MiB, hashed (307 to the store)", "MiB/s",
                         True, 1.0)], _on_s3(_pull), _prepare_s3_pull, rounds=2),
        Workload("s3-small-pushes", "s3",
                 [Figure("s3_small_push", f"S3: {sizes.small_blobs} x {sizes.small_size // 1024} KiB blob pushes, "
                         f"{sizes.clients} clients", "blobs/s", True, 1.0)], _on_s3(_small_pushes), rounds=2,
                 op="push"),
        Workload("rollout-pull", "anon",
                 _rollout_labels("rollout_pull", f"{sizes.rollout_pullers} pulls of {sizes.rollout_blob // MIB} MiB "
                                 f"at {sizes.rollout_rate // MIB} MiB/s"), _rollout_pull, _prepare_rollout),
        Workload("rollout-push", "anon",
                 _rollout_labels("rollout_push", f"{sizes.rollout_pushers} chunked pushes of "
                                 f"{sizes.rollout_push_blob // MIB} MiB at {sizes.rollout_rate // MIB} MiB/s"),
                 _rollout_push, _prepare_rollout),
        Workload("proxy-cold", "proxy", [
            Figure("proxy_cold_paced", f"cold pull through the cache, {sizes.proxy_layers} x "
                   f"{sizes.proxy_layer // MIB} MiB, upstream at {sizes.proxy_upstream_rate // MIB} MiB/s",
                   "MiB/s", True),
            Figure("proxy_cold_paced", "  ours against a pull from that upstream directly", "MiB/s", True, 0.91,
                   versus="proxy_direct_paced", versus_label="upstream direct"),
            Figure("proxy_cold", "  the same, upstream unpaced on loopback", "MiB/s", True),
            Figure("proxy_cold", "  ours against a pull from that upstream directly", "MiB/s", True,
                   versus="proxy_direct", versus_label="upstream direct"),
        ], proxy.run_cold, rounds=2),
        Workload("proxy-cached", "proxy-local", [
            Figure("proxy_cached", f"cached pull, {sizes.proxy_layers} x {sizes.proxy_layer // MIB} MiB "
                   "(vs a pull of an ordinary repository)", "MiB/s", True, 0.95),
        ], proxy.run_cached, proxy.prepare_cached, rounds=2),
        Workload("memory", "anon", [
            Figure("mem_peak", f"peak PSS of the server tree, {sizes.memory_blob // MIB} MiB push", "MiB", False),
            Figure("mem_growth", "  PSS growth during that push", "MiB", False, None, 64.0),
        ], _memory),
        notify.workload(sizes),
        *replicate.workloads(sizes),
    ]
