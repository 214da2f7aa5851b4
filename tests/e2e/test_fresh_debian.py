"""The README's Quick start on a fresh Debian 12: a debootstrap of bookworm with nothing but the
packages its requirements line names (`apt-get install python3 python3-venv make`), the project's
files as a clone has them, and `make run` as written, in a chroot: it makes the virtualenv, installs
the runtime dependencies from PyPI (not the test extras), migrates, collects the static files and
serves."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.conftest import unavailable
from tests.support.docker import DockerUnavailable
from tests.support.image_build import debian_rootfs
from tests.support.server import REPO, free_port

pytestmark = pytest.mark.e2e
QUICK_START = (REPO / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
REQUIREMENTS = tuple(re.search(r"apt-get install (?:-y )?([a-z0-9.+-]+(?: [a-z0-9.+-]+)*)",  # type: ignore[union-attr]
                                QUICK_START).group(1).split())
PROJECT = "srv/svc-registry"


def _fresh_debian(root: Path) -> None:
    try:
        tar = debian_rootfs("debian-12-quick-start", REQUIREMENTS)
    except DockerUnavailable as exc:
        unavailable(str(exc))
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "-xf", str(tar)], check=True)
    # This machine's network: HTTPS leaves through an intercepting proxy whose CA pip must trust.
    for name in ("etc/resolv.conf", "etc/ssl/certs/ca-certificates.crt"):
        if Path("/", name).exists():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(Path("/", name), root / name)


def _copy_project(target: Path) -> None:
    """The tracked files, as a clone has them (with this checkout's changes)."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def test_make_run_as_written_sets_up_and_serves_on_a_fresh_debian_12(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("chroot") is None:
        unavailable("a chroot needs root")
    root = tmp_path / "debian"
    _fresh_debian(root)
    _copy_project(root / PROJECT)
    port = free_port()
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
           "LANG": "C.UTF-8", "SVC_SERVER_BIND": f"127.0.0.1:{port}",  # port 4000 may be taken on this machine
           **{k: v for k, v in os.environ.items() if k in ("PIP_CERT", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")}}
    log = tmp_path / "make-run.log"
    process = subprocess.Popen(["chroot", str(root), "sh", "-c", f"cd /{PROJECT} && exec make run"], env=env,
                               stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 900  # the dependencies come from PyPI
        while True:
            assert process.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as response:
                    assert response.headers["Docker-Distribution-API-Version"] == "registry/2.0"
                    break
            except OSError:
                time.sleep(1)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    venv = root / PROJECT / ".venv"
    assert (venv / "bin" / "gunicorn").exists() and not (venv / "bin" / "pytest").exists()
    assert (root / PROJECT / "data" / "db.sqlite3").exists()
