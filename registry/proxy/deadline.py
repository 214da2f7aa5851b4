"""Deadlines on the upstream's connections: a pull waits on its upstream for ``total_timeout`` at most.

urllib3's timeouts bound each connect and each read, not an answer: an upstream sending a byte every
few seconds, in its headers or its body, keeps a read going for ever. A request sent ``within`` a
deadline puts its connection under watch until the connection goes back to the pool; at the
deadline the watchdog (one thread per process) shuts the socket down, and whatever read waits on it
ends at once as a transport error, which the caller knows by the deadline having passed.
"""
from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection

_local = threading.local()


@contextmanager
def within(deadline: float) -> Iterator[None]:
    """Requests this thread sends meanwhile are cut off at ``deadline`` (a time.monotonic())."""
    _local.deadline = deadline
    try:
        yield
    finally:
        _local.deadline = None


class _Watchdog:
    def __init__(self) -> None:
        self._due: list[tuple[float, int, Any]] = []
        self._seq = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, conn: Any, deadline: float) -> None:
        with self._changed:
            heapq.heappush(self._due, (deadline, next(self._seq), conn))
            if self._thread is None or not self._thread.is_alive():  # none yet, or a forked process
                self._thread = threading.Thread(target=self._run, name="proxy-deadlines", daemon=True)
                self._thread.start()
            if self._due[0][2] is conn:  # the earliest now: the watchdog sleeps until another
                self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._changed.wait(self._due[0][0] - time.monotonic() if self._due else None)
                deadline, _, conn = heapq.heappop(self._due)
            sock = conn.sock
            # Still the request this deadline was set for (not one sent on it since), still open.
            if conn.deadline == deadline and sock is not None:
                try:
                    # socket.socket's own: a TLS socket's would also drop its SSL object under the reader.
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass


_WATCHDOG = _Watchdog()


def extend(response: Any, deadline: float) -> None:
    """Move the deadline of the connection ``response`` is read from to ``deadline`` (a later one)."""
    conn = getattr(response, "_connection", None)
    if conn is not None and conn.deadline is not None and deadline > conn.deadline:
        conn.deadline = deadline  # the entry for the earlier deadline no longer matches: it does nothing
        _WATCHDOG.watch(conn, deadline)


class _Watched:
    deadline: float | None = None

    def request(self, *args: Any, **kwargs: Any) -> None:
        deadline = getattr(_local, "deadline", None)
        if deadline is not None:
            if time.monotonic() >= deadline:  # urllib3 retrying after the cut: no new attempt
                raise TimeoutError("the deadline passed")
            self.deadline = deadline
            _WATCHDOG.watch(self, deadline)
        super().request(*args, **kwargs)  # type: ignore[misc]


class _Connection(_Watched, HTTPConnection):
    pass


class _TLSConnection(_Watched, HTTPSConnection):
    pass


class _Returned:
    def _put_conn(self, conn: Any) -> None:
        if conn is not None:
            conn.deadline = None  # idle in the pool: nobody's deadline
        super()._put_conn(conn)  # type: ignore[misc]


class _Pool(_Returned, HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(_Returned, HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


def pool_manager(**options: Any) -> PoolManager:
    """A urllib3 PoolManager whose requests honour ``within``."""
    manager = PoolManager(**options)
    manager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}
    return manager
