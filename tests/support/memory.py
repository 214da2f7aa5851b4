"""Memory of a process tree, as PSS (shared pages split between the processes sharing them).

PSS rather than RSS: gunicorn workers share the master's pages copy-on-write, and summing their RSS
would count those pages once per worker.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

MiB = 1024 * 1024


def pss_bytes(pid: int) -> int:
    """The process's proportional set size; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def total_pss(pids: list[int]) -> int:
    return sum(pss_bytes(pid) for pid in pids)


class PeakSampler:
    """Samples the summed PSS of ``pids()`` every ``interval`` seconds in a thread; keeps the peak."""

    def __init__(self, pids: Callable[[], list[int]], interval: float = 0.1) -> None:
        self._pids = pids
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.samples: list[int] = []

    def _run(self) -> None:
        # Listing the processes costs a subprocess; once a second is enough to see a new worker.
        pids, listed_at = self._pids(), time.monotonic()
        next_at = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - listed_at >= 1.0:
                pids, listed_at = self._pids(), time.monotonic()
            self.samples.append(total_pss(pids))
            next_at += self._interval
            self._stop.wait(max(next_at - time.monotonic(), 0))

    def __enter__(self) -> "PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(total_pss(self._pids()))

    @property
    def peak(self) -> int:
        return max(self.samples)
