"""Storing a fetched blob in a thread of its own, and finishing the store after the response.

Receiving, hashing, storing and sending each byte of a cold pull is four copies' worth of work for
one request thread; here the storage write (new page-cache pages, or an S3 part upload) runs beside
the rest. Each of those calls releases the GIL, so on two cores the pull goes at the pace of the
slower half instead of the sum. At most QUEUE pieces wait in memory: a store slower than the
upstream slows the fetch down to its pace.

The digest is known when the request thread has hashed the last piece, without waiting for the
writes: that piece then goes to the client, and what remains of the store (the queued writes, the
fsync, the blob's row) is finished by this thread (``close``), not in the client's time.

The hash stays in the request thread: in a thread of its own it cost 13% more CPU per blob on this
project's two-core VMs (each piece then travels to another core's cache) for no faster pull, since
the client and the upstream keep both cores busy (bench/RESULTS.md, Pull-through cache).
"""
from __future__ import annotations

import queue
import threading
from typing import Callable

from registry.storage.driver import Writer

QUEUE = 8

_END = None


class Spool:
    def __init__(self, writer: Writer) -> None:
        self._writer = writer
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUE)
        self._error: BaseException | None = None
        self._then: Callable[[BaseException | None], None] | None = None
        self._ended = False
        self._thread = threading.Thread(target=self._run, name="proxy-spool", daemon=True)
        self._thread.start()

    def write(self, piece: bytes) -> None:
        """Queue a piece; the error of an earlier write, if one failed."""
        if self._error is not None:
            raise self._error
        self._queue.put(piece)

    def finish(self) -> None:
        """Wait until every queued piece is written; the error of a write that failed."""
        self.stop()
        if self._error is not None:
            raise self._error

    def close(self, then: Callable[[BaseException | None], None]) -> None:
        """Without waiting: once every queued piece is written, ``then(error)`` in this spool's
        thread, with the error of a write that failed (None when all were written)."""
        self._end(then)

    def stop(self) -> None:
        """Wait for the thread without raising (the caller discards what it wrote)."""
        self._end(None)
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _end(self, then: Callable[[BaseException | None], None] | None) -> None:
        if not self._ended:
            self._ended, self._then = True, then
            self._queue.put(_END)

    def _run(self) -> None:
        while (piece := self._queue.get()) is not _END:
            if self._error is None:
                try:
                    self._writer.write(piece)
                except BaseException as exc:  # StorageFull too: raised to the request's thread
                    self._error = exc
        if self._then is not None:
            self._then(self._error)
