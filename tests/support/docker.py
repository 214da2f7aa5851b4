"""A real Docker engine for end-to-end tests: ``dockerd`` with its own data, exec root, pid file and
socket in a temp directory (no default bridge, no iptables, as root), stopped by PID. Its storage
driver is overlay2 (builds about 30 times faster than vfs), or vfs where overlay2 cannot run.

User-defined networks (docker-compose's) work without iptables, and so do ports published on
127.0.0.1 (docker-proxy). Nothing can be pulled from outside, so images are imported from root
filesystems: Debian's static busybox here, a Debian Python base in tests/support/image_build.py.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CLIENT = "/usr/bin/docker"  # the client packaged with dockerd: the same API version
BUSYBOX = "/usr/bin/busybox"


class DockerUnavailable(RuntimeError):
    """No engine can run here (not root, or the packages are missing)."""


@dataclass
class Docker:
    root: Path
    process: subprocess.Popen[bytes] | None = None
    options: tuple[str, ...] = ()  # more dockerd flags: --registry-mirror, --insecure-registry
    config: Path = field(init=False)

    def __post_init__(self) -> None:
        self.config = self.root / "client"

    @property
    def socket(self) -> str:
        return f"unix://{self.root / 'docker.sock'}"

    def start(self, timeout: float = 60) -> "Docker":
        dockerd = shutil.which("dockerd")
        if dockerd is None or not os.path.exists(CLIENT) or not os.path.exists(BUSYBOX):
            raise DockerUnavailable("dockerd, docker or busybox is missing (scripts/install-test-deps.sh "
                                    "installs docker.io and busybox-static)")
        if os.geteuid() != 0:
            raise DockerUnavailable("dockerd runs as root only")
        self.config.mkdir(parents=True)
        try:
            return self._start(dockerd, "overlay2", timeout)
        except DockerUnavailable:
            # overlay2 needs an upper filesystem that supports it (not every container's root does).
            shutil.rmtree(self.root / "data", ignore_errors=True)
            return self._start(dockerd, "vfs", timeout)

    def _start(self, dockerd: str, driver: str, timeout: float) -> "Docker":
        log = (self.root / "dockerd.log").open("ab")
        # containerd writes its goroutine dumps (containerd.<pid>.stacks.log) to the temp directory
        # when it is signalled on the way down: into the engine's root, removed with it, not /tmp.
        scratch = self.root / "tmp"
        scratch.mkdir(exist_ok=True)
        self.process = subprocess.Popen(
            [dockerd, "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
             "--pidfile", str(self.root / "docker.pid"), "-H", self.socket, "--bridge", "none",
             "--iptables=false", "--ip-masq=false", "--storage-driver", driver, *self.options],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, "TMPDIR": str(scratch)})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.process = None
                raise DockerUnavailable(f"dockerd exited: {(self.root / 'dockerd.log').read_text()[-1500:]}")
            if self.run("version", check=False).returncode == 0:
                return self
            time.sleep(0.2)
        self.stop()
        raise DockerUnavailable("dockerd did not answer")

    @property
    def env(self) -> dict[str, str]:
        """For clients of this engine (docker, docker-compose); builds use the classic builder, which
        Debian's engine and docker-compose 1.29 use, so the Dockerfile is tested with it."""
        return {**os.environ, "DOCKER_CONFIG": str(self.config), "DOCKER_HOST": self.socket,
                "DOCKER_BUILDKIT": "0"}

    def run(self, *args: str, check: bool = True, input: str | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([CLIENT, "-H", self.socket, *args], capture_output=True, text=True, env=self.env,
                              input=input, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def import_busybox(self, name: str) -> None:
        """An image whose /bin/sh is static busybox, tagged ``name``."""
        with tempfile.TemporaryDirectory() as scratch:
            archive = Path(scratch) / "rootfs.tar"
            with tarfile.open(archive, "w") as tar:
                tar.add(BUSYBOX, arcname="bin/busybox")
                for applet in ("sh", "echo", "cat"):
                    link = tarfile.TarInfo(f"bin/{applet}")
                    link.type, link.linkname = tarfile.SYMTYPE, "busybox"
                    tar.addfile(link)
            self.run("import", str(archive), name)

    def has_image(self, name: str) -> bool:
        return self.run("image", "inspect", name, check=False).returncode == 0

    def stop(self) -> None:
        if self.process is None:
            return
        # A network's bridge outlives the engine in the kernel, and a stale one with the same subnet
        # takes the traffic of the next (docker-compose's fixed subnets): remove them first.
        containers = self.run("ps", "--all", "--quiet", check=False).stdout.split()
        if containers:
            self.run("rm", "--force", "--volumes", *containers, check=False)
        self.run("network", "prune", "--force", check=False)
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass
        self.process = None
        # The engine leaves its network namespace's bind mount (exec/netns/default) behind.
        with open("/proc/self/mounts") as mounts:
            left = [line.split()[1] for line in mounts if line.split()[1].startswith(f"{self.root}/")]
        for mount_point in sorted(left, reverse=True):
            subprocess.run(["umount", mount_point], capture_output=True)
        # Containers' mounts and vfs layers are root-owned trees: remove what can be removed.
        shutil.rmtree(self.root, ignore_errors=True)


def start_docker(*options: str) -> Docker:
    return Docker(Path(tempfile.mkdtemp(prefix="registry-docker-")), options=options).start()
