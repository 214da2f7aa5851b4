"""One conformance suite that every storage driver must pass: filesystem, memory, and S3 (here on
moto; tests/e2e/test_storage_rgw.py runs the same tests against a real S3 server, Ceph RGW).

An upload is written with writers that each resume from the previous one's ``state`` (as requests
landing on different replicas do), and reads as a file once sealed."""
from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from registry.storage.driver import InvalidPath, PathNotFound, StorageDriver, WriterBusy, delete_if_exists
from registry.storage.filesystem import FilesystemDriver
from registry.storage.memory import MemoryDriver
from registry.storage.s3 import S3Driver
from tests.support.s3 import moto_driver


@pytest.fixture(params=["filesystem", "memory", "s3"])
def driver(request, tmp_path: Path) -> Iterator[StorageDriver]:
    if request.param == "filesystem":
        yield FilesystemDriver(tmp_path / "root")
    elif request.param == "memory":
        yield MemoryDriver()
    else:
        with moto_driver() as s3:
            yield s3


def _content(driver: StorageDriver, path: str) -> bytes:
    with driver.open(path) as fh:
        return fh.read()


def _resume(driver: StorageDriver, path: str, previous: Any) -> Any:
    return driver.writer(path, append=True, state=previous.state)


def test_it_reads_back_what_it_wrote(driver) -> None:
    driver.write("a/b/file", b"hello")
    assert driver.read("a/b/file") == b"hello"


def test_it_replaces_a_file_on_write(driver) -> None:
    driver.write("file", b"first, longer")
    driver.write("file", b"second")
    assert driver.read("file") == b"second"


def test_it_raises_path_not_found_for_missing_files(driver) -> None:
    for call in (lambda: driver.read("nope"), lambda: driver.open("nope"), lambda: driver.stat("nope"),
                 lambda: driver.list("nope"), lambda: driver.delete("nope"), lambda: driver.move("nope", "x")):
        with pytest.raises(PathNotFound):
            call()


def test_it_opens_a_reader_at_an_offset(driver) -> None:
    driver.write("file", b"0123456789")
    with driver.open("file", offset=4) as fh:
        assert fh.read(3) == b"456"
        assert fh.read() == b"789"
    with driver.open("file", offset=10) as fh:
        assert fh.read() == b""


def test_a_reader_is_measured_by_seeking_to_its_end_before_reading(driver) -> None:
    # What Django's FileResponse does with every seekable file it sends: a whole-blob GET.
    driver.write("file", b"0123456789")
    with driver.open("file", offset=4) as fh:
        assert (fh.tell(), fh.seek(0, io.SEEK_END), fh.seek(4)) == (4, 10, 4)
        assert fh.read() == b"456789"


def test_it_appends_with_writers_that_resume_each_other(driver) -> None:
    writer = driver.writer("up/data")
    writer.write(b"abc")
    writer.write(memoryview(b"def"))
    assert writer.size == 6
    writer.commit()
    again = _resume(driver, "up/data", writer)
    assert again.size == 6
    again.write(b"gh")
    again.commit()
    last = _resume(driver, "up/data", again)
    assert last.size == 8
    last.seal()
    assert _content(driver, "up/data") == b"abcdefgh"
    assert driver.stat("up/data").size == 8


def test_it_truncates_when_a_writer_does_not_append(driver) -> None:
    driver.write("file", b"old content")
    writer = driver.writer("file")
    writer.write(b"new")
    writer.commit()
    writer.seal()
    assert driver.read("file") == b"new"


def test_it_cuts_a_cancelled_writer_back_to_where_it_started(driver) -> None:
    first = driver.writer("up/data")
    first.write(b"kept")
    first.commit()
    second = _resume(driver, "up/data", first)
    second.write(b" and dropped")
    second.cancel()
    second.cancel()  # a second cancel is harmless
    third = driver.writer("up/data", append=True, state=first.state)
    assert third.size == 4
    third.seal()
    assert driver.read("up/data") == b"kept"


def test_it_seals_an_empty_upload_as_an_empty_file(driver) -> None:
    writer = driver.writer("up/data")
    writer.write(b"dropped")
    writer.cancel()
    empty = driver.writer("up/data", append=True, state=writer.state)
    assert empty.size == 0
    empty.seal()
    assert driver.read("up/data") == b""


def test_it_discards_an_aborted_upload(driver) -> None:
    writer = driver.writer("uploads/1/data")
    writer.write(b"partial")
    writer.commit()
    driver.abort("uploads/1/data", writer.state)
    with pytest.raises(PathNotFound):
        driver.read("uploads/1/data")
    driver.abort("uploads/1/data", writer.state)  # twice is harmless


@pytest.mark.parametrize("kind", ["filesystem", "memory"])
def test_a_local_driver_refuses_a_second_writer_on_the_same_file(tmp_path, kind) -> None:
    # S3 writers are made exclusive by the upload session's lease in the database instead.
    driver = FilesystemDriver(tmp_path / "root") if kind == "filesystem" else MemoryDriver()
    writer = driver.writer("up/data", append=True)
    with pytest.raises(WriterBusy):
        driver.writer("up/data", append=True)
    writer.write(b"x")
    writer.commit()
    after_commit = driver.writer("up/data", append=True)
    after_commit.cancel()
    after_cancel = driver.writer("up/data", append=True)
    after_cancel.commit()
    assert driver.read("up/data") == b"x"


def test_it_lets_writers_on_different_files_run_together(driver) -> None:
    one, two = driver.writer("a/data"), driver.writer("b/data")
    one.write(b"1")
    two.write(b"2")
    one.commit()
    two.commit()
    one.seal()
    two.seal()
    assert (driver.read("a/data"), driver.read("b/data")) == (b"1", b"2")


def test_it_stats_files_and_directories(driver) -> None:
    driver.write("dir/file", b"12345")
    info = driver.stat("dir/file")
    assert (info.path, info.size, info.is_dir) == ("dir/file", 5, False)
    assert info.mtime > 0
    assert driver.stat("dir").is_dir


def test_it_lists_the_direct_children_of_a_directory(driver) -> None:
    for path in ("top/b", "top/a/x", "top/a/y", "top/c/deep/z"):
        driver.write(path, b".")
    assert driver.list("top") == ["a", "b", "c"]
    assert driver.list("top/a") == ["x", "y"]


def test_it_moves_a_file_replacing_the_destination(driver) -> None:
    driver.write("uploads/1/data", b"new")
    driver.write("blobs/x/data", b"old")
    driver.move("uploads/1/data", "blobs/x/data")
    assert driver.read("blobs/x/data") == b"new"
    with pytest.raises(PathNotFound):
        driver.stat("uploads/1/data")


def test_it_copies_a_file_keeping_the_source(driver) -> None:
    driver.write("uploads/1/data", b"new")
    driver.write("blobs/x/data", b"old")
    driver.copy("uploads/1/data", "blobs/x/data")
    assert driver.read("blobs/x/data") == b"new" and driver.read("uploads/1/data") == b"new"
    driver.copy("uploads/1/data", "deep/new/dir/dest")
    assert driver.read("deep/new/dir/dest") == b"new"
    with pytest.raises(PathNotFound):
        driver.copy("uploads/2/data", "blobs/y/data")


def test_it_moves_into_a_directory_that_does_not_exist_yet(driver) -> None:
    driver.write("src", b"data")
    driver.move("src", "deep/new/dir/dest")
    assert driver.read("deep/new/dir/dest") == b"data"


def test_it_deletes_a_file_or_a_whole_tree(driver) -> None:
    for path in ("tree/a", "tree/sub/b", "tree/sub/deeper/c", "keep/d"):
        driver.write(path, b".")
    driver.delete("tree/a")
    with pytest.raises(PathNotFound):
        driver.read("tree/a")
    driver.delete("tree")
    with pytest.raises(PathNotFound):
        driver.stat("tree/sub/deeper/c")
    assert driver.read("keep/d") == b"."


def test_it_detaches_a_tree_in_one_rename_or_declines_and_touches_nothing(driver) -> None:
    for path in ("tree/a", "tree/sub/b", "keep/c"):
        driver.write(path, b".")
    renames = not isinstance(driver, S3Driver)  # also run on RGW (tests/e2e/test_storage_rgw.py)

    assert driver.detach("tree", "held/tree") is renames
    if renames:
        assert driver.read("held/tree/sub/b") == b"."
        with pytest.raises(PathNotFound):
            driver.stat("tree/a")
        with pytest.raises(PathNotFound):
            driver.detach("tree", "held/again")
    else:  # an object store's rename is a copy: the caller deletes instead
        assert driver.read("tree/sub/b") == b"."
        with pytest.raises(PathNotFound):
            driver.stat("held/tree/a")
    assert driver.read("keep/c") == b"."
    with pytest.raises(InvalidPath):
        driver.detach("keep", "../held")


def test_the_filesystem_driver_declines_a_detach_across_mounts(tmp_path, monkeypatch) -> None:
    driver = FilesystemDriver(tmp_path)
    driver.write("tree/a", b".")

    def across(_src: object, _dst: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")
    monkeypatch.setattr(os, "rename", across)

    assert driver.detach("tree", "held/tree") is False
    assert driver.read("tree/a") == b"."


def test_it_deletes_what_may_already_be_gone(driver) -> None:
    driver.write("tree/a", b".")
    assert delete_if_exists(driver, "tree") is True
    assert delete_if_exists(driver, "tree") is False
    with pytest.raises(InvalidPath):
        delete_if_exists(driver, "../tree")


def test_it_walks_every_file_below_a_path(driver) -> None:
    files = {"w/a": b"1", "w/s/b": b"22", "w/s/t/c": b"333", "other/d": b"4"}
    for path, data in files.items():
        driver.write(path, data)
    walked = sorted((info.path, info.size, info.is_dir) for info in driver.walk("w"))
    assert walked == [("w/a", 1, False), ("w/s/b", 2, False), ("w/s/t/c", 3, False)]
    assert list(driver.walk("missing")) == []


BAD_PATHS = ["", "/etc/passwd", "..", "../x", "a/../b", "a/..", "./a", "a/./b", "a//b", "a/", "a\x00b"]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_it_refuses_paths_that_could_leave_its_root(driver, path) -> None:
    calls = [
        lambda: driver.read(path),
        lambda: driver.write(path, b"x"),
        lambda: driver.open(path),
        lambda: driver.writer(path),
        lambda: driver.stat(path),
        lambda: driver.list(path),
        lambda: driver.delete(path),
        lambda: driver.move(path, "ok"),
        lambda: driver.move("ok", path),
        lambda: list(driver.walk(path)),
    ]
    driver.write("ok", b"safe")
    for call in calls:
        with pytest.raises(InvalidPath):
            call()
    assert driver.read("ok") == b"safe"


def test_it_reports_free_space_where_there_is_such_a_thing(driver) -> None:
    free = driver.free_bytes()
    assert free is None if "s3" in str(type(driver)).lower() else free > 0


def test_the_filesystem_driver_keeps_everything_under_its_root(tmp_path) -> None:
    root = tmp_path / "root"
    driver = FilesystemDriver(root)
    driver.write("a/b", b"x")
    writer = driver.writer("c/d")
    writer.write(b"y")
    writer.commit()
    writer.seal()
    driver.move("a/b", "e/f")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "root/c/d", "root/e/f"]
