"""File-backed token repository: one small JSON file per token, named by the token's SHA-256.

    <token_storage>/                  0700
        <64 hex digits of sha256>     0600  {"owner", "role", "description",
                                             "created_at", "expires_at", "hash",
                                             "owner_stamp",  (tokens.owner_stamp; absent
                                                              in records made before it)
                                             "repositories"} (globs; absent: not limited)
        .<64 hex digits>.*.tmp        a write in progress (renamed into place when complete)

The token itself is never stored. Looking a token up is one hash and one open(); every gunicorn
worker sees a revocation at once because it is the deletion of that file. A file that is not a
well-formed record of its own name is logged and skipped: it never crashes a request and never
grants access. Who owns which file, and the roles and expiries, are indexed in memory
(tokens.file_index), so that one user's tokens are found without reading everyone's.
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Protocol

from registry.digests import HEX
from regsite.files import fsync_directory, replace_file
from tokens.access import Role
from tokens.file_index import DirectoryIndex, Indexed
from tokens.owner_stamp import STAMP, UNSTAMPED

log = logging.getLogger(__name__)

DIGEST = HEX["sha256"]  # a record's file name: the hex SHA-256 of its token
MAX_FILE_BYTES = 64 * 1024


@dataclass(frozen=True)
class StoredToken:
    digest: str
    owner: str
    role: Role
    description: str
    created_at: datetime
    expires_at: datetime
    owner_stamp: str = UNSTAMPED  # the owner's htpasswd entry when it was made (tokens.owner_stamp)
    repositories: tuple[str, ...] = ()  # the globs it is limited to; empty: not limited

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "owner": self.owner,
            "role": str(self.role),
            "description": self.description,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "hash": self.digest,
        }
        if self.owner_stamp != UNSTAMPED:
            data["owner_stamp"] = self.owner_stamp
        if self.repositories:
            data["repositories"] = list(self.repositories)
        return json.dumps(data, indent=1) + "\n"


class TokenStore(Protocol):
    """Where token records live: files (below) or the database (tokens.db_repository). Both pass
    tests/test_token_repositories.py."""

    def ensure_directory(self) -> None: ...

    def save(self, token: StoredToken) -> None: ...

    def get(self, digest: str) -> StoredToken | None: ...

    def delete(self, digest: str) -> bool: ...

    def stamp(self, digest: str, owner_stamp: str) -> StoredToken | None:
        """Give an unstamped record its owner's stamp, unless it was deleted or stamped meanwhile
        (a revocation racing a first use must not bring the record back); the record as stored."""
        ...

    def all(self, prefix: str = "") -> list[StoredToken]: ...

    def of_owner(self, owner: str) -> list[StoredToken]:
        """One user's records, at a cost that does not grow with the other users' tokens."""
        ...

    def live_count_of(self, owner: str, now: datetime) -> int: ...

    def live_counts(self, now: datetime) -> dict[Role, int]:
        """Unexpired tokens by role, at a cost that does not grow with their number."""
        ...

    def owners(self) -> set[str]: ...

    def delete_expired(self, before: datetime) -> int:
        """Delete every record that expired at or before ``before``; how many were deleted."""
        ...


class CorruptRecord(ValueError):
    pass


def _timestamp(data: dict[str, Any], key: str) -> datetime:
    value = data.get(key)
    if not isinstance(value, str):
        raise CorruptRecord(f"{key} is not a string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise CorruptRecord(f"{key} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise CorruptRecord(f"{key} has no time zone")
    return parsed


def parse_record(digest: str, raw: bytes) -> StoredToken:
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CorruptRecord("not JSON") from None
    if not isinstance(data, dict):
        raise CorruptRecord("not a JSON object")
    if data.get("hash") != digest:
        raise CorruptRecord("its hash field does not match its file name")
    owner, role, description = data.get("owner"), Role.parse(data.get("role")), data.get("description", "")
    if not isinstance(owner, str) or not owner:
        raise CorruptRecord("owner is missing")
    if role is None:
        raise CorruptRecord("role is not read, write or admin")
    if not isinstance(description, str):
        raise CorruptRecord("description is not a string")
    owner_stamp = data.get("owner_stamp", UNSTAMPED)
    if not isinstance(owner_stamp, str) or (owner_stamp != UNSTAMPED and not STAMP.fullmatch(owner_stamp)):
        raise CorruptRecord("owner_stamp is not 64 hexadecimal digits")
    repositories = data.get("repositories", [])
    if not isinstance(repositories, list) or not all(isinstance(glob, str) and glob for glob in repositories):
        # Never read as "not limited": a record that says it is limited and cannot say where is refused.
        raise CorruptRecord("repositories is not a list of globs")
    return StoredToken(digest, owner, role, description,
                       _timestamp(data, "created_at"), _timestamp(data, "expires_at"), owner_stamp,
                       tuple(repositories))


# Parsed records by path, each with the identity of the file it came from. A lookup still stats
# the file, so a revocation (the file's deletion) or a rewrite is seen at once by every worker;
# only the open, read and JSON parse (most of what a Bearer token adds to a request) are saved.
_FileKey = tuple[int, int, int, int]
_parsed: dict[str, tuple[_FileKey, StoredToken]] = {}
_PARSED_MAX = 4096


def _file_key(st: os.stat_result) -> _FileKey:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class TokenRepository:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._prefix = os.path.join(directory, "")  # a record's path is this and its name
        self._index = DirectoryIndex(directory, lambda name: bool(DIGEST.fullmatch(name)), self._indexed)

    def ensure_directory(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def save(self, token: StoredToken) -> None:
        self.ensure_directory()
        replace_file(self.directory / token.digest, token.to_json().encode("utf-8"), mode=0o600)

    def get(self, digest: str) -> StoredToken | None:
        if not DIGEST.fullmatch(digest):
            return None
        path = self._prefix + digest  # a str: pathlib, even os.path.join, cost more than the lstat
        try:
            st = os.lstat(path)
        except OSError:
            st = None  # the open below tells missing from unreadable
        cached = _parsed.get(path)
        if st is not None and cached is not None and stat.S_ISREG(st.st_mode) and cached[0] == _file_key(st):
            return cached[1]
        record = self._read(digest)
        if record is not None and st is not None:
            if len(_parsed) >= _PARSED_MAX:
                _parsed.clear()
            _parsed[path] = (_file_key(st), record)
        return record

    def _read(self, digest: str) -> StoredToken | None:
        read = self._read_with_inode(digest)
        return read[0] if read is not None else None

    def _indexed(self, digest: str) -> Indexed | None:
        read = self._read_with_inode(digest)
        if read is None:
            return None
        record, inode = read
        return Indexed(inode, record.owner, record.role, record.expires_at.timestamp())

    def _read_with_inode(self, digest: str) -> tuple[StoredToken, int] | None:
        try:
            # O_NOFOLLOW: a symlink planted in the directory must not turn another file into a grant.
            fd = os.open(self.directory / digest, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("token file %s cannot be opened (%s); ignored", digest[:16], exc.strerror)
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            log.warning("token file %s in %s is not a regular file; ignored", digest[:16], self.directory)
            return None
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
        try:
            if len(raw) > MAX_FILE_BYTES:
                raise CorruptRecord("larger than any token record")
            return parse_record(digest, raw), st.st_ino
        except CorruptRecord as exc:
            log.warning("token file %s in %s is corrupt (%s); ignored", digest[:16], self.directory, exc)
            return None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Deletions and stamps one at a time, across processes (an flock on the directory)."""
        try:
            fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            yield  # no directory: nothing to delete or stamp
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def delete(self, digest: str) -> bool:
        with self._locked():
            try:
                (self.directory / digest).unlink()
            except FileNotFoundError:
                return False
            fsync_directory(self.directory)
            return True

    def stamp(self, digest: str, owner_stamp: str) -> StoredToken | None:
        # Under the lock a revocation cannot fall between the check and the rename that would
        # put the record back.
        with self._locked():
            current = self.get(digest)
            if current is None or current.owner_stamp != UNSTAMPED:
                return current
            stamped = dataclasses.replace(current, owner_stamp=owner_stamp)
            self.save(stamped)
            return stamped

    def _records(self, names: Iterable[str]) -> list[StoredToken]:
        # Read again (a stat, and the parse when the file changed): the index may lag a file
        # rewritten in place, and whatever is listed or deleted must be what the file says.
        return [record for record in map(self.get, names) if record is not None]

    def all(self, prefix: str = "") -> list[StoredToken]:
        """Every readable record whose digest starts with ``prefix``; others are logged and skipped."""
        return self._records(self._index.names(prefix))

    def of_owner(self, owner: str) -> list[StoredToken]:
        return [record for record in self._records(self._index.names_of(owner)) if record.owner == owner]

    def live_count_of(self, owner: str, now: datetime) -> int:
        return sum(1 for record in self.of_owner(owner) if record.expires_at > now)

    def live_counts(self, now: datetime) -> dict[Role, int]:
        return self._index.live_counts(now)

    def owners(self) -> set[str]:
        return self._index.owners()

    def delete_expired(self, before: datetime) -> int:
        expired = [r for r in self._records(self._index.expired_names(before)) if r.expires_at <= before]
        return sum(self.delete(record.digest) for record in expired)
