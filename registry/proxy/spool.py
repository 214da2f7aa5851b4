"""Hashing and storing a fetched blob, each in a thread of its own.

Receiving, hashing, storing and sending each byte of a cold pull is four copies' worth of work; done
in one request thread they add up, and the client waits for their sum. Here the hash and the
storage write (or an S3 part upload) each run in a thread beside the request thread, which only
receives and sends: each of those calls releases the GIL, so the pull goes at the pace of the
slowest of the three instead of the sum. At most QUEUE pieces wait for each thread: a store slower
than the upstream slows the fetch down to its pace, and memory stays bounded.

The hash is known as soon as the hashing thread is done, without waiting for the writes: the last
piece goes to the client then, and what remains to store (the queued writes, the fsync, the blob's
row) is finished by the writing thread (``close``), not in the client's time.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from registry.storage.driver import Writer

QUEUE = 8

_END = object()


class _Stage:
    """One thread applying ``work`` to every piece queued, in order, until the first error."""

    def __init__(self, name: str, work: Callable[[Any], Any]) -> None:
        self._work = work
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=QUEUE)
        self.error: BaseException | None = None
        self._then: Callable[[BaseException | None], None] | None = None
        self._ended = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, piece: Any) -> None:
        self._queue.put(piece)

    def end(self, then: Callable[[BaseException | None], None] | None = None) -> None:
        """No more pieces; ``then(error)`` runs in this stage's thread after the last one."""
        if not self._ended:
            self._ended, self._then = True, then
            self._queue.put(_END)

    def join(self) -> None:
        self.end()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while (piece := self._queue.get()) is not _END:
            if self.error is None:
                try:
                    self._work(piece)
                except BaseException as exc:  # StorageFull too: raised to the request's thread
                    self.error = exc
        if self._then is not None:
            self._then(self.error)


class Spool:
    """The hasher and the writer of one fetch, fed the same pieces."""

    def __init__(self, writer: Writer, hasher: Any) -> None:
        self._hashing = _Stage("proxy-hash", hasher.update)
        self._writing = _Stage("proxy-spool", writer.write)

    def write(self, piece: bytes) -> None:
        """Queue a piece for both; the error of an earlier write, if one failed."""
        self._raise()
        self._hashing.put(piece)
        self._writing.put(piece)

    def hashed(self) -> None:
        """Wait until every piece queued is hashed (writes may still be under way)."""
        self._hashing.join()

    def finish(self) -> None:
        """Wait until every piece queued is hashed and written; the error of a write that failed."""
        self.stop()
        self._raise()

    def close(self, then: Callable[[BaseException | None], None]) -> None:
        """Without waiting: once every piece is written, ``then(error)`` in the writing thread, with
        the error of a write that failed (None when all were written)."""
        self._hashing.end()
        self._writing.end(then)

    def stop(self) -> None:
        """Wait for the threads without raising (the caller discards what they did)."""
        self._hashing.join()
        self._writing.join()

    def _raise(self) -> None:
        for stage in (self._writing, self._hashing):
            if stage.error is not None:
                raise stage.error
