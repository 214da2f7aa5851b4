"""Building the registry's image from its own Dockerfile (the one users build) on a machine that
reaches neither Docker Hub nor PyPI without this machine's proxy CA.

- The base, ``python:3.11-slim``, is a stand-in made from Debian packages: ``debootstrap`` of
  bookworm (the official image's Debian) with python3, pip and venv, and a virtualenv made at
  /usr/local so that ``python`` and ``pip`` are where the official image has them (and pip installs
  there, as in the official image). Its root filesystem is a tar kept in a cache directory that
  runs share (``REGISTRY_TEST_CACHE``, default ~/.cache/svc-registry-tests): made once per machine
  in about a minute, then imported into each engine in seconds.
- Python packages come from a package index on loopback serving wheels that pip downloaded here
  (where pip knows the proxy's CA), cached likewise. The build gets its address as the Dockerfile's
  ``PIP_INDEX_URL`` build argument, which only its build stage sees: nothing of this machine's
  network set-up ends up in the image.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import tomli

from tests.support.docker import Docker, DockerUnavailable
from tests.support.server import REPO

BASE = "python:3.11-slim"
SUITE = "bookworm"
PACKAGES = ("python3", "python3-pip", "python3-venv", "ca-certificates")
MIRROR = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
# What the official image sets that an imported root filesystem does not carry.
BASE_CHANGES = ("ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin", "ENV LANG=C.UTF-8",
                'CMD ["python3"]')


def cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "svc-registry-tests"
    path = Path(os.environ.get("REGISTRY_TEST_CACHE") or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def _locked(name: str) -> Iterator[None]:
    """One maker at a time across processes (pytest-xdist workers, other checkouts' runs)."""
    with (cache_dir() / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _run(*command: str, timeout: float = 900) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise DockerUnavailable(f"{' '.join(command[:3])} failed: {(done.stderr or done.stdout)[-1500:]}")


def debian_rootfs(name: str, packages: tuple[str, ...], *setup: tuple[str, ...]) -> Path:
    """A root filesystem of Debian bookworm (minbase) with ``packages``, then the ``setup`` commands
    run in it by chroot, as a tar in the cache directory, made on first use."""
    tar = cache_dir() / f"{name}-{SUITE}-{_key(packages, setup)}.tar"
    if tar.exists():
        return tar
    if shutil.which("debootstrap") is None:
        raise DockerUnavailable("debootstrap is missing (scripts/install-test-deps.sh installs it)")
    with _locked(name):
        if tar.exists():
            return tar
        root = tar.with_suffix(".rootfs")
        shutil.rmtree(root, ignore_errors=True)
        _run("debootstrap", "--variant=minbase", f"--include={','.join(packages)}", SUITE, str(root), MIRROR)
        for command in setup:
            _run("chroot", str(root), *command)
        for leftovers in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
            for path in (root / leftovers).glob("*"):
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        partial = tar.with_suffix(".partial")
        _run("tar", "-C", str(root), "-cf", str(partial), ".")
        partial.rename(tar)
        shutil.rmtree(root)
    return tar


def base_rootfs() -> Path:
    """The stand-in base's root filesystem."""
    return debian_rootfs(BASE.replace(":", "-"), PACKAGES, ("python3", "-m", "venv", "/usr/local"))


def import_base(docker: Docker) -> None:
    if not docker.has_image(BASE):
        changes = [arg for change in BASE_CHANGES for arg in ("--change", change)]
        docker.run("import", *changes, str(base_rootfs()), BASE)


def _requirements() -> list[str]:
    with (REPO / "pyproject.toml").open("rb") as fh:
        project = tomli.load(fh)
    return [*project["project"]["dependencies"], *project["build-system"]["requires"]]


def wheelhouse() -> Path:
    """A PEP 503 index directory (``simple/<project>/<wheel>``) of the wheels the image's pip installs."""
    requirements = _requirements()
    root = cache_dir() / f"wheels-py{sys.version_info[0]}{sys.version_info[1]}-{_key(requirements)}"
    if root.exists():
        return root
    with _locked("wheels"):
        if root.exists():
            return root
        downloads = root.with_suffix(".partial")
        shutil.rmtree(downloads, ignore_errors=True)
        _run(sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", str(downloads),
             *requirements)
        for wheel in list(downloads.iterdir()):
            project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
            (downloads / "simple" / project).mkdir(parents=True, exist_ok=True)
            wheel.rename(downloads / "simple" / project / wheel.name)
        downloads.rename(root)
    return root


@contextmanager
def package_index(root: Path) -> Iterator[str]:
    """Serve ``root`` on loopback; yields the index URL (pip treats loopback HTTP as secure)."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def build_registry_image(docker: Docker, tag: str) -> None:
    """``docker build`` of the repository's Dockerfile, as users run it, with the classic builder."""
    import_base(docker)
    with package_index(wheelhouse()) as index:
        # Host networking: the build's pip reaches the index on this machine's loopback.
        docker.run("build", "--network", "host", "--build-arg", f"PIP_INDEX_URL={index}", "--tag", tag,
                   str(REPO), timeout=1200)
