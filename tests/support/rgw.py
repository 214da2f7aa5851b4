"""A real S3 server for tests and benchmarks: Ceph RGW on a one-node cluster, all on loopback.

One monitor, one OSD on the in-memory object store (``memstore``), ``auth none`` and pools of size 1,
and ``radosgw`` with its ``beast`` frontend; then ``radosgw-admin`` makes a user whose keys sign
requests (RGW checks S3 signatures even with Ceph's own auth off). Everything lives in a temp
directory and is stopped by PID. Starts in about 5 to 15 seconds.

Unlike an emulator, RGW refuses bad signatures, enforces the 5 MiB minimum part size of multipart
uploads and serves UploadPartCopy and presigned Range GETs as S3 does.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tests.support.server import free_port

BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")
ACCESS_KEY = "REGISTRYTESTACCESS"
SECRET_KEY = "registry-test-secret-key-0123456789"
MEMSTORE_BYTES = 6 * 1024 * 1024 * 1024

CONFIG = """\
[global]
fsid = {fsid}
mon host = 127.0.0.1:{mon_port}
mon initial members = a
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms client mode = crc
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
run dir = {dir}/run
admin socket = {dir}/run/$name.asok
log file = {dir}/log/$name.log
pid file = {dir}/run/$name.pid
mon data = {dir}/mon/$cluster-$id
osd data = {dir}/osd/$cluster-$id
osd objectstore = memstore
memstore device bytes = {memstore}
[client.rgw.x]
rgw frontends = beast endpoint=127.0.0.1:{rgw_port} tcp_nodelay=1
rgw data = {dir}/rgw
rgw enable usage log = false
debug rgw = {debug_rgw}
"""


class RGWUnavailable(RuntimeError):
    """The Ceph binaries are missing or the cluster did not come up."""


@dataclass
class RGW:
    directory: Path
    mon_port: int = 0
    port: int = 0
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    debug_rgw: int = 1  # 1: one log line per request (what the tests count GETs with)
    memstore_bytes: int = MEMSTORE_BYTES
    started: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def conf(self) -> str:
        return str(self.directory / "ceph.conf")

    @property
    def log_path(self) -> Path:
        return self.directory / "log" / "client.rgw.x.log"

    def _run(self, *args: str, timeout: float = 60) -> str:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RGWUnavailable(f"{' '.join(args[:3])} failed: {(done.stderr or done.stdout)[-800:]} "
                                 f"(logs in {self.directory / 'log'})")
        return done.stdout

    def start(self, timeout: float = 90) -> "RGW":
        missing = [b for b in BINARIES if shutil.which(b) is None]
        if missing:
            raise RGWUnavailable(f"missing {', '.join(missing)} (scripts/install-test-deps.sh installs them)")
        try:
            self._start(timeout)
        except BaseException:
            self.stop(keep_logs=True)  # whatever did start; the logs stay for the message's path
            raise
        return self

    def _start(self, timeout: float) -> None:
        for sub in ("run", "log", "mon", "osd/ceph-0", "rgw"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        self.mon_port, self.port = free_port(), free_port()
        fsid = str(uuid.uuid4())
        Path(self.conf).write_text(CONFIG.format(fsid=fsid, mon_port=self.mon_port, rgw_port=self.port,
                                                 dir=self.directory, memstore=self.memstore_bytes,
                                                 debug_rgw=self.debug_rgw))
        deadline = time.monotonic() + timeout
        monmap = str(self.directory / "monmap")
        self._run("monmaptool", "--create", "--add", "a", f"127.0.0.1:{self.mon_port}", "--fsid", fsid, monmap)
        self._run("ceph-mon", "--mkfs", "-i", "a", "--monmap", monmap, "-c", self.conf, "--keyring", "/dev/null")
        self._run("ceph-mon", "-i", "a", "-c", self.conf)
        self.started.append("mon.a")
        self._run("ceph", "-c", self.conf, "osd", "create")
        self._run("ceph-osd", "-i", "0", "--mkfs", "-c", self.conf)
        self._run("ceph-osd", "-i", "0", "-c", self.conf)
        self.started.append("osd.0")
        self._wait(lambda: "1 up" in self._run("ceph", "-c", self.conf, "osd", "stat"), deadline, "the OSD")
        self._run("radosgw", "-n", "client.rgw.x", "-c", self.conf)
        self.started.append("client.rgw.x")
        self._wait(self._answers, deadline, "radosgw")
        self._run("radosgw-admin", "-c", self.conf, "user", "create", "--uid", "registry",
                  "--display-name", "registry tests", "--access-key", self.access_key,
                  "--secret-key", self.secret_key)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.endpoint + "/", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def _wait(self, ready: Callable[[], bool], deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except RGWUnavailable:
                pass
            time.sleep(0.25)
        raise RGWUnavailable(f"{what} did not come up; logs in {self.directory / 'log'}")

    def kill_gateway(self) -> None:
        """SIGKILL radosgw alone, as a crash would; the cluster behind it (and the objects) stay."""
        pid_file = self.directory / "run" / "client.rgw.x.pid"
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self._answers() and time.monotonic() < deadline:
            time.sleep(0.1)
        pid_file.unlink(missing_ok=True)

    def start_gateway(self, timeout: float = 60) -> None:
        """Start radosgw again on the same port, after kill_gateway."""
        self._run("radosgw", "-n", "client.rgw.x", "-c", self.conf)
        self._wait(self._answers, time.monotonic() + timeout, "radosgw")

    def add_user(self, uid: str) -> tuple[str, str]:
        """Another user of the store, with no rights on the registry user's buckets: its keys."""
        access_key, secret_key = f"{uid.upper()}ACCESS", f"{uid}-secret-key-0123456789"
        self._run("radosgw-admin", "-c", self.conf, "user", "create", "--uid", uid, "--display-name", uid,
                  "--access-key", access_key, "--secret-key", secret_key)
        return access_key, secret_key

    def requests(self, bucket: str, key_part: str = "", method: str | None = "GET") -> int:
        """``method`` requests (None: of any method) on objects of ``bucket`` so far, from RGW's
        request log."""
        count = 0
        if not self.log_path.exists():
            return 0
        for line in self.log_path.read_text(errors="replace").splitlines():
            if "beast:" not in line or key_part not in line:
                continue
            if (f' "{method} /{bucket}/' in line) if method else re.search(rf' "[A-Z]+ /{bucket}[/? ]', line):
                count += 1
        return count

    def stop(self, keep_logs: bool = False) -> None:
        """Kill the daemons and remove the directory (``keep_logs``: leave it, to read why)."""
        for name in reversed(self.started):
            pid_file = self.directory / "run" / f"{name}.pid"
            try:
                pid = int(pid_file.read_text().strip())
                os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                continue
        self.started.clear()
        if not keep_logs:
            shutil.rmtree(self.directory, ignore_errors=True)


def start_rgw(debug_rgw: int = 1, memstore_bytes: int = MEMSTORE_BYTES) -> RGW:
    """A running RGW with a user, in a new temp directory; raises RGWUnavailable otherwise."""
    return RGW(Path(tempfile.mkdtemp(prefix="registry-rgw-")), debug_rgw=debug_rgw,
               memstore_bytes=memstore_bytes).start()
