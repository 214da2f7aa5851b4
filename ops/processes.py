"""Process metrics of every gunicorn process, for /metrics in multiprocess mode.

prometheus_client's process collector describes only the process that answers the scrape, and in
multiprocess mode it is left out altogether, so CPU, memory and open files of the service were not
visible. At scrape time this reads /proc for the gunicorn master (the scraping worker's parent) and
each of its workers, labelled by pid and role: a few series per process, a bounded number.
"""
from __future__ import annotations

import os
from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def _children(parent: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and int(fields[1]) == parent:
                children.append(int(entry))
    return sorted(children)


def _boot_time() -> float:
    with open("/proc/stat", "rb") as fh:
        for line in fh:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    return 0.0


def _open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class ProcessesCollector:
    """CPU, resident memory, open file descriptors and start time of the master and its workers."""

    def collect(self) -> Iterator[Metric]:
        if not os.path.exists("/proc/self/stat"):
            return
        master = os.getppid()
        processes = [(master, "master")] + [(pid, "worker") for pid in _children(master)]
        cpu = CounterMetricFamily("process_cpu_seconds", "User and system CPU time of each gunicorn process.",
                                  labels=["pid", "role"])
        memory = GaugeMetricFamily("process_resident_memory_bytes", "Resident memory of each gunicorn process.",
                                   labels=["pid", "role"])
        fds = GaugeMetricFamily("process_open_fds", "Open file descriptors of each gunicorn process.",
                                labels=["pid", "role"])
        started = GaugeMetricFamily("process_start_time_seconds", "Start time of each gunicorn process "
                                    "since the epoch.", labels=["pid", "role"])
        boot = _boot_time()
        for pid, role in processes:
            fields = _stat(pid)
            if fields is None:
                continue  # exited between listing and reading
            labels = [str(pid), role]
            # Fields after the command: state is [0]; utime [11], stime [12], starttime [19], rss [21].
            cpu.add_metric(labels, (int(fields[11]) + int(fields[12])) / _TICKS)
            memory.add_metric(labels, int(fields[21]) * _PAGE)
            started.add_metric(labels, boot + int(fields[19]) / _TICKS)
            open_fds = _open_fds(pid)
            if open_fds is not None:
                fds.add_metric(labels, open_fds)
        yield from (cpu, memory, fds, started)
