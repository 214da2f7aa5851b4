"""A throwaway PostgreSQL cluster for end-to-end tests (what scripts/with-postgres.sh does for a run).

Started on a free loopback port in a temp directory, owned by the ``postgres`` system user when the
tests run as root (initdb refuses root), and stopped by ``stop``.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.support.server import free_port


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@dataclass
class Postgres:
    workdir: Path
    bindir: Path
    port: int = 0

    @property
    def url(self) -> str:
        return f"postgresql://registry@127.0.0.1:{self.port}/registry"

    def new_database(self) -> str:
        """The URL of a new, empty database in this cluster (one per test that needs its own)."""
        name = f"registry_{uuid.uuid4().hex[:12]}"
        self.query(f"CREATE DATABASE {name}")
        return f"postgresql://registry@127.0.0.1:{self.port}/{name}"

    def _run(self, *command: str) -> subprocess.CompletedProcess[str]:
        if os.geteuid() == 0:
            line = " ".join(command)
            return subprocess.run(["su", "postgres", "-s", "/bin/sh", "-c", line], capture_output=True,
                                  text=True, timeout=120)
        return subprocess.run(list(command), capture_output=True, text=True, timeout=120)

    def start(self) -> "Postgres":
        if os.geteuid() == 0:
            shutil.chown(self.workdir, "postgres", "postgres")
        self.port = free_port()
        data = self.workdir / "data"
        steps = [
            (str(self.bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "registry", "--no-sync"),
            self._start_command(),
            (str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "registry",
             "registry"),
        ]
        for step in steps:
            done = self._run(*step)
            if done.returncode != 0:
                self.stop()
                raise RuntimeError(f"{step[0]} failed: {done.stderr or done.stdout}")
        return self

    def _start_command(self) -> tuple[str, ...]:
        return (str(self.bindir / "pg_ctl"), "-D", str(self.workdir / "data"), "-l", str(self.workdir / "server.log"),
                "-w", "-o", f"'-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off'",
                "start")

    def start_again(self) -> None:
        """Start the server stopped by ``stop(keep_data=True)``, on the same port."""
        done = self._run(*self._start_command())
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr or done.stdout}")

    def query(self, sql: str) -> str:
        done = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "registry", "-d",
                               "registry", "-tAc", sql], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        return done.stdout.strip()

    def restart(self) -> None:
        """Stop the server (closing every client connection) and start it again on the same port."""
        done = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.workdir / "data"), "-m", "fast", "-w",
                         "-l", str(self.workdir / "server.log"), "restart")
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl restart failed: {done.stderr or done.stdout}")

    def stop(self, keep_data: bool = False) -> None:
        """Stop the server and remove its directory; ``keep_data`` keeps it for ``start_again``."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.workdir / "data"), "-m", "immediate", "stop")
        if not keep_data:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_postgres() -> Postgres:
    """A running cluster, or a RuntimeError naming what is missing."""
    bindir = _bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found (scripts/install-test-deps.sh installs them)")
    return Postgres(Path(tempfile.mkdtemp(prefix="registry-pg-")), bindir).start()
