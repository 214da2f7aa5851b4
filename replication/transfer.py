"""What a push and a pull run share: the pace a policy may send at, streamed bodies, outcomes."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from replication.remote import RemoteError

# A large blob goes to the destination in pieces of this size, each recorded once the destination
# took it: a run killed midway sends again at most one piece of it.
CHUNK = 32 * 1024 * 1024
PIECE = 1024 * 1024  # what one read of a stream asks for


class Skip(Exception):
    """Nothing to do for the item (up to date already, gone since, not the policy's): said why;
    ``digest``: the tag's, when it is the remote's already."""

    def __init__(self, note: str, digest: str = "") -> None:
        super().__init__(note)
        self.digest = digest


@dataclass(frozen=True)
class Outcome:
    state: str  # done, skipped
    note: str
    bytes: int
    digest: str = ""  # what the tag was left at, when the item set it or found it so


class Throttle:
    """``max_bytes_per_second`` for all the threads of a policy: each read reserves its share of
    time, and waits for it (0 is unlimited)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._free_at = time.monotonic()

    @property
    def piece(self) -> int:
        """How much one read may ask for: an eighth of a second's worth when limited, so the pace
        is even rather than a burst and a long wait."""
        return PIECE if self.rate <= 0 else max(16 * 1024, min(PIECE, self.rate // 8))

    def take(self, count: int) -> None:
        """Wait until ``count`` more bytes keep within the rate (the policy's threads queue up)."""
        if self.rate <= 0 or count <= 0:
            return
        with self._lock:
            now = time.monotonic()
            self._free_at = max(now, self._free_at) + count / self.rate
            until = self._free_at
        if until > now:
            time.sleep(until - now)


class Stream:
    """``length`` bytes read from ``read`` in pieces: paced by the throttle, counted as they go
    (``counted``), and cut short as a transient RemoteError when the source ends too early."""

    def __init__(self, read: Callable[[int], bytes], length: int, throttle: Throttle,
                 counted: Callable[[int], None], what: str) -> None:
        self._read, self.left, self._throttle, self._counted, self._what = read, length, throttle, counted, what

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        want = min(PIECE if size is None or size < 0 else size, self.left, self._throttle.piece)
        self._throttle.take(want)
        data = self._read(want)
        if not data:
            raise RemoteError(f"{self._what} ended {self.left} bytes short", transient=True)
        self.left -= len(data)
        self._counted(len(data))
        return data


class Known:
    """Blobs and manifests known to be at the other side, as (repository, digest): asked once per
    run instead of once per image that shares them. Bounded, oldest forgotten first."""

    STRIPES = 256

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._moving = [threading.Lock() for _ in range(self.STRIPES)]

    def moving(self, key: tuple[str, str]) -> threading.Lock:
        """Held while one thread moves a blob: the policy's other threads, wanting the same blob
        for other tags, wait and find it there instead of sending (or fetching) it as well."""
        return self._moving[hash(key) % self.STRIPES]

    def __contains__(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._seen

    def add(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._seen[key] = None
            self._seen.move_to_end(key)
            while len(self._seen) > self._limit:
                self._seen.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


class Tally:
    """Bytes moved by one item (thread-safe: a policy's threads share the total)."""

    def __init__(self, total: Callable[[int], None] | None = None) -> None:
        self.bytes = 0
        self._total = total

    def __call__(self, count: int) -> None:
        self.bytes += count
        if self._total is not None:
            self._total(count)
