"""Storing a fetched blob in a thread of its own.

Receiving, hashing, storing and sending each byte of a cold pull is four copies' worth of work for
one request thread; here the storage write (new page-cache pages, the costliest of the four on this
project's VMs: py-spy gave it 2.7 ms per MiB against 2 for the other three together, or an S3 part
upload) runs beside the rest. Each of those calls releases the GIL, so on two cores the pull goes
at the pace of the slower half instead of the sum. At most QUEUE pieces wait in memory: a store
slower than the upstream slows the fetch down to its pace.
"""
from __future__ import annotations

import queue
import threading

from registry.storage.driver import Writer

QUEUE = 8


class Spool:
    def __init__(self, writer: Writer) -> None:
        self._writer = writer
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUE)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="proxy-spool", daemon=True)
        self._thread.start()

    def write(self, piece: bytes) -> None:
        """Queue a piece; the error of an earlier write, if one failed."""
        if self._error is not None:
            raise self._error
        self._queue.put(piece)

    def finish(self) -> None:
        """Wait until every queued piece is written; the error of a write that failed."""
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Wait for the thread without raising (the caller discards what it wrote)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        while (piece := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._writer.write(piece)
                except BaseException as exc:  # StorageFull too: raised to the request's thread
                    self._error = exc
