"""A full storage device (a 20 MiB tmpfs as the storage root, no free-space floor): a push that does not fit
fails in the OCI envelope and leaves nothing behind, earlier images still pull, and pushes work once space
is free."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.faults.wire import MiB, Registry, digest, exchange, storage_problems, upload_files

OCTET = {"Content-Type": "application/octet-stream"}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        reason = f"cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {mounted.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(path: Path, leave: int) -> None:
    """Write a ballast file until only about ``leave`` bytes are free on the device."""
    with open(path, "wb") as fh:
        while shutil.disk_usage(path.parent).free > leave:
            try:
                fh.write(b"\0" * min(MiB, shutil.disk_usage(path.parent).free - leave + 4096))
                fh.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break


def assert_storage_full(reply: tuple[int, bytes]) -> None:
    status, body = reply
    assert status == 507, (status, body)
    error = json.loads(body)["errors"][0]
    assert error["code"] == "BLOB_UPLOAD_INVALID" and "no space left" in error["message"]


def test_it_refuses_a_push_that_does_not_fit_and_recovers_when_space_is_freed(start_registry, small_disk) -> None:
    server = start_registry(SVC_STORAGE_ROOT=str(small_disk / "registry"), SVC_STORAGE_MIN_FREE_BYTES="0")
    client = Registry(server.host)
    earlier_layers = [os.urandom(MiB) for _ in range(3)]
    earlier, _ = client.push_image("team/app", "v1", earlier_layers)
    earlier_blobs = client.pull_image("team/app", "v1")

    ballast = small_disk / "ballast"
    fill(ballast, leave=2 * MiB)
    used = shutil.disk_usage(small_disk).used
    big = os.urandom(6 * MiB)

    host = server.host
    assert_storage_full(exchange(host, "POST", f"/v2/team/app/blobs/uploads/?digest={digest(big)}", big, OCTET))
    location = client.request("POST", "/v2/team/app/blobs/uploads/").header("Location")
    assert_storage_full(exchange(host, "PATCH", location, big, {**OCTET, "Content-Range": f"0-{len(big) - 1}"}))
    assert client.request("GET", location).header("Range") == "0-0"  # the partial chunk was cut back
    assert_storage_full(exchange(host, "PUT", f"{location}?digest={digest(big)}", big, OCTET))

    assert client.request("HEAD", f"/v2/team/app/blobs/{digest(big)}").status == 404
    assert all(size <= 0 for size in upload_files(server).values()), upload_files(server)
    assert shutil.disk_usage(small_disk).used <= used + 64 * 1024
    assert storage_problems(server) == []
    assert client.pull_image("team/app", "v1") == earlier_blobs
    assert client.pull_image("team/app", earlier) == earlier_blobs

    ballast.unlink()
    later, _ = client.push_image("team/app", "v2", [big])
    assert client.pull_image("team/app", "v2")[digest(big)] == big
    assert client.pull_image("team/app", "v1") == earlier_blobs
    assert storage_problems(server) == []


def test_it_refuses_a_blob_larger_than_the_whole_device(start_registry, small_disk) -> None:
    server = start_registry(SVC_STORAGE_ROOT=str(small_disk / "registry"), SVC_STORAGE_MIN_FREE_BYTES="0")
    client = Registry(server.host)
    huge = os.urandom(24 * MiB)
    assert_storage_full(exchange(server.host, "POST", f"/v2/team/app/blobs/uploads/?digest={digest(huge)}", huge,
                                 OCTET))
    assert shutil.disk_usage(small_disk).used < MiB
    assert upload_files(server) == {}
    assert storage_problems(server) == []
    client.push_image("team/app", "v1", [os.urandom(MiB)])
