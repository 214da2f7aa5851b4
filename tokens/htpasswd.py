"""htpasswd users: bcrypt entries only, re-read when the file changes, successful checks cached.

docker sends Basic credentials with every request of a push, and bcrypt is slow by design (that is
its defence), so a correct password is verified at most once a minute per process and user. The
cache key hashes the stored hash too: changing a password in the file invalidates it at once.
Failures are never cached, and an unknown user still pays one bcrypt run, at the highest cost of
any entry in the file, so that timing does not tell which users exist.
"""
from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import bcrypt
from django.conf import settings

from regsite import text
from regsite.files import replace_file
from regsite.watched import Stamp, WatchedFile

log = logging.getLogger(__name__)

BCRYPT_PREFIXES = ("$2y$", "$2a$", "$2b$")
BCRYPT_HASH = re.compile(r"^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$")
BCRYPT_MAX_BYTES = 72  # bcrypt reads no further; Apache's htpasswd truncates there too
CACHE_SECONDS = 60.0
CACHE_MAX_ENTRIES = 4096
DEFAULT_COST = 10
USERNAME = re.compile(r"^[^:\s\x00-\x1f\x7f]{1,255}$")


@dataclass(frozen=True)
class Snapshot:
    stamp: tuple[int, int, int] | None  # (mtime_ns, size, inode); None when unreadable
    users: dict[str, str] = field(default_factory=dict)  # username -> bcrypt hash
    cost: int = DEFAULT_COST  # the highest of any entry: the dummy check for unknown users pays it


class HtpasswdFile:
    """One htpasswd file, parsed again whenever its inode, size or modification time changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Every authenticated request asks, some twice (a token's owner too): no frame of our own.
        self.snapshot: Callable[[], Snapshot] = WatchedFile(path, self._read).get

    def _read(self, stamp: Stamp | None) -> Snapshot:
        try:
            text = self.path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            log.error("htpasswd file %s cannot be read (%s): every password check fails",
                      self.path, exc.strerror)
            return Snapshot(stamp=stamp)
        users: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            username, sep, hashed = line.partition(":")
            if not sep or not username:
                log.warning("htpasswd file %s line %d is not user:hash; ignored", self.path, number)
                continue
            if username in users:
                continue  # the first entry wins, as in Apache
            if BCRYPT_HASH.match(hashed.strip()):
                users[username] = hashed.strip()
            else:
                _warn_not_bcrypt(username, self.path)
        # The highest cost, not the first entry's: with a cheap entry first, an unknown user was
        # refused far sooner than a known user with a costlier hash, which told a guesser which names
        # exist. An unknown user now takes as long as the slowest known one (entries usually share
        # one cost, and then every refusal takes as long).
        costs = [int(match[1]) for match in map(BCRYPT_HASH.match, users.values()) if match]
        cost = max(costs, default=DEFAULT_COST)
        return Snapshot(stamp=stamp, users=users, cost=cost)


_warned: set[tuple[str, str]] = set()
_files: dict[Path | str, HtpasswdFile] = {}
_files_lock = threading.Lock()
_successes: dict[bytes, float] = {}
_successes_lock = threading.Lock()
_dummies: dict[int, bytes] = {}


def _warn_not_bcrypt(username: str, path: Path) -> None:
    if (str(path), username) in _warned:
        return
    _warned.add((str(path), username))
    log.warning("htpasswd file %s: user %r has no bcrypt hash and can never log in; "
                "recreate the entry with `htpasswd -B` or `manage.py adduser`", path, username)


def current_file() -> HtpasswdFile:
    # Called on every authenticated request (a token's owner is checked too): a dictionary lookup
    # by the setting itself, so that building a Path and taking the lock happen once per file, not
    # once per request.
    configured = settings.AUTH_HTPASSWD_FILE
    found = _files.get(configured)
    if found is None:
        with _files_lock:
            found = _files.setdefault(configured, HtpasswdFile(Path(configured)))
    return found


def _secret(password: str) -> bytes:
    return password.encode("utf-8", errors="surrogateescape")[:BCRYPT_MAX_BYTES]


def _cache_key(username: str, password: str, stored: str) -> bytes:
    h = hashlib.sha256()
    for part in (username, password, stored):
        data = part.encode("utf-8", errors="surrogateescape")
        h.update(len(data).to_bytes(4, "big") + data)
    return h.digest()


def _dummy_hash(cost: int) -> bytes:
    if cost not in _dummies:
        _dummies[cost] = bcrypt.hashpw(b"no such user", bcrypt.gensalt(rounds=cost))
    return _dummies[cost]


def _remember(key: bytes) -> None:
    now = time.monotonic()
    with _successes_lock:
        if len(_successes) >= CACHE_MAX_ENTRIES:
            for stale in [k for k, until in _successes.items() if until <= now]:
                del _successes[stale]
            if len(_successes) >= CACHE_MAX_ENTRIES:
                _successes.clear()
        _successes[key] = now + CACHE_SECONDS


def _recently_verified(key: bytes) -> bool:
    until = _successes.get(key)
    return until is not None and until > time.monotonic()


def recently_verified(username: str, password: str) -> bool:
    """Whether this very password of the user was checked right within the last minute here."""
    stored = current_file().snapshot().users.get(username)
    return stored is not None and _recently_verified(_cache_key(username, password, stored))


def check_password(username: str, password: str) -> bool:
    snapshot = current_file().snapshot()
    stored = snapshot.users.get(username)
    if stored is None:
        bcrypt.checkpw(_secret(password), _dummy_hash(snapshot.cost))
        return False
    key = _cache_key(username, password, stored)
    if _recently_verified(key):
        return True
    try:
        ok = bcrypt.checkpw(_secret(password), stored.encode("ascii"))
    except ValueError:
        return False
    if ok:
        _remember(key)
    return ok


def clear_cache() -> None:
    with _successes_lock:
        _successes.clear()


def validate_username(username: str) -> None:
    if not USERNAME.match(username) or text.problem(username):  # a command's argument may hold a surrogate
        raise ValueError("a username is 1 to 255 characters of Unicode text without ':', spaces or control "
                         "characters")


def set_password(path: Path, username: str, password: str, cost: int = DEFAULT_COST) -> bool:
    """Write a bcrypt entry for the user, replacing an existing one; True when the user is new.

    The file is rewritten atomically (temp file, fsync, rename) and keeps every other line.
    """
    validate_username(username)
    secret = password.encode("utf-8")
    if not secret:
        raise ValueError("the password is empty")
    if len(secret) > BCRYPT_MAX_BYTES:
        raise ValueError(f"bcrypt uses only the first {BCRYPT_MAX_BYTES} bytes of a password; "
                         "choose a shorter one")
    hashed = bcrypt.hashpw(secret, bcrypt.gensalt(rounds=cost)).decode("ascii")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        lines, mode = [], 0o600
    kept = [line for line in lines if line.partition(":")[0].strip() != username]
    new_user = len(kept) == len(lines)
    kept.append(f"{username}:{hashed}")
    replace_file(path, ("\n".join(kept) + "\n").encode("utf-8"), mode)
    return new_user

