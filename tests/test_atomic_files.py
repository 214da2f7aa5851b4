"""The one durable small-file write (regsite.files) that the storage driver, token files, htpasswd and
the secret key share: whole or nothing, no temporary left behind, created once when racing."""
from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from regsite import files
from regsite.settings import _secret_key


def test_it_replaces_a_file_whole_and_creates_its_directory(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "file"
    files.replace_file(path, b"first")
    files.replace_file(path, b"second", mode=0o640)
    assert path.read_bytes() == b"second"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert os.listdir(path.parent) == ["file"]


def test_it_keeps_the_old_content_and_no_temporary_when_a_write_fails(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "dir" / "file"
    files.replace_file(path, b"old")

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        files.replace_file(path, b"new")
    assert path.read_bytes() == b"old"
    assert os.listdir(path.parent) == ["file"]


def test_it_creates_a_file_only_once(tmp_path: Path) -> None:
    path = tmp_path / "dir" / "key"
    assert files.create_file(path, b"one") is True
    assert files.create_file(path, b"two") is False
    assert path.read_bytes() == b"one"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(path.parent) == ["key"]


def test_it_gives_every_racing_worker_the_same_complete_secret_key(tmp_path: Path) -> None:
    path = tmp_path / "data" / "secret_key"
    barrier = threading.Barrier(8)
    keys: list[str] = []

    def start_worker() -> None:
        barrier.wait()
        keys.append(_secret_key(path))

    threads = [threading.Thread(target=start_worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(keys) == 8 and len(set(keys)) == 1 and len(keys[0]) >= 50
    assert path.read_text() == keys[0]
    assert _secret_key(path) == keys[0]
