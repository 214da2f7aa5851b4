"""What the token directory holds, by owner and by role, kept in memory in step with the directory.

Listing one user's tokens and counting the live ones by role read every record file otherwise, so
every /metrics scrape would cost more with each token stored. The index is refreshed when the directory changes
(its modification time: every save is a rename into it, every revocation an unlink), and then reads
only the files it has not seen (by name and inode), so after a process's first look the cost no
longer depends on how many tokens there are. It is a cache of the files, which stay the truth:
callers that act on a record read it again (``TokenRepository.get``).
"""
from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from tokens.access import Role

log = logging.getLogger("tokens.repository")

# Directory timestamps are coarse (a clock tick): a change in the same tick as a scan would leave
# the modification time as it was, so a directory changed this recently is scanned again.
RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class Indexed:
    inode: int
    owner: str
    role: Role
    expires_at: float  # a POSIX timestamp


@dataclass(frozen=True)
class _View:
    entries: dict[str, Indexed | None]  # by digest; None: unreadable or not a record (not re-read)
    by_owner: dict[str, tuple[str, ...]]  # owner -> digests
    expiries: dict[Role, list[float]]  # sorted, for counting the live ones with one bisection


_EMPTY = _View({}, {}, {})


class DirectoryIndex:
    def __init__(self, directory: Path, is_record_name: Callable[[str], bool],
                 read: Callable[[str], Indexed | None]) -> None:
        self.directory = directory
        self._is_record_name = is_record_name
        self._read = read
        self._lock = threading.Lock()
        self._view = _EMPTY
        self._stamp: tuple[int, int] | None = None
        self._scanned_at_ns = 0
        self._warned: set[str] = set()

    def _current_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.directory)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns)

    def _fresh(self, stamp: tuple[int, int] | None) -> bool:
        if stamp != self._stamp or self._scanned_at_ns == 0:
            return False
        return stamp is None or stamp[1] < self._scanned_at_ns - RACY_NS

    def view(self) -> _View:
        stamp = self._current_stamp()
        if self._fresh(stamp):
            return self._view
        with self._lock:
            stamp = self._current_stamp()
            if not self._fresh(stamp):
                self._scan(stamp)
            return self._view

    def _scan(self, stamp: tuple[int, int] | None) -> None:
        scanned_at = time.time_ns()
        try:
            found = [(entry.name, entry.inode()) for entry in os.scandir(self.directory)]
        except FileNotFoundError:
            found = []
        old = self._view.entries
        entries: dict[str, Indexed | None] = {}
        for name, inode in found:
            if name.startswith("."):
                continue  # a write in progress
            if not self._is_record_name(name):
                if name not in self._warned:
                    self._warned.add(name)
                    log.warning("%s in token storage %s is not a token file; ignored", name[:80], self.directory)
                continue
            known = old.get(name)
            entries[name] = known if known is not None and known.inode == inode else self._read(name)
        by_owner: dict[str, list[str]] = {}
        expiries: dict[Role, list[float]] = {role: [] for role in Role}
        for name, indexed in entries.items():
            if indexed is not None:
                by_owner.setdefault(indexed.owner, []).append(name)
                expiries[indexed.role].append(indexed.expires_at)
        for values in expiries.values():
            values.sort()
        self._view = _View(entries, {owner: tuple(names) for owner, names in by_owner.items()}, expiries)
        self._stamp, self._scanned_at_ns = stamp, scanned_at

    def names(self, prefix: str = "") -> list[str]:
        return [name for name, indexed in self.view().entries.items()
                if indexed is not None and name.startswith(prefix)]

    def names_of(self, owner: str) -> tuple[str, ...]:
        return self.view().by_owner.get(owner, ())

    def owners(self) -> set[str]:
        return set(self.view().by_owner)

    def live_counts(self, now: datetime) -> dict[Role, int]:
        moment = now.timestamp()
        return {role: len(values) - bisect.bisect_right(values, moment)
                for role, values in self.view().expiries.items()}

    def expired_names(self, before: datetime) -> list[str]:
        moment = before.timestamp()
        return [name for name, indexed in self.view().entries.items()
                if indexed is not None and indexed.expires_at <= moment]
