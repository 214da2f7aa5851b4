"""Run jobs over N client processes, each with its own keep-alive connection, timed from a barrier.

Processes rather than threads: the client must not serialise on the GIL and throttle a fast server.
The clock starts when every process is connected and waiting, so forking is never measured.
"""
from __future__ import annotations

import multiprocessing
import time
from typing import Any, Callable, Sequence

from bench.client import Client
from bench.load import quiet_child
from bench.servers import Endpoint

Job = Callable[[Client, Any], None]


def _worker(endpoint: Endpoint, job: Job, items: Sequence[Any], barrier: Any, out: Any) -> None:
    quiet_child()
    client = Client(endpoint)
    try:
        barrier.wait()
        for item in items:
            job(client, item)
        out.send(None)
    except BaseException as exc:  # report any failure to the parent instead of dying silently
        out.send(f"{type(exc).__name__}: {exc}")
    finally:
        client.close()
        out.close()


def run_parallel(endpoint: Endpoint, job: Job, items: Sequence[Any], workers: int) -> float:
    """Seconds from the start signal until every item is done; raises if any job failed."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(workers + 1)
    shares = [items[i::workers] for i in range(workers)]
    pipes, procs = [], []
    for share in shares:
        receiver, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(endpoint, job, share, barrier, sender), daemon=True)
        proc.start()
        sender.close()
        pipes.append(receiver)
        procs.append(proc)
    failures = []
    try:
        barrier.wait(timeout=60)
        start = time.perf_counter()
        for receiver in pipes:
            try:
                result = receiver.recv()
            except EOFError:
                result = "client process died"
            if result is not None:
                failures.append(result)
        elapsed = time.perf_counter() - start
    except BaseException:  # interrupted: the clients must not outlive the servers they load
        for proc in procs:
            proc.terminate()
        raise
    for proc in procs:
        proc.join(timeout=10)
    if failures:
        raise RuntimeError(f"{endpoint.label}: {len(failures)} client(s) failed: {failures[0]}")
    return elapsed
