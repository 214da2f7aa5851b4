"""How many request threads of this worker may wait on upstreams at once.

A pull that needs its upstream (a miss, a tag to confirm, a blob another request is fetching) holds
one of its cache's ``max_concurrent_fetches`` slots and one of the worker's, which has half of its
request threads (``settings.REGISTRY_PROXY_WORKER_FETCHES``) whatever the caches' figures add up to.
Without a free slot the pull is refused at once, 503 with Retry-After, rather than take a thread
that pulls of other repositories need. The counts are this process's own on purpose: what they
protect is this process's threads.
"""
from __future__ import annotations

import threading

from django.conf import settings

from registry.proxy import metrics
from registry.proxy.mirrors import Mirror
from registry.services.exceptions import UpstreamUnavailable

RETRY_AFTER = 5

_lock = threading.Lock()
_semaphores: dict[tuple[str, int], threading.BoundedSemaphore] = {}


def _semaphore(prefix: str, size: int) -> threading.BoundedSemaphore:
    with _lock:
        found = _semaphores.get((prefix, size))
        if found is None:
            found = _semaphores[(prefix, size)] = threading.BoundedSemaphore(size)
        return found


class Slot:
    """Held while a request thread waits on the upstream; ``release`` may be called more than once."""

    def __init__(self, held: list[threading.BoundedSemaphore]) -> None:
        self._held = held
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held, []
        for semaphore in held:
            semaphore.release()


def take(mirror: Mirror) -> Slot:
    """A slot for a pull through ``mirror``; UpstreamUnavailable (503) when none is free."""
    own = _semaphore(mirror.prefix, mirror.max_fetches)
    worker = _semaphore("", settings.REGISTRY_PROXY_WORKER_FETCHES)
    if own.acquire(blocking=False):
        if worker.acquire(blocking=False):
            return Slot([own, worker])
        own.release()
        why = (f"{settings.REGISTRY_PROXY_WORKER_FETCHES} pulls through this worker's caches already wait on "
               "their upstreams (half its [server] threads)")
    else:
        why = (f"{mirror.max_fetches} pulls through this worker already wait on the upstream {mirror.upstream} "
               f"(max_concurrent_fetches of [[proxy]] {mirror.prefix})")
    metrics.BUSY.labels(mirror.prefix).inc()
    raise UpstreamUnavailable(f"{why}; retry later", RETRY_AFTER)
