"""What an upstream answered 404, remembered for the cache's ``negative_ttl_seconds``.

Remembered per process, on purpose: it only spares the upstream's rate limit (each worker of each
replica asks once per TTL) and is never needed for a right answer, while a shared one would cost a
database write per miss, which is what a reader asking for random digests controls. Bounded: the
least recently remembered go first.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

from registry.proxy import metrics
from registry.proxy.mirrors import Mirror

MAX_ENTRIES = 10_000

_lock = threading.Lock()
_until: OrderedDict[tuple[str, str, str, str], float] = OrderedDict()


def remembered(mirror: Mirror, kind: str, name: str, reference: str) -> bool:
    """Whether the upstream answered 404 for ``kind`` (manifest, blob) ``name``/``reference`` lately."""
    if mirror.negative_ttl <= 0:
        return False
    key = (mirror.prefix, kind, name, reference)
    with _lock:
        until = _until.get(key)
        if until is None:
            return False
        if until <= time.monotonic():
            del _until[key]
            return False
    metrics.NEGATIVE_HITS.labels(mirror.prefix, kind).inc()
    return True


def remember(mirror: Mirror, kind: str, name: str, reference: str) -> None:
    if mirror.negative_ttl <= 0:
        return
    key = (mirror.prefix, kind, name, reference)
    with _lock:
        _until[key] = time.monotonic() + mirror.negative_ttl
        _until.move_to_end(key)
        while len(_until) > MAX_ENTRIES:
            _until.popitem(last=False)


def forget_all() -> None:
    with _lock:
        _until.clear()
