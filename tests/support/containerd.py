"""A real containerd for end-to-end tests: its own root, state and sockets in a short temp directory
(a unix socket path is at most 107 bytes), no CRI plugin, driven with ``ctr``; stopped by PID."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CONFIG = """\
version = 2
root = "{root}/root"
state = "{root}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{root}/c.sock"
[ttrpc]
  address = "{root}/c.sock.ttrpc"
[debug]
  address = "{root}/debug.sock"
"""


class ContainerdUnavailable(RuntimeError):
    """containerd or ctr is missing (the docker.io package brings both), or not root."""


@dataclass
class Containerd:
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ctrd-", dir="/tmp")))
    process: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> str:
        return str(self.root / "c.sock")

    def start(self, timeout: float = 30.0) -> "Containerd":
        binary, ctr = shutil.which("containerd"), shutil.which("ctr")
        if binary is None or ctr is None:
            raise ContainerdUnavailable("containerd and ctr are missing "
                                        "(scripts/install-test-deps.sh installs docker.io)")
        if os.geteuid() != 0:
            raise ContainerdUnavailable("containerd runs as root only")
        (self.root / "config.toml").write_text(CONFIG.format(root=self.root))
        log = (self.root / "containerd.log").open("ab")
        self.process = subprocess.Popen([binary, "--config", str(self.root / "config.toml")], stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ContainerdUnavailable(f"containerd exited: {(self.root / 'containerd.log').read_text()[-1500:]}")
            if self.ctr("version", check=False).returncode == 0:
                return self
            time.sleep(0.2)
        self.stop()
        raise ContainerdUnavailable("containerd did not answer")

    def ctr(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["ctr", "--address", self.socket, *args], capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"ctr {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def stop(self) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=30)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
            self.process = None
        shutil.rmtree(self.root, ignore_errors=True)
