"""A highly available PostgreSQL for the failover tests and benchmark: two PostgreSQL 15 nodes managed by
Patroni (Debian's ``patroni``), with a one-node etcd (``etcd-server``) as its store, all on loopback
in a temp directory and stopped by PID.

As platform teams run it: ``synchronous_mode`` (a commit is acknowledged once the standby has it),
Patroni's default timings (ttl 30, loop_wait 10, retry_timeout 10), ``use_pg_rewind`` with
``wal_log_hints`` so that a failed primary rejoins as a standby, and ``primary_start_timeout: 0`` so
that a crashed primary is failed over rather than restarted in place. The registry reaches the
primary either by a multi-host URL (``url``) or through HAProxy checking Patroni's ``/primary``
(``PrimaryBalancer``, the other supported set-up).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tests.support.ports import free_port
from tests.support.postgres import _bindir

SCOPE = "registry"
# Patroni's default loop_wait is 10 s: a standby becomes synchronous only a loop or two after it
# streams, so the cluster forms with a 1 s loop, then runs with the default.
BOOTSTRAP_LOOP_WAIT, LOOP_WAIT = 1, 10


class PatroniUnavailable(RuntimeError):
    """patroni, etcd or the PostgreSQL binaries are missing, or the cluster did not come up."""


def _as_postgres() -> dict[str, Any]:
    # PostgreSQL refuses to run as root: as root, Patroni (and so PostgreSQL) runs as postgres.
    return {"user": "postgres", "group": "postgres"} if os.geteuid() == 0 else {}


def _wait(ready: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except (OSError, RuntimeError):  # not answering yet
            pass
        time.sleep(0.25)
    raise PatroniUnavailable(f"{what} within {timeout:g} s")


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _config(node: "Node") -> dict[str, Any]:
    with urllib.request.urlopen(f"{node.rest}/config", timeout=2) as response:
        config: dict[str, Any] = json.loads(response.read())
    return config


def _psql(port: int, sql: str, database: str = "postgres") -> str:
    done = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", database, "-tAc", sql],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"psql on port {port}: {done.stderr.strip()}")
    return done.stdout.strip()


@dataclass
class Etcd:
    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "Etcd":
        self.port, peer = free_port(), free_port()
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / "etcd.log").open("ab")
        self.process = subprocess.Popen(
            ["etcd", "--name", "dcs", "--data-dir", str(self.workdir / "data"),
             "--listen-client-urls", f"http://{self.endpoint}", "--advertise-client-urls", f"http://{self.endpoint}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{peer}", "--initial-cluster", f"dcs=http://127.0.0.1:{peer}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait(lambda: _status(f"http://{self.endpoint}/health") == 200, 30, "etcd did not answer")
        return self

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
            self.process = None


@dataclass
class Node:
    name: str
    workdir: Path
    port: int = 0  # PostgreSQL's
    rest_port: int = 0  # Patroni's REST API
    process: subprocess.Popen[bytes] | None = None

    @property
    def config(self) -> Path:
        return self.workdir / "patroni.yml"

    @property
    def rest(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def write_config(self, etcd: Etcd, bindir: Path) -> None:
        self.port, self.rest_port = free_port(), free_port()
        trust = ["local all all trust", "host all all 127.0.0.1/32 trust", "host replication all 127.0.0.1/32 trust"]
        config = {
            "scope": SCOPE,
            "name": self.name,
            "restapi": {"listen": f"127.0.0.1:{self.rest_port}", "connect_address": f"127.0.0.1:{self.rest_port}"},
            "etcd3": {"hosts": etcd.endpoint},
            "bootstrap": {
                "dcs": {
                    # Patroni's defaults, but a quicker loop while the cluster forms (see PatroniCluster.start).
                    "ttl": 30, "loop_wait": BOOTSTRAP_LOOP_WAIT, "retry_timeout": 10,
                    "maximum_lag_on_failover": 1048576,
                    "synchronous_mode": True,
                    "primary_start_timeout": 0,
                    "postgresql": {"use_pg_rewind": True, "use_slots": True,
                                   "parameters": {"wal_log_hints": "on", "max_connections": 200}},
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
                "pg_hba": trust,
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.port}",
                "connect_address": f"127.0.0.1:{self.port}",
                "data_dir": str(self.workdir / "data"),
                "bin_dir": str(bindir),
                "pgpass": str(self.workdir / "pgpass"),
                "authentication": {"superuser": {"username": "postgres", "password": "postgres"},
                                   "replication": {"username": "replicator", "password": "replicator"},
                                   "rewind": {"username": "postgres", "password": "postgres"}},
                "parameters": {"unix_socket_directories": str(self.workdir)},
                "pg_hba": trust,
                # The standby's copy starts at once, not after a checkpoint spread over minutes.
                "basebackup": [{"checkpoint": "fast"}],
            },
        }
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(json.dumps(config, indent=1))  # JSON is YAML

    def start(self) -> None:
        if os.geteuid() == 0:
            for path in (self.workdir, self.config):
                shutil.chown(path, "postgres", "postgres")
        log = (self.workdir / "patroni.log").open("ab")
        self.process = subprocess.Popen(["patroni", str(self.config)], stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True, cwd=self.workdir, **_as_postgres())

    def role(self) -> str:
        """"primary", "replica", or "" while Patroni does not say (starting, or its PostgreSQL down)."""
        try:
            with urllib.request.urlopen(f"{self.rest}/patroni", timeout=2) as response:
                state = json.loads(response.read())
        except (OSError, ValueError):
            return ""
        if state.get("state") != "running":
            return ""
        return "primary" if state.get("role") in ("master", "primary") else str(state.get("role", ""))

    def is_sync_standby(self) -> bool:
        return _status(f"{self.rest}/sync") == 200

    def postmaster_pid(self) -> int:
        return int((self.workdir / "data" / "postmaster.pid").read_text().split()[0])

    def kill_postmaster(self) -> None:
        """SIGKILL PostgreSQL's postmaster, as a crash would (Patroni itself keeps running)."""
        os.kill(self.postmaster_pid(), signal.SIGKILL)

    def stop(self) -> None:
        """At once: Patroni killed, its PostgreSQL (in a session of its own) shut down in immediate
        mode. Patroni's own stop waits for a checkpoint, 20 s of the suite for a cluster thrown away."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        self.process = None
        try:
            pid = self.postmaster_pid()
            os.kill(pid, signal.SIGQUIT)  # pg_ctl stop -m immediate
        except (OSError, ValueError):
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _running(pid):
            time.sleep(0.05)
        if _running(pid):
            os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (an exited postmaster whose parent Patroni was killed may stay a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclass
class PatroniCluster:
    workdir: Path
    etcd: Etcd | None = None
    nodes: list[Node] = field(default_factory=list)

    @property
    def hosts(self) -> str:
        """Both nodes, as a multi-host URL lists them: libpq finds the writable primary itself."""
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def new_database(self, hosts: str = "") -> str:
        """The URL of a new database (through ``hosts``, by default both nodes)."""
        name = f"registry_{uuid.uuid4().hex[:12]}"
        self.psql(self.leader(), f"CREATE DATABASE {name} OWNER registry")
        return f"postgresql://registry@{hosts or self.hosts}/{name}"

    def start(self, timeout: float = 180) -> "PatroniCluster":
        missing = [tool for tool in ("patroni", "patronictl", "etcd") if shutil.which(tool) is None]
        bindir = _bindir()
        if missing or bindir is None:
            raise PatroniUnavailable(f"missing {', '.join(missing or ['PostgreSQL'])} "
                                     "(scripts/install-test-deps.sh installs them)")
        self.etcd = Etcd(self.workdir / "etcd").start()
        self.nodes = [Node(f"pg{n}", self.workdir / f"pg{n}") for n in (1, 2)]
        for node in self.nodes:
            node.write_config(self.etcd, bindir)
        first, second = self.nodes
        first.start()
        _wait(lambda: first.role() == "primary", timeout, "the first node did not become the primary")
        self.psql(first, "CREATE ROLE registry LOGIN CREATEDB")
        self.psql(first, "CREATE DATABASE registry OWNER registry")
        second.start()
        self.wait_settled(timeout)
        self.set_config(loop_wait=LOOP_WAIT)
        return self

    def set_config(self, **values: Any) -> None:
        """Change the cluster's dynamic configuration (kept in etcd); the nodes take it at their next
        loop, which at the bootstrap's pace is within a few seconds."""
        request = urllib.request.Request(f"{self.nodes[0].rest}/config", data=json.dumps(values).encode(),
                                         method="PATCH", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10):
            pass
        _wait(lambda: all(_config(self.nodes[0]).get(k) == v for k, v in values.items()), 30,
              f"the cluster did not take {values}")
        time.sleep(3 * BOOTSTRAP_LOOP_WAIT)

    def psql(self, node: Node, sql: str, database: str = "postgres") -> str:
        return _psql(node.port, sql, database)

    def leader(self) -> Node:
        for node in self.nodes:
            if node.role() == "primary":
                return node
        raise AssertionError("no primary")

    def standby(self) -> Node:
        return next(node for node in self.nodes if node is not self.leader())

    def wait_settled(self, timeout: float = 180) -> None:
        """Until one node is the primary and the other its synchronous standby, streaming."""
        def settled() -> bool:
            roles = sorted(node.role() for node in self.nodes)
            return roles == ["primary", "replica"] and any(node.is_sync_standby() for node in self.nodes)
        _wait(settled, timeout, "the cluster did not settle (a primary and its synchronous standby)")

    def settle_quickly(self) -> None:
        """``wait_settled`` at the bootstrap's pace, then back to the default timings: once the fault
        under test is over, a rejoin at the default pace is half a minute or more of waiting."""
        self.set_config(loop_wait=BOOTSTRAP_LOOP_WAIT)
        try:
            self.wait_settled()
        finally:
            self.set_config(loop_wait=LOOP_WAIT)

    def switchover(self) -> None:
        leader, candidate = self.leader(), self.standby()
        done = subprocess.run(["patronictl", "-c", str(leader.config), "switchover", "--leader", leader.name,
                               "--candidate", candidate.name, "--force"], capture_output=True, text=True,
                              timeout=120, **_as_postgres())
        if done.returncode != 0:
            raise RuntimeError(f"patronictl switchover failed: {done.stderr or done.stdout}")

    def stop(self, keep_logs: bool = False) -> None:
        """Stop every process and remove the directory (``keep_logs``: leave it, to read why)."""
        for node in self.nodes:
            node.stop()
        if self.etcd is not None:
            self.etcd.stop()
        if not keep_logs:
            shutil.rmtree(self.workdir, ignore_errors=True)


PRIMARY_BALANCER = """\
global
    maxconn 2000
defaults
    mode tcp
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 2s
listen primary
    bind 127.0.0.1:{port}
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
{servers}
"""


@dataclass
class PrimaryBalancer:
    """One address for the registry, HAProxy sending its connections to the node whose Patroni says
    it is the primary (GET /primary answers 200 there only), cutting them when that changes."""

    cluster: PatroniCluster
    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "PrimaryBalancer":
        self.port = free_port()
        self.workdir.mkdir(parents=True, exist_ok=True)
        servers = "\n".join(f"    server {node.name} 127.0.0.1:{node.port} check port {node.rest_port}"
                            for node in self.cluster.nodes)
        config = self.workdir / "haproxy.cfg"
        config.write_text(PRIMARY_BALANCER.format(port=self.port, servers=servers))
        log = (self.workdir / "haproxy.log").open("ab")
        self.process = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        _wait(lambda: _psql(self.port, "SELECT 1") == "1", 30, "haproxy did not lead to the primary")
        return self

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=10)
            self.process = None


def start_patroni() -> PatroniCluster:
    """A running two-node cluster with a ``registry`` role and database; PatroniUnavailable otherwise."""
    workdir = Path(tempfile.mkdtemp(prefix="registry-patroni-"))
    workdir.chmod(0o711)  # the nodes' directories inside belong to postgres when the tests run as root
    cluster = PatroniCluster(workdir)
    try:
        return cluster.start()
    except PatroniUnavailable as exc:
        cluster.stop(keep_logs=True)
        raise PatroniUnavailable(f"{exc} (logs in {workdir})") from exc
    except BaseException:
        cluster.stop(keep_logs=True)
        raise
