"""Garbage collection against the size of the registry (issue 25's must-show 3): the scale content
(bench/scale.py) at each size, in ours on SQLite and on PostgreSQL, then a ``--delete-untagged``
collection dry and real, the real one while manifest GETs run; sizes alternate round by round so
the machine's load falls on each alike.

    .venv/bin/python -m bench.gc_scale                          # 10,000 and 100,000, both databases
    .venv/bin/python -m bench.gc_scale --sizes 1000,10000 --databases sqlite --rounds 2

Each collection examines every manifest and blob of the registry and removes about size/10 untagged
images and size/100 unreferenced blobs with their files, so ten times the size is ten times the
work: the table gives each size's seconds and, per database, the ratio of the largest size to the
smallest (the issue asks for at most 10 from 10,000 to 100,000) with the GETs' p99 (under 250 ms).
Each collection's CPU seconds (its process's) are shown and compared too: they leave out its pauses
for writers and its waits for the disk, which move its seconds by half from one run to the next on a
shared machine, so their ratio tells whether the work grows faster than the size. On SQLite the
database's work is in them; on PostgreSQL it is the server's, and not.
Between the load and the collections the disk is written back and left to settle (``settle_disk``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import report, scale
from regsite.config import DEFAULTS
from tests.support.server import RegistryServer

OUT = Path(__file__).resolve().parent / "out"
LABELS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


@dataclass(frozen=True)
class Run:
    database: str
    size: int
    load: float
    dry: float
    dry_cpu: float
    collect: float
    collect_cpu: float
    p50: float
    p99: float


def measure(database: str, size: int, workdir: Path, database_url: str | None) -> Run:
    server = RegistryServer(workdir, env_overrides={"SVC_DATABASE_URL": database_url} if database_url else {},
                            workers=DEFAULTS["server"]["workers"])
    server.start(timeout=120)
    try:
        loaded = scale.load(server, size)
        settle_disk()
        dry, dry_cpu = scale.collect_dry(server)
        seconds, cpu, p50, p99 = scale.collect_with_pulls(server, size)
    finally:
        server.stop()
    return Run(database, size, loaded, dry, dry_cpu, seconds, cpu, p50, p99)


def settle_disk(quiet: float = 5.0, at_most: float = 120.0) -> None:
    """Write back what the load left dirty, and wait until the disk has been quiet for a while
    (``/proc/pressure/io``'s 10 s average under ``quiet`` %, at most ``at_most`` seconds): a
    100,000-image load leaves 200,000 files and a 350 MB database to write back, and a collection
    started at once measured that writeback (its deletions waited behind it), ten times more of it
    at the bigger size. The previous size's tree, deleted just before, is written back meanwhile too."""
    os.sync()
    deadline = time.monotonic() + at_most
    while time.monotonic() < deadline and _io_pressure() >= quiet:
        time.sleep(1)


def _io_pressure() -> float:
    try:
        line = Path("/proc/pressure/io").read_text().splitlines()[0]  # "some avg10=... avg60=..."
    except (OSError, IndexError):
        return 0.0  # no pressure stall information: nothing to wait for
    return float(line.split()[1].split("=")[1])


def table(runs: list[Run]) -> str:
    lines = ["| database | images | load (s) | dry run (s) | its CPU (s) | collection (s) | its CPU (s) "
             "| GETs during it, p50 / p99 (ms) |", "|---|---|---|---|---|---|---|---|"]
    for run in sorted(runs, key=lambda r: (r.database, r.size)):
        images = scale.shape(run.size).images
        lines.append(f"| {LABELS[run.database]} | {images:,} | {run.load:.1f} | {run.dry:.2f} | {run.dry_cpu:.2f} "
                     f"| {run.collect:.2f} | {run.collect_cpu:.2f} | {run.p50:.1f} / {run.p99:.1f} |")
    lines += ["", "| database | sizes | dry run, largest / smallest: seconds / CPU "
              "| collection, largest / smallest: seconds / CPU | worst p99 (ms) |", "|---|---|---|---|---|"]
    for database in dict.fromkeys(run.database for run in runs):
        mine = [run for run in runs if run.database == database]
        small, big = min(run.size for run in mine), max(run.size for run in mine)
        lines.append(f"| {LABELS[database]} | {small:,} -> {big:,} "
                     f"| {_ratio(mine, 'dry', big, small):.1f} / {_ratio(mine, 'dry_cpu', big, small):.1f} "
                     f"| {_ratio(mine, 'collect', big, small):.1f} / {_ratio(mine, 'collect_cpu', big, small):.1f} "
                     f"| {max(r.p99 for r in mine):.1f} |")
    return "\n".join(lines)


def _ratio(runs: list[Run], figure: str, big: int, small: int) -> float:
    """The median of ``figure`` at ``big`` over its median at ``small``."""
    def median(size: int) -> float:
        return statistics.median(getattr(run, figure) for run in runs if run.size == size)

    return median(big) / median(small)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gc_scale", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated scale sizes (bench/scale.py)")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=1, help="each size this many times, alternated")
    args = parser.parse_args(argv)
    from tests.support.postgres import start_postgres

    sizes = [int(size) for size in args.sizes.split(",")]
    databases = args.databases.split(",")
    scratch = Path(tempfile.mkdtemp(prefix="registry-bench-gc-"))
    cluster = start_postgres() if "postgres" in databases else None
    runs: list[Run] = []
    try:
        for round_number in range(args.rounds):
            for database in databases:
                for size in sizes if round_number % 2 == 0 else sizes[::-1]:
                    url = cluster.new_database() if database == "postgres" and cluster else None
                    workdir = scratch / f"{database}-{size}-{round_number}"
                    runs.append(measure(database, size, workdir, url))
                    shutil.rmtree(workdir, ignore_errors=True)
                    print(f"  {LABELS[database]} {size:,}: {runs[-1]}", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    markdown = table(runs)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "gc-scale.md").write_text(f"{markdown}\n\nmachine: {json.dumps(report.machine())}\n")
    print(f"\n{markdown}\n\nwritten to {OUT / 'gc-scale.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
