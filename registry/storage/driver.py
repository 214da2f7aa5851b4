"""The storage driver protocol: the only way the registry touches blob and upload bytes.

Paths are relative, slash-separated driver paths built by ``registry.storage.paths``; a driver
refuses any path that could leave its root.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Iterator, Protocol


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
    """An appending writer. Data becomes durable on ``commit``; ``cancel`` undoes this writer's bytes."""

    @property
    def size(self) -> int: ...

    def write(self, data: bytes) -> int: ...

    def commit(self) -> None: ...

    def cancel(self) -> None: ...


class StorageDriver(Protocol):
    def read(self, path: str) -> bytes:
        """Whole content of a small file."""

    def write(self, path: str, data: bytes) -> None:
        """Atomically replace ``path`` with ``data``."""

    def open(self, path: str, offset: int = 0) -> BinaryIO:
        """A reader positioned at ``offset``; the caller closes it."""

    def writer(self, path: str, append: bool = False) -> Writer:
        """An exclusive appending writer (creates the file when missing)."""

    def stat(self, path: str) -> FileInfo: ...

    def list(self, path: str) -> list[str]:
        """Names of the direct children of a directory."""

    def move(self, source: str, dest: str) -> None:
        """Atomically rename ``source`` to ``dest``, replacing it."""

    def delete(self, path: str) -> None:
        """Remove a file or a whole directory tree."""

    def walk(self, path: str) -> Iterator[FileInfo]:
        """Every file below ``path``."""

    def free_bytes(self) -> int: ...


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
