"""The storage driver protocol: the only way the registry touches blob and upload bytes.

Paths are relative, slash-separated driver paths built by ``registry.storage.paths``; a driver
refuses any path that could leave its root.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, BinaryIO, Iterator, Mapping, Protocol


class StorageError(Exception):
    """Base class of every storage failure."""


class PathNotFound(StorageError):
    def __init__(self, path: str) -> None:
        super().__init__(f"path not found: {path}")
        self.path = path


class InvalidPath(StorageError):
    def __init__(self, path: str) -> None:
        super().__init__(f"invalid storage path: {path!r}")
        self.path = path


class StorageFull(StorageError):
    """The device has no space left; nothing partial was kept."""


class WriterBusy(StorageError):
    """Another request is appending to the same file right now."""


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    mtime: float
    is_dir: bool


class Writer(Protocol):
    """An appending writer of a resumable upload.

    Data becomes durable and resumable on ``commit``; ``cancel`` undoes this writer's bytes; ``seal``
    finishes the upload, after which the data reads as one file at the writer's path. ``state`` is
    what the caller keeps between requests to resume the upload with another writer, in any process
    (empty where the stored bytes themselves are enough, as on a filesystem).
    """

    @property
    def size(self) -> int: ...

    @property
    def state(self) -> dict[str, Any]: ...

    def write(self, data: bytes) -> int: ...

    def commit(self) -> None: ...

    def cancel(self) -> None: ...

    def seal(self) -> None: ...


class StorageDriver(Protocol):
    # True when every call is a network request (object storage): the registry then answers
    # existence checks from its database instead of asking the store each time.
    remote: bool

    def read(self, path: str) -> bytes:
        """Whole content of a small file."""

    def write(self, path: str, data: bytes) -> None:
        """Atomically replace ``path`` with ``data``."""

    def open(self, path: str, offset: int = 0) -> BinaryIO:
        """A reader positioned at ``offset``; the caller closes it."""

    def writer(self, path: str, append: bool = False, state: Mapping[str, Any] | None = None) -> Writer:
        """An appending writer, resuming from ``state`` when given (creates the file when missing)."""

    def abort(self, path: str, state: Mapping[str, Any] | None) -> None:
        """Discard an unfinished upload at ``path`` and whatever it stored."""

    def stat(self, path: str) -> FileInfo: ...

    def list(self, path: str) -> list[str]:
        """Names of the direct children of a directory."""

    def move(self, source: str, dest: str) -> None:
        """Atomically rename ``source`` to ``dest``, replacing it."""

    def copy(self, source: str, dest: str) -> None:
        """Atomically replace ``dest`` with a copy of ``source`` (inside the store where it can)."""

    def delete(self, path: str) -> None:
        """Remove a file or a whole directory tree."""

    def detach(self, path: str, holding: str) -> bool:
        """Rename ``path`` (a file or a tree) to ``holding`` in one step, where a rename is one:
        True. Unlike ``move`` it is not made durable (a crash may undo it). False, touching
        nothing, where it is no single step (an object store copies); PathNotFound when ``path``
        is gone."""

    def walk(self, path: str) -> Iterator[FileInfo]:
        """Every file below ``path``."""

    def free_bytes(self) -> int | None:
        """Free space for new data; None where the store has no such figure (object storage)."""

    def url_for(self, path: str, expires_in: int = 1200) -> str | None:
        """A URL clients may fetch ``path`` from directly (with Range), or None if there is none."""


def check_path(path: str) -> str:
    """``path`` when it is a relative, slash-separated path that stays below the root; else InvalidPath.

    Every driver calls this before touching anything, so no path can reach outside its root.
    """
    if not path or path.startswith("/") or "\x00" in path or any(
        part in ("", ".", "..") for part in path.split("/")
    ):
        raise InvalidPath(path)
    return path


def delete_if_exists(driver: StorageDriver, path: str) -> bool:
    """Delete a file or tree that may be gone already (after a crash, by a concurrent cleanup).

    True when it was there.
    """
    try:
        driver.delete(path)
    except PathNotFound:
        return False
    return True
