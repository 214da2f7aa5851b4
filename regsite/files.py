"""Durable small-file writes: a reader sees the old content or the new, never a part, even after a crash.

The data goes to a temporary file in the same directory, is fsynced, and is then renamed over the
target (or, for ``create_file``, linked to it, which fails when the target exists); finally the
directory is fsynced so the new name itself survives a power cut. Only the standard library is used,
so settings can call this before Django is configured, and every app can import it without a cycle.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def fsync_directory(directory: Path | str) -> None:
    """Make the directory's entries (a rename, a new or removed name) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Atomically replace (or create) ``path`` with ``data``; the parent directory is created."""
    _put(path, data, mode, os.replace)


def create_file(path: Path, data: bytes, mode: int = 0o600) -> bool:
    """Create ``path`` with ``data`` unless it exists; False (nothing written) when it does.

    Of several processes racing to create the same file exactly one wins, and none of them can read
    it before its content is complete.
    """
    try:
        _put(path, data, mode, os.link)  # link(2), unlike rename(2), refuses an existing target
    except FileExistsError:
        return False
    return True


def _put(path: Path, data: bytes, mode: int, place: Callable[[str, Path], None]) -> None:
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        place(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)  # gone after a rename; the spare name after a link
    fsync_directory(directory)
