"""In-memory storage driver with the filesystem driver's semantics, for fast unit tests."""
from __future__ import annotations

import io
import threading
import time
from typing import Any, BinaryIO, Iterator, Mapping

from registry.storage.driver import FileInfo, PathNotFound, WriterBusy, check_path


class MemoryWriter:
    def __init__(self, driver: "MemoryDriver", path: str, append: bool) -> None:
        self._driver, self._path = driver, path
        with driver._lock:
            if path in driver._locked:
                raise WriterBusy(f"{path} is being written by another request")
            driver._locked.add(path)
            current = driver._files.get(path, b"") if append else b""
            driver._files[path] = current
            driver._mtimes[path] = time.time()
        self._start = len(current)
        self._closed = False

    @property
    def size(self) -> int:
        return len(self._driver._files[self._path])

    @property
    def state(self) -> dict[str, Any]:
        return {}

    def seal(self) -> None:
        self.commit()

    def write(self, data: bytes) -> int:
        with self._driver._lock:
            self._driver._files[self._path] += bytes(data)
        return len(data)

    def commit(self) -> None:
        self._close()

    def cancel(self) -> None:
        if not self._closed:
            with self._driver._lock:
                self._driver._files[self._path] = self._driver._files[self._path][: self._start]
            self._close()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            with self._driver._lock:
                self._driver._locked.discard(self._path)


class MemoryDriver:
    remote = False

    def __init__(self, free: int = 1 << 40) -> None:
        self._files: dict[str, bytes] = {}
        self._mtimes: dict[str, float] = {}
        self._locked: set[str] = set()
        self._lock = threading.Lock()
        self._free = free

    def _is_dir(self, path: str) -> bool:
        prefix = path + "/"
        return any(name.startswith(prefix) for name in self._files)

    def read(self, path: str) -> bytes:
        try:
            return self._files[check_path(path)]
        except KeyError:
            raise PathNotFound(path) from None

    def write(self, path: str, data: bytes) -> None:
        with self._lock:
            self._files[check_path(path)] = bytes(data)
            self._mtimes[path] = time.time()

    def open(self, path: str, offset: int = 0) -> BinaryIO:
        stream = io.BytesIO(self.read(path))
        stream.seek(offset)
        return stream

    def writer(self, path: str, append: bool = False, state: Mapping[str, Any] | None = None) -> MemoryWriter:
        return MemoryWriter(self, check_path(path), append)

    def stat(self, path: str) -> FileInfo:
        check_path(path)
        if path in self._files:
            return FileInfo(path, len(self._files[path]), self._mtimes[path], False)
        if self._is_dir(path):
            return FileInfo(path, 0, time.time(), True)
        raise PathNotFound(path)

    def list(self, path: str) -> list[str]:
        prefix = check_path(path) + "/"
        children = {name[len(prefix):].split("/")[0] for name in self._files if name.startswith(prefix)}
        if not children:
            raise PathNotFound(path)
        return sorted(children)

    def move(self, source: str, dest: str) -> None:
        # Both paths are checked before anything changes: a bad destination must not lose the source.
        check_path(source)
        check_path(dest)
        with self._lock:
            if source not in self._files:
                raise PathNotFound(source)
            self._files[dest] = self._files.pop(source)
            self._mtimes[dest] = self._mtimes.pop(source)

    def copy(self, source: str, dest: str) -> None:
        check_path(source)
        check_path(dest)
        with self._lock:
            if source not in self._files:
                raise PathNotFound(source)
            self._files[dest] = bytes(self._files[source])
            self._mtimes[dest] = time.time()

    def delete(self, path: str) -> None:
        with self._lock:
            check_path(path)
            prefix = path + "/"
            doomed = [name for name in self._files if name == path or name.startswith(prefix)]
            if not doomed:
                raise PathNotFound(path)
            for name in doomed:
                del self._files[name]
                del self._mtimes[name]

    def detach(self, path: str, holding: str) -> bool:
        check_path(path)
        check_path(holding)
        with self._lock:
            prefix = path + "/"
            moving = [name for name in self._files if name == path or name.startswith(prefix)]
            if not moving:
                raise PathNotFound(path)
            for name in moving:
                renamed = holding + name[len(path):]
                self._files[renamed] = self._files.pop(name)
                self._mtimes[renamed] = self._mtimes.pop(name)
        return True

    def walk(self, path: str) -> Iterator[FileInfo]:
        prefix = check_path(path) + "/"
        for name in sorted(n for n in self._files if n.startswith(prefix)):
            yield FileInfo(name, len(self._files[name]), self._mtimes[name], False)

    def abort(self, path: str, state: Mapping[str, Any] | None) -> None:
        try:
            self.delete(path)
        except PathNotFound:
            pass

    def free_bytes(self) -> int | None:
        return self._free

    def url_for(self, path: str, expires_in: int = 1200) -> str | None:
        return None
