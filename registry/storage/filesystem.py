"""Filesystem storage driver: atomic writes (temp file, fsync, rename, directory fsync)."""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Mapping

from registry.storage.driver import (
    FileInfo,
    PathNotFound,
    StorageError,
    StorageFull,
    WriterBusy,
    check_path,
)
from regsite.files import fsync_directory, replace_file

# Dirty pages are handed to the disk every this many bytes while an upload streams in, so the fsync
# of commit finds little left to write instead of the whole blob, whose wait grows with its size and
# with how busy the disk is. The data stays in the page cache for pulls.
WRITEBACK_BYTES = 8 * 1024 * 1024
_SYNC_FILE_RANGE_WRITE = 2


def _writeback_starter() -> Callable[[int, int, int], object]:
    """sync_file_range(2) with SYNC_FILE_RANGE_WRITE: start writeback, do not wait (Linux only)."""
    try:
        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return lambda fd, offset, length: None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    # Advisory only: a failure here shows up, if it is real, in the fsync of commit.
    return lambda fd, offset, length: call(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


_start_writeback = _writeback_starter()


def _translate(exc: OSError, path: str) -> StorageError:
    if exc.errno == errno.ENOENT:
        return PathNotFound(path)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageFull(f"no space left on the storage device writing {path}")
    return StorageError(f"{exc.strerror or exc} ({path})")


class FileWriter:
    """Appends to one file under an exclusive lock; ``cancel`` truncates back to the starting size."""

    def __init__(self, full: Path, path: str, append: bool) -> None:
        self._path = path
        full.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        self._fd = os.open(full, flags, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise WriterBusy(f"{path} is being written by another request") from None
        self._start = os.fstat(self._fd).st_size
        self._size = self._start
        self._flushed = self._start
        self._truncated = not append
        self._closed = False

    @property
    def size(self) -> int:
        return self._size

    @property
    def state(self) -> dict[str, Any]:
        return {}  # the file is the whole state: its size is the upload's offset

    def seal(self) -> None:
        if not self._closed:  # a file is readable as it is: sealing only commits what is pending
            self.commit()

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
                self._size += written
        except OSError as exc:
            raise _translate(exc, self._path) from exc
        if self._size - self._flushed >= WRITEBACK_BYTES:
            _start_writeback(self._fd, self._flushed, self._size - self._flushed)
            self._flushed = self._size
        return len(data)

    def commit(self) -> None:
        if self._size == self._start and not self._truncated:
            # Nothing changed through this writer (an upload's closing PUT holds one only for its
            # lock): an fsync would only wait on the journal, a large part of a small push's time.
            self._close()
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self.cancel()
            raise _translate(exc, self._path) from exc
        self._close()

    def cancel(self) -> None:
        if self._closed:
            return
        try:
            os.ftruncate(self._fd, self._start)
        finally:
            self._close()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)  # closing the descriptor releases the flock


class FilesystemDriver:
    remote = False

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _full(self, path: str) -> Path:
        return self.root.joinpath(*check_path(path).split("/"))

    def read(self, path: str) -> bytes:
        try:
            return self._full(path).read_bytes()
        except OSError as exc:
            raise _translate(exc, path) from exc

    def write(self, path: str, data: bytes) -> None:
        full = self._full(path)
        try:
            replace_file(full, data, mode=0o600)
        except OSError as exc:
            raise _translate(exc, path) from exc

    def open(self, path: str, offset: int = 0) -> BinaryIO:
        try:
            fh = open(self._full(path), "rb")
        except OSError as exc:
            raise _translate(exc, path) from exc
        if offset:
            fh.seek(offset)
        return fh

    def writer(self, path: str, append: bool = False, state: Mapping[str, Any] | None = None) -> FileWriter:
        try:
            return FileWriter(self._full(path), path, append)
        except OSError as exc:
            raise _translate(exc, path) from exc

    def stat(self, path: str) -> FileInfo:
        try:
            st = self._full(path).stat()
        except OSError as exc:
            raise _translate(exc, path) from exc
        is_dir = os.path.isdir(self._full(path))
        return FileInfo(path, 0 if is_dir else st.st_size, st.st_mtime, is_dir)

    def list(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self._full(path)))
        except OSError as exc:
            raise _translate(exc, path) from exc

    def move(self, source: str, dest: str) -> None:
        src, dst = self._full(source), self._full(dest)
        try:
            dst.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.replace(src, dst)
            fsync_directory(dst.parent)
        except OSError as exc:
            raise _translate(exc, source) from exc

    def copy(self, source: str, dest: str) -> None:
        src, dst = self._full(source), self._full(dest)
        try:
            dst.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
            try:
                with open(src, "rb") as reader, os.fdopen(fd, "wb") as writer:
                    shutil.copyfileobj(reader, writer, 1024 * 1024)
                    writer.flush()
                    os.fsync(writer.fileno())
                os.replace(tmp, dst)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
            fsync_directory(dst.parent)
        except OSError as exc:
            raise _translate(exc, source) from exc

    def delete(self, path: str) -> None:
        full = self._full(path)
        try:
            if full.is_dir() and not full.is_symlink():
                shutil.rmtree(full)
            else:
                full.unlink()
        except OSError as exc:
            raise _translate(exc, path) from exc

    def detach(self, path: str, holding: str) -> bool:
        src, dst = self._full(path), self._full(holding)
        try:
            dst.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.rename(src, dst)
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                return False  # blobs/ mounted apart from the root: no rename between them
            raise _translate(exc, path) from exc
        return True

    def walk(self, path: str) -> Iterator[FileInfo]:
        # scandir's entries and string paths, not os.walk and Path objects: the collector and
        # scrub walk every blob file, and building paths was twice the cost of listing them.
        skip = len(str(self.root)) + 1
        pending = [str(self._full(path))]
        while pending:
            try:
                with os.scandir(pending.pop()) as listing:
                    entries = list(listing)
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed while walking
            files = []
            for entry in entries:
                if entry.is_dir():
                    if not entry.is_symlink():
                        pending.append(entry.path)
                else:
                    files.append(entry)
            for entry in sorted(files, key=lambda e: e.name):
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                yield FileInfo(entry.path[skip:], st.st_size, st.st_mtime, False)

    def abort(self, path: str, state: Mapping[str, Any] | None) -> None:
        try:
            self.delete(path)
        except PathNotFound:
            pass

    def free_bytes(self) -> int | None:
        return shutil.disk_usage(self.root).free

    def url_for(self, path: str, expires_in: int = 1200) -> str | None:
        return None
