"""Idle memory: the PSS of our gunicorn master and of each worker, just started and after a few
requests of every kind a quiet registry gets (probes, a scrape, the version check, a tag list, a UI
page), beside the CNCF registry's in the same states; median of a few readings.

Run it with the interpreter of the virtualenv to measure: ``.venv/bin/python -m bench.idle_memory``,
or one holding the runtime dependencies only, as the container image does (``python -m venv /tmp/rt
&& /tmp/rt/bin/pip install -e .``).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench.client import MIB
from bench.servers import Ours, Reference, pss_bytes

SETTLE = 3.0  # seconds for the workers to finish starting (post_worker_init's threads)
QUIET_TRAFFIC = ("/health", "/ready", "/metrics", "/v2/", "/v2/_catalog", "/v2/team/app/tags/list", "/ui/")


def _request_each(base: str, rounds: int = 6) -> None:
    """Every path, several times, so that each worker has most likely served each."""
    for _ in range(rounds):
        for path in QUIET_TRAFFIC:
            try:
                with urllib.request.urlopen(base + path, timeout=10) as response:
                    response.read()
            except urllib.error.HTTPError:
                pass  # a 404 of a repository that does not exist is traffic too


def _median_pss(pids: list[int], readings: int = 5, field: str = "Pss") -> int:
    values = []
    for _ in range(readings):
        values.append(pss_bytes(pids, field))
        time.sleep(0.2)
    return int(statistics.median(values))


def measure_ours(workdir: Path, database_url: str = "") -> dict[str, list[float]]:
    ours = Ours(workdir / "ours")
    if database_url:
        ours.server.env_overrides["SVC_DATABASE_URL"] = database_url
    ours.start()
    try:
        time.sleep(SETTLE)
        master = [pid for pid in ours.pids() if pid not in ours.worker_pids()]
        states = {}
        for state in ("started", "after requests"):
            if state == "after requests":
                _request_each(f"http://127.0.0.1:{ours.server.port}")
                time.sleep(1)
            states[state] = [_median_pss(master) / MIB] + [_median_pss([pid]) / MIB for pid in ours.worker_pids()]
            states[state + ", anonymous"] = [_median_pss(ours.pids(), field="Pss_Anon") / MIB]
        return states
    finally:
        ours.stop()


def measure_reference(workdir: Path) -> dict[str, float]:
    reference = Reference(workdir / "reference")
    reference.start()
    try:
        time.sleep(SETTLE)
        assert reference.process is not None
        pids = [reference.process.pid]
        figures = {"started": _median_pss(pids) / MIB, "started, anonymous": _median_pss(pids, field="Pss_Anon") / MIB}
        _request_each(f"http://127.0.0.1:{reference.port}")
        time.sleep(1)
        return {**figures, "after requests": _median_pss(pids) / MIB,
                "after requests, anonymous": _median_pss(pids, field="Pss_Anon") / MIB}
    finally:
        reference.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="", help="ours on this database (an empty one; "
                        "scripts/with-postgres.sh sets SVC_DATABASE_URL) instead of SQLite in its directory")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as scratch:
        ours = measure_ours(Path(scratch), args.database_url)
        reference = measure_reference(Path(scratch))
    print(f"interpreter: {sys.executable}")
    print("| state | ours: master | ours: each worker | ours: total | CNCF registry |")
    print("|---|---|---|---|---|")
    for state in ("started", "after requests"):
        master, *workers = ours[state]
        print(f"| {state} | {master:.1f} MiB | {' / '.join(f'{w:.1f}' for w in workers)} MiB | "
              f"{master + sum(workers):.1f} MiB | {reference[state]:.1f} MiB |")
    # A library's pages are split with every process on the machine that maps them (other Python
    # programs, another docker-registry): the anonymous memory alone is the tree's own.
    for state in ("started, anonymous", "after requests, anonymous"):
        print(f"| {state} | | | {ours[state][0]:.1f} MiB | {reference[state]:.1f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
