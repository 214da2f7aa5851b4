"""Several replicas as platform teams run them: two gunicorn replicas on PostgreSQL and S3 (Ceph RGW),
behind HAProxy balancing round-robin per request, all on loopback and stopped by PID.

HAProxy health-checks each replica on /ready and, when one is down, sends its requests to the other
(``retry-on conn-failure`` with ``option redispatch``), as a load balancer in front of a registry
would be configured.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from registry.storage.s3 import S3Driver
from tests.support.postgres import Postgres
from tests.support.rgw import RGW
from tests.support.server import RegistryServer, access_log_env, free_port

HAPROXY_CONFIG = """\
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 300s
    timeout server 300s
    timeout check 5s
    retries 3
    retry-on conn-failure empty-response response-timeout
    option redispatch
    # While no replica is ready (their database failing over), an answer clients retry.
    http-error status 503 content-type application/json hdr Retry-After 1 string "{unavailable}"
frontend registry
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /ready
    http-check expect status 200
{servers}
"""

UNAVAILABLE = json.dumps({"errors": [{"code": "UNAVAILABLE", "message": "no replica is ready"}]}).replace('"', '\\"')


@dataclass
class LoadBalancer:
    workdir: Path
    backends: list[str]
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "LoadBalancer":
        binary = shutil.which("haproxy")
        if binary is None:
            raise RuntimeError("haproxy is not installed (scripts/install-test-deps.sh installs it)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        servers = "\n".join(f"    server r{n} {backend} check inter 1s fall 3 rise 1"
                            for n, backend in enumerate(self.backends, start=1))
        config = self.workdir / "haproxy.cfg"
        config.write_text(HAPROXY_CONFIG.format(port=self.port, servers=servers, unavailable=UNAVAILABLE))
        log = (self.workdir / "haproxy.log").open("ab")
        self.process = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{self.host}/health", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("haproxy did not answer")

    def wait_down(self, n: int, timeout: float = 15) -> None:
        """Until the health checks have taken backend ``n`` (1-based) out of rotation."""
        deadline = time.monotonic() + timeout
        log = self.workdir / "haproxy.log"
        while time.monotonic() < deadline:
            if f"Server replicas/r{n} is DOWN" in log.read_text(errors="replace"):
                return
            time.sleep(0.1)
        raise AssertionError(f"haproxy never took replica {n} out of rotation")

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=10)
            self.process = None


class Databases(Protocol):
    def new_database(self) -> str: ...


@dataclass
class Cluster:
    postgres: Postgres | Databases  # a PostgreSQL, or a highly available one (tests/support/patroni.py)
    rgw: RGW
    workdir: Path
    bucket: str = field(default_factory=lambda: f"registry-{uuid.uuid4().hex[:10]}")
    secret_key: str = field(default_factory=lambda: uuid.uuid4().hex * 2)
    replicas: list[RegistryServer] = field(default_factory=list)
    balancer: LoadBalancer | None = None
    database_url: str = ""

    def driver(self) -> S3Driver:
        """The replicas' bucket, as a driver of its own (to look at what is stored)."""
        return S3Driver(self.bucket, prefix="registry", endpoint=self.rgw.endpoint, access_key=self.rgw.access_key,
                        secret_key=self.rgw.secret_key)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "SVC_STORAGE_BACKEND": "s3",
            "SVC_STORAGE_S3_ENDPOINT": self.rgw.endpoint,
            "SVC_STORAGE_S3_BUCKET": self.bucket,
            "SVC_STORAGE_S3_PREFIX": "registry",
            "SVC_STORAGE_S3_ACCESS_KEY": self.rgw.access_key,
            "SVC_STORAGE_S3_SECRET_KEY": self.rgw.secret_key,
            "SVC_DATABASE_URL": self.database_url,
            "SVC_AUTH_TOKEN_BACKEND": "database",
            "SVC_SECRET_KEY": self.secret_key,
            **extra,
        }

    def start(self, replicas: int = 2, database_url: str = "", **extra: str) -> "Cluster":
        self.database_url = database_url or self.postgres.new_database()
        self.driver().client.create_bucket(Bucket=self.bucket)
        for n in range(1, replicas + 1):
            workdir = self.workdir / f"replica{n}"
            # Each replica logs every request with its worker's pid (tests see who served what).
            logged = access_log_env(workdir / "access.log")
            server = RegistryServer(workdir, env_overrides=self.env(**logged, **extra))
            # Migrated once, before the replicas serve, as docs/deployment/replicas.md says to run it
            # (the first replica's start runs it; each run costs a Django start, 1.4 s of CPU).
            self.replicas.append(server.start(migrate=n == 1))
        self.balancer = LoadBalancer(self.workdir / "lb", [r.host for r in self.replicas]).start()
        return self

    @property
    def host(self) -> str:
        assert self.balancer is not None
        return self.balancer.host

    def access_log(self, n: int) -> Path:
        return self.replicas[n].workdir / "access.log"

    def stop(self) -> None:
        if self.balancer is not None:
            self.balancer.stop()
        for server in self.replicas:
            server.stop()
