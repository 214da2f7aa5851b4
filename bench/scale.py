"""The scale workload (issue 25): the same content at 1,000, 100,000 or 1,000,000 images in ours on
SQLite and on PostgreSQL, and in the CNCF registry, each measured as the issue's table measures it.

The shape (tests/support/scale_content.py): one repository with min(size, 100,000) tags beside
``size`` single-image repositories, every image sharing one base layer, every tenth image of the big
repository untagged, size/100 unreferenced blobs, 50 signatures for the referrers API. Ours is
loaded through the project's own queries (tests/support/scale_cli.py: COPY on PostgreSQL,
executemany on SQLite), then checked by ``manage.py scrub`` and a skopeo pull; the CNCF registry
gets the same images as its filesystem tree (bench/reference_tree.py), up to ``reference_size``
(its tree costs about 20 inodes an image: a million images do not fit this machine's filesystem).

Every figure is taken on an idle server but a machine others share: single requests are the median
of many, walks and collections are timed once. Collections come last (they change the content).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench import reference_tree
from bench.client import ACCEPT, Client
from bench.servers import Endpoint, Reference, pss_bytes
from regsite.config import DEFAULTS
from tests.support import scale_content as content
from tests.support.server import REPO, VENV_BIN, RegistryServer

UNTAGGED_EVERY = 10
REFERRERS = 50
PAGE = 100
REPEATS = 25  # single requests: the median of this many
WALK_BUDGET = 600.0  # seconds a walk of every page may take before it is stopped (and shown as "> budget")
RETENTION_RULE = '\n[[retention]]\nrepositories = "scale/big"\nkeep_last = 10\n'


@dataclass(frozen=True)
class Measure:
    key: str
    label: str
    unit: str


MEASURES = [
    Measure("load", "load the content", "s"),
    Measure("tags_walk", "walk every tags page of the big repository, n=100", "s"),
    Measure("catalog_walk", "walk the catalog, n=100", "s"),
    Measure("tags_page", "tags page, n=100, first / middle of the big repository", "ms"),
    Measure("catalog_page", "catalog page, n=100, first / middle", "ms"),
    Measure("get_cold", "manifest GET by tag, big repository, each tag's first read (cold caches)", "ms"),
    Measure("get_tag", "manifest GET by tag, big repository", "ms"),
    Measure("get_digest", "manifest GET by digest, big repository", "ms"),
    Measure("head_tag", "manifest HEAD by tag, big repository", "ms"),
    Measure("get_small", "manifest GET by tag, a single-image repository", "ms"),
    Measure("referrers", "referrers page (50 signatures)", "ms"),
    Measure("ui_home", "UI: overview", "ms"),
    Measure("ui_recent", "UI: repositories sort=recent", "ms"),
    Measure("ui_names", "UI: repositories by name, page 1 / page 500", "ms"),
    Measure("ui_tags", "UI: big repository, tag page 1", "ms"),
    Measure("ui_manifest", "UI: a manifest", "ms"),
    Measure("retention", "retention dry run (keep_last 10 of the big repository): peak RSS growth", "MiB"),
    Measure("gc_dry", "garbage collection --delete-untagged, dry run", "s"),
    Measure("gc", "garbage collection --delete-untagged", "s"),
    Measure("gc_pulls", "manifest GETs during that collection: p50 / p99", "ms"),
    Measure("idle_pss", "idle PSS of the server (master + 2 workers)", "MiB"),
]


@dataclass
class Figures:
    values: dict[str, str] = field(default_factory=dict)  # key -> as shown ("12.3", "4.1 / 4.3", "> 600")
    numbers: dict[str, float] = field(default_factory=dict)  # key -> the first figure, for the JSON record

    def set(self, key: str, *numbers: float, over: bool = False) -> None:
        shown = " / ".join(_num(n) for n in numbers)
        self.values[key] = f"> {shown}" if over else shown
        self.numbers[key] = numbers[0]


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def shape(size: int) -> content.Shape:
    return content.Shape.of_size(size, untagged_every=UNTAGGED_EVERY, orphans=size // 100, referrers=REFERRERS)


# -- requests ---------------------------------------------------------------------------------------

def _median_ms(client: Client, paths: list[str], method: str = "GET", warm: bool = True) -> float:
    """The median of the requests, each made once before (``warm``): after a million images' load,
    a row's first read is the disk's time, not the statement's ("get_cold" keeps that figure)."""
    for path in paths if warm else ():
        client.call(method, path, headers={"Accept": ACCEPT})
    times = []
    for path in paths:
        started = time.perf_counter()
        client.call(method, path, headers={"Accept": ACCEPT})
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _walk(client: Client, path: str, budget: float = WALK_BUDGET) -> tuple[float, int, bool]:
    """Follow the Link headers from ``path``: (seconds, entries, whether the budget stopped it)."""
    started, entries = time.perf_counter(), 0
    while path:
        response, body = client.call("GET", path)
        listed = json.loads(body)
        entries += len(listed.get("tags") or listed.get("repositories") or [])
        link = response.getheader("Link") or ""
        path = link[1:link.index(">")] if link.startswith("<") else ""
        if time.perf_counter() - started > budget:
            return budget, entries, True
    return time.perf_counter() - started, entries, False


def _api(client: Client, size: int, figures: Figures, ours: bool) -> None:
    big, n = content.BIG, min(size, 100_000)
    rng = random.Random(25)
    tagged = [i for i in (rng.randrange(n) for _ in range(REPEATS * 4)) if i % UNTAGGED_EVERY != UNTAGGED_EVERY - 1]
    picks, cold = tagged[:REPEATS], tagged[REPEATS:REPEATS * 2]
    seconds, entries, over = _walk(client, f"/v2/{big}/tags/list?n={PAGE}")
    figures.set("tags_walk", seconds, over=over)
    seconds, entries, over = _walk(client, f"/v2/_catalog?n={PAGE}")
    figures.set("catalog_walk", seconds, over=over)
    middle = content.big_tag(n // 2)
    figures.set("tags_page", _median_ms(client, [f"/v2/{big}/tags/list?n={PAGE}"] * REPEATS),
                _median_ms(client, [f"/v2/{big}/tags/list?n={PAGE}&last={middle}"] * REPEATS))
    half = content.small_repository(size // 2)
    figures.set("catalog_page", _median_ms(client, [f"/v2/_catalog?n={PAGE}"] * REPEATS),
                _median_ms(client, [f"/v2/_catalog?n={PAGE}&last={half}"] * REPEATS))
    figures.set("get_cold", _median_ms(client, [f"/v2/{big}/manifests/{content.big_tag(i)}" for i in cold], warm=False))
    figures.set("get_tag", _median_ms(client, [f"/v2/{big}/manifests/{content.big_tag(i)}" for i in picks]))
    digests = [content.image(big, content.big_tag(i), i).digest for i in picks]
    figures.set("get_digest", _median_ms(client, [f"/v2/{big}/manifests/{d}" for d in digests]))
    figures.set("head_tag", _median_ms(client, [f"/v2/{big}/manifests/{content.big_tag(i)}" for i in picks], "HEAD"))
    small = [content.small_repository(rng.randrange(size)) for _ in range(REPEATS)]
    figures.set("get_small", _median_ms(client, [f"/v2/{name}/manifests/latest" for name in small]))
    if ours:
        subject = content.image(big, content.big_tag(0), 0).digest
        figures.set("referrers", _median_ms(client, [f"/v2/{big}/referrers/{subject}"] * REPEATS))


def _ui(client: Client, figures: Figures) -> None:
    big = content.BIG
    # Page 500 of the repositories by name, by its cursor: the 24,950th name ("scale/big" sorts first).
    page_500 = content.small_repository(499 * 50 - 2)
    pages = {"ui_home": ["/ui/"], "ui_recent": ["/ui/repositories/?sort=recent"],
             "ui_names": ["/ui/repositories/", f"/ui/repositories/?after={page_500}"], "ui_tags": [f"/ui/r/{big}/"],
             "ui_manifest": [f"/ui/r/{big}/-/manifests/{content.big_tag(42)}"]}
    for path in [p for paths in pages.values() for p in paths]:
        client.call("GET", path, expect=(200, 404))  # the first view of a big registry counts its totals
    for key, paths in pages.items():
        figures.set(key, *[_median_ms(client, [path] * 9) for path in paths])


# -- ours -------------------------------------------------------------------------------------------

def _scale_cli(server: RegistryServer, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run([str(VENV_BIN / "python"), "-m", "tests.support.scale_cli", *args], cwd=REPO,
                          env=env or server.env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"scale_cli {args[0]} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _peak_rss_mib(command: list[str], env: dict[str, str]) -> float:
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise RuntimeError(f"{' '.join(command[-2:])} failed: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
    return usage.ru_maxrss / 1024


def _retention_growth(server: RegistryServer) -> float:
    config = server.workdir / "retention.toml"
    config.write_text((server.workdir / "config.toml").read_text() + RETENTION_RULE)
    env = {**server.env(), "SVC_CONFIG": str(config)}
    manage = [str(VENV_BIN / "python"), str(REPO / "manage.py")]
    baseline = _peak_rss_mib([*manage, "check"], env)
    return _peak_rss_mib([*manage, "retention", "--dry-run"], env) - baseline


def _verify(server: RegistryServer, scratch: Path, scrub: bool) -> None:
    """scrub finds every blob whole; skopeo pulls an image of the big repository and of a small one."""
    scrubbed = subprocess.run([str(VENV_BIN / "python"), str(REPO / "manage.py"), "scrub"], cwd=REPO,
                              env=server.env(), capture_output=True, text=True) if scrub else None
    if scrubbed is not None and scrubbed.returncode != 0:
        raise RuntimeError(f"scrub found problems after loading: {scrubbed.stdout[-2000:]}{scrubbed.stderr[-2000:]}")
    for reference in (f"{content.BIG}:{content.big_tag(0)}", f"{content.small_repository(0)}:latest"):
        out = scratch / f"pulled-{reference.replace('/', '_').replace(':', '_')}"
        done = subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                               f"docker://{server.host}/{reference}", f"oci:{out}:pulled"],
                              capture_output=True, text=True, env={**os.environ, "HOME": str(scratch)})
        if done.returncode != 0:
            raise RuntimeError(f"skopeo could not pull {reference}: {done.stderr[-2000:]}")
        shutil.rmtree(out)


class _Pulls:
    """Manifest GETs by tag of both kinds of repository, one after another, while the block runs
    (each also records a pull: a write the collector's transactions may make wait)."""

    def __init__(self, server: RegistryServer, size: int) -> None:
        self.server, self.size = server, size
        self.latencies: list[float] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "_Pulls":
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopping.set()
        self.thread.join()

    def _run(self) -> None:
        rng = random.Random(7)
        client = Client(Endpoint("ours", "127.0.0.1", self.server.port))
        tagged = min(self.size, 100_000)
        while not self.stopping.is_set():
            number = rng.randrange(tagged)
            number -= 1 if number % UNTAGGED_EVERY == UNTAGGED_EVERY - 1 else 0
            path = (f"/v2/{content.BIG}/manifests/{content.big_tag(number)}" if rng.random() < 0.5
                    else f"/v2/{content.small_repository(rng.randrange(self.size))}/manifests/latest")
            started = time.perf_counter()
            client.call("GET", path, headers={"Accept": ACCEPT})
            self.latencies.append((time.perf_counter() - started) * 1000)
        client.close()

    def percentiles(self) -> tuple[float, float]:
        if len(self.latencies) < 2:
            return (self.latencies or [0.0])[0], (self.latencies or [0.0])[0]
        cuts = statistics.quantiles(self.latencies, n=100)
        return cuts[49], cuts[98]


def load(server: RegistryServer, size: int) -> float:
    """The scale content of ``size`` into ``server``'s database and storage: the seconds it took."""
    loaded = _scale_cli(server, "load", "--size", str(size), "--untagged-every", str(UNTAGGED_EVERY),
                        "--orphans", str(size // 100), "--referrers", str(REFERRERS))
    seconds: float = loaded["seconds"]
    return seconds


def collect_dry(server: RegistryServer) -> tuple[float, float]:
    """A ``--delete-untagged`` dry run: its seconds and the collector's CPU seconds."""
    done = _scale_cli(server, "collect", "--delete-untagged", "--dry-run")
    return done["seconds"], done["cpu_seconds"]


def collect_with_pulls(server: RegistryServer, size: int) -> tuple[float, float, float, float]:
    """A deleting ``--delete-untagged`` collection while manifest GETs run one after another: its
    seconds, the collector's CPU seconds, and the GETs' p50 and p99 in ms."""
    with _Pulls(server, size) as pulls:
        done = _scale_cli(server, "collect", "--delete-untagged")
    return (done["seconds"], done["cpu_seconds"], *pulls.percentiles())


def measure_ours(size: int, workdir: Path, database_url: str | None, log: Callable[[str], None],
                 scrub: bool = True) -> Figures:
    figures = Figures()
    env = {"SVC_DATABASE_URL": database_url} if database_url else {}
    server = RegistryServer(workdir, env_overrides=env, workers=DEFAULTS["server"]["workers"])
    server.start(timeout=120)
    try:
        figures.set("load", load(server, size))
        log(f"loaded {shape(size).images:,} images in {figures.numbers['load']:.0f} s")
        _verify(server, workdir, scrub)
        log("scrub and skopeo pull: whole" if scrub else "skopeo pull: whole (no scrub)")
        client = Client(Endpoint("ours", "127.0.0.1", server.port), timeout=WALK_BUDGET + 60)
        _api(client, size, figures, ours=True)
        _ui(client, figures)
        figures.set("idle_pss", pss_bytes(server.pids()) / 2 ** 20)
        client.close()
        log("requests measured")
        figures.set("retention", _retention_growth(server))
        figures.set("gc_dry", collect_dry(server)[0])
        seconds, _cpu, p50, p99 = collect_with_pulls(server, size)
        figures.set("gc", seconds)
        figures.set("gc_pulls", p50, p99)
    finally:
        server.stop()
    return figures


# -- the CNCF registry ------------------------------------------------------------------------------

def measure_reference(size: int, workdir: Path, log: Callable[[str], None]) -> Figures:
    figures = Figures()
    started = time.perf_counter()
    images = reference_tree.write(workdir / "storage", shape(size))
    figures.set("load", time.perf_counter() - started)
    log(f"wrote {images} images as its filesystem tree in {time.perf_counter() - started:.0f} s")
    server = Reference(workdir)
    server.start(timeout=120)
    try:
        client = Client(server.endpoint, timeout=WALK_BUDGET + 60)
        _api(client, size, figures, ours=False)
        for _ in range(REPEATS):
            client.call("GET", f"/v2/{content.BIG}/manifests/{content.big_tag(0)}", headers={"Accept": ACCEPT})
        figures.set("idle_pss", pss_bytes(server.pids()) / 2 ** 20)
        client.close()
        log("requests measured")
        command = ["docker-registry", "garbage-collect", "--dry-run", "--delete-untagged", str(workdir / "config.yml")]
        started = time.perf_counter()
        try:
            subprocess.run(command, capture_output=True, timeout=WALK_BUDGET, check=True)
            figures.set("gc_dry", time.perf_counter() - started)
        except subprocess.TimeoutExpired:
            figures.set("gc_dry", WALK_BUDGET, over=True)
    finally:
        server.stop()
    return figures


def table(size: int, columns: dict[str, Figures]) -> str:
    """The issue's table: a row per measure, a column per side."""
    lines = [f"| measure (size {size:,}) | unit | " + " | ".join(columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for m in MEASURES:
        cells = [figures.values.get(m.key, "-") for figures in columns.values()]
        lines.append(f"| {m.label} | {m.unit} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(size: int, databases: list[str], reference_size: int, scratch: Path, log: Callable[[str], None],
        partial: Callable[[str], None] = lambda _table: None,
        scrub: bool = True) -> tuple[str, dict[str, dict[str, float]]]:
    """Every side at ``size``: the issue's table (Markdown) and the figures by side and measure;
    ``partial`` gets the table after each side (a run of hours may stop half way); without
    ``scrub`` the loaded blobs are not re-hashed (25 minutes at a million on this machine's disk)."""
    from tests.support.postgres import start_postgres

    columns: dict[str, Figures] = {}
    cluster = start_postgres() if "postgres" in databases else None
    try:
        for database in databases:
            label = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[database]
            url = cluster.new_database() if database == "postgres" and cluster else None
            log(f"scale {size:,}: ours on {label}")
            columns[label] = measure_ours(size, scratch / f"ours-{database}", url, lambda line: log(f"  {line}"),
                                          scrub)
            shutil.rmtree(scratch / f"ours-{database}", ignore_errors=True)
            partial(table(size, columns))
    finally:
        if cluster is not None:
            cluster.stop()
    if reference_size:
        log(f"scale {reference_size:,}: the CNCF registry")
        label = "CNCF 2.8" if reference_size == size else f"CNCF 2.8 at {reference_size:,}"
        columns[label] = measure_reference(reference_size, scratch / "reference", lambda line: log(f"  {line}"))
        shutil.rmtree(scratch / "reference", ignore_errors=True)
    made = shape(size)
    title = (f"{made.big_tags:,} tags in one repository beside {made.small:,} single-image repositories "
             f"({made.images:,} images)")
    return f"{title}\n\n{table(size, columns)}", {label: figures.numbers for label, figures in columns.items()}
