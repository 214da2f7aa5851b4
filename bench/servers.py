"""The two registries under test: ours under gunicorn and the CNCF registry, each in a fresh temp dir.

Both run with their shipped defaults apart from what a benchmark must set (loopback port, data
directory, delete enabled, auth). Each is stopped by the PID of the process group it was started in.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from regsite.config import DEFAULTS
from tests.support.server import RegistryServer, free_port

REFERENCE_BINARY = "docker-registry"
BENCH_USER = "bench"
BENCH_PASSWORD = "bench-password"


class SetupError(RuntimeError):
    """A server or tool could not be prepared."""


def ensure_reference_installed() -> str:
    """The path of Debian's docker-registry, installed from apt when missing."""
    path = shutil.which(REFERENCE_BINARY)
    if path:
        return path
    print("installing docker-registry from apt (the reference registry)", flush=True)
    prefix = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*prefix, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run([*prefix, "apt-get", "install", "-y", "-qq", "--no-install-recommends",
                    REFERENCE_BINARY], check=True, env=env)
    path = shutil.which(REFERENCE_BINARY)
    if not path:
        raise SetupError("apt-get installed docker-registry but it is not on PATH")
    return path


def make_htpasswd(path: Path) -> None:
    if not shutil.which("htpasswd"):
        raise SetupError("htpasswd is missing: run scripts/install-test-deps.sh (apache2-utils)")
    subprocess.run(["htpasswd", "-cbB", str(path), BENCH_USER, BENCH_PASSWORD], check=True,
                   capture_output=True)


def process_tree(root_pid: int) -> list[int]:
    """``root_pid`` and every descendant, from /proc (children of children included)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(parents.get(pid, []))
    return tree


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used so far."""
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def pss_bytes(pids: list[int], field: str = "Pss") -> int:
    """Proportional set size of the processes: shared pages are split between their sharers.
    ``field="Pss_Anon"``: of their anonymous memory only, which no process outside their tree
    shares (a library's or an executable's pages are split with every process that maps them)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith(f"{field}:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue  # exited between listing and reading
    return total


@dataclass
class Endpoint:
    """How a workload reaches a server: address and the Authorization header to send, if any."""

    label: str
    host: str
    port: int
    authorization: str | None = None

    @property
    def netloc(self) -> str:
        return f"{self.host}:{self.port}"


class Ours:
    """This project under gunicorn with the embedded defaults, on a fresh data directory."""

    label = "ours"

    def __init__(self, workdir: Path, auth: bool = False, s3: "S3Bucket | None" = None, config: str = "") -> None:
        env = {"SVC_AUTH_ENABLED": "true" if auth else "false"}
        if s3 is not None:
            env |= {"SVC_STORAGE_BACKEND": "s3", "SVC_STORAGE_S3_ENDPOINT": s3.endpoint,
                    "SVC_STORAGE_S3_BUCKET": s3.bucket, "SVC_STORAGE_S3_PREFIX": "ours",
                    "SVC_STORAGE_S3_ACCESS_KEY": s3.access_key, "SVC_STORAGE_S3_SECRET_KEY": s3.secret_key,
                    "SVC_SECRET_KEY": "bench-replicas-share-this-key"}
        self.auth = auth
        # config.toml's text: the [[proxy]] tables of the pull-through cache workloads, the
        # [[notifications]] of the notify-push workload.
        self.config = config
        self.server = RegistryServer(workdir, env_overrides=env, workers=DEFAULTS["server"]["workers"])
        self.token: str | None = None

    def start(self) -> None:
        self.server.workdir.mkdir(parents=True, exist_ok=True)
        if self.config:
            (self.server.workdir / "config.toml").write_text(self.config)
        if self.auth:
            make_htpasswd(self.server.workdir / "users.htpasswd")
        self.server.start(timeout=60)
        if self.auth:
            self.token = self._create_token()

    def _create_token(self) -> str | None:
        made = self.server.manage("createtoken", "--username", BENCH_USER, "--role", "write")
        if made.returncode != 0:
            print(f"ours: createtoken unavailable ({made.stderr.strip().splitlines()[-1:]}): "
                  "the Bearer workload is skipped", flush=True)
            return None
        words = [w for w in made.stdout.split() if w.startswith("svc_")]
        return words[-1] if words else made.stdout.strip().splitlines()[-1]

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.label, "127.0.0.1", self.server.port)

    def pids(self) -> list[int]:
        return process_tree(self.server.process.pid) if self.server.process else []

    def worker_pids(self) -> list[int]:
        master = self.server.process.pid if self.server.process else None
        return [pid for pid in self.pids() if pid != master]

    def stop(self) -> None:
        self.server.stop()


@dataclass(frozen=True)
class S3Bucket:
    """A bucket both registries of the S3 workloads use (each under its own prefix)."""

    endpoint: str
    bucket: str
    access_key: str
    secret_key: str


REFERENCE_FILESYSTEM = """\
  filesystem:
    rootdirectory: {root}"""

# distribution's s3 driver, with its defaults (10 MiB chunks, redirects to presigned URLs on).
REFERENCE_S3 = """\
  s3:
    accesskey: {access_key}
    secretkey: {secret_key}
    region: us-east-1
    regionendpoint: {endpoint}
    bucket: {bucket}
    rootdirectory: /reference
    secure: false
    v4auth: true"""

REFERENCE_CONFIG = """\
version: 0.1
log:
  fields:
    service: registry
storage:
  cache:
    blobdescriptor: inmemory
{driver}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
  headers:
    X-Content-Type-Options: [nosniff]
{auth}"""

REFERENCE_AUTH = """\
auth:
  htpasswd:
    realm: basic-realm
    path: {path}
"""


@dataclass
class Reference:
    """Debian's docker-registry (distribution 2.8) with its packaged config, storage in a temp dir."""

    workdir: Path
    auth: bool = False
    s3: S3Bucket | None = None
    port: int = 0
    extra_config: str = ""  # top-level YAML appended to the config (the proxy workloads' ``proxy:``)
    process: subprocess.Popen[bytes] | None = None
    label: str = field(default="reference", init=False)

    def start(self, timeout: float = 30.0) -> None:
        binary = ensure_reference_installed()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()  # preset when a cache must name it first
        auth = ""
        if self.auth:
            make_htpasswd(self.workdir / "users.htpasswd")
            auth = REFERENCE_AUTH.format(path=self.workdir / "users.htpasswd")
        config = self.workdir / "config.yml"
        driver = (REFERENCE_S3.format(**vars(self.s3)) if self.s3 is not None
                  else REFERENCE_FILESYSTEM.format(root=self.workdir / "storage"))
        config.write_text(REFERENCE_CONFIG.format(driver=driver, port=self.port, auth=auth) + self.extra_config)
        log = (self.workdir / "registry.log").open("ab")
        # Its AWS SDK refuses plain-HTTP endpoints while AWS_CA_BUNDLE is set.
        env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
        self.process = subprocess.Popen([binary, "serve", str(config)], stdout=log, env=env,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self._wait(timeout)

    def _wait(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SetupError(f"docker-registry exited early:\n{self._log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v2/", timeout=1):
                    return
            except urllib.error.HTTPError:
                return  # 401 with auth on: it answers
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise SetupError(f"docker-registry did not answer in {timeout}s:\n{self._log_tail()}")

    def _log_tail(self) -> str:
        return (self.workdir / "registry.log").read_text(errors="replace")[-3000:]

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.label, "127.0.0.1", self.port)

    def pids(self) -> list[int]:
        return process_tree(self.process.pid) if self.process else []

    def stop(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None
