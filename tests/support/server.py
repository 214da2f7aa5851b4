"""Run the registry under gunicorn for end-to-end tests: temp data, free port, real HTTP."""
from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
# gunicorn access-log line: worker pid, method, path, query, status.
ACCESS_LOG_FORMAT = "%(p)s %(m)s %(U)s %(q)s %(s)s"


@dataclass
class RegistryServer:
    """One gunicorn process tree serving the project from ``workdir`` (storage, db, tokens inside).

    ``start`` migrates the database first; a new SQLite database in ``workdir`` (the default) is a copy
    of the one ``manage.py migrate`` wrote once for the test process (``copy_migrated``), which saves
    an interpreter start and a migration (about a second) per server. ``copy_migrated=False`` runs
    migrate itself, for a test of what migrate creates."""

    workdir: Path
    env_overrides: dict[str, str] = field(default_factory=dict)
    workers: int = 2
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    copy_migrated: bool = True
    ca_file: Path | None = None  # the CA of its certificate when it serves HTTPS ([server] tls_cert)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.ca_file else 'http'}://{self.host}"

    def open(self, path: str, timeout: float = 30) -> Any:
        """GET ``path`` (urllib's response), trusting the server's CA when it serves HTTPS."""
        context = ssl.create_default_context(cafile=str(self.ca_file)) if self.ca_file else None
        return urllib.request.urlopen(f"{self.url}{path}", timeout=timeout, context=context)

    @property
    def log_path(self) -> Path:
        return self.workdir / "gunicorn.log"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
        env.update(
            {
                "SVC_CONFIG": str(self.workdir / "config.toml"),
                "SVC_SERVER_BIND": self.host,
                "SVC_SERVER_WORKERS": str(self.workers),
                "SVC_STORAGE_ROOT": str(self.workdir / "registry"),
                "SVC_DATABASE_URL": f"sqlite:///{self.workdir / 'db.sqlite3'}",
                "SVC_AUTH_TOKEN_STORAGE": str(self.workdir / "tokens"),
                "SVC_AUTH_HTPASSWD_FILE": str(self.workdir / "users.htpasswd"),
                "SVC_SERVER_SECRET_KEY_FILE": str(self.workdir / "secret_key"),
                "DJANGO_SETTINGS_MODULE": "regsite.settings",
                # gunicorn.conf.py's metrics directory is made with tempfile: in the workdir, a
                # master killed with SIGKILL (a crash test) leaves it there, not in /tmp.
                "TMPDIR": str(self.workdir / "tmp"),
            }
        )
        env.update(self.env_overrides)
        return env

    def log_entries(self, logger: str | None = None) -> list[dict[str, Any]]:
        """The server's log lines (each one JSON object), only ``logger``'s when given."""
        entries = [json.loads(line) for line in self.log_path.read_text().splitlines()]
        return [e for e in entries if logger is None or e["logger"] == logger]

    def request_lines(self, path: str | None = None) -> list[dict[str, Any]]:
        """The request log's lines (ops.middleware), only those for ``path`` when given: what the
        clients asked for, with the status and the principal that answered."""
        lines = [json.loads(line) for line in self.log_path.read_text().splitlines() if line.startswith("{")]
        return [line for line in lines if line["logger"] == "ops.requests"
                and (path is None or line.get("path") == path)]

    def metric(self, name: str, **labels: str) -> float:
        """The sum over ``/metrics`` of the samples named ``name`` that carry ``labels``."""
        from prometheus_client.parser import text_string_to_metric_families

        with self.open("/metrics") as response:
            text = response.read().decode()
        return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                   if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()))

    def manage(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``manage.py`` against this server's configuration."""
        return subprocess.run(
            [str(VENV_BIN / "python"), str(REPO / "manage.py"), *args],
            cwd=REPO, env=self.env(), input=input, capture_output=True, text=True, timeout=120,
        )

    def start(self, timeout: float = 30.0, migrate: bool = True) -> "RegistryServer":
        (self.workdir / "tmp").mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.toml"
        if not config.exists():
            config.write_text("")
        if not self.port:
            self.port = free_port()
        database = self.workdir / "db.sqlite3"
        if migrate and self.copy_migrated and not database.exists() and \
                self.env()["SVC_DATABASE_URL"] == f"sqlite:///{database}":
            shutil.copy2(_migrated_database(), database)  # with its mode: migrate's, 0600
        elif migrate:
            migrated = self.manage("migrate", "--noinput")
            if migrated.returncode != 0:
                raise RuntimeError(f"migrate failed: {migrated.stderr}")
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [str(VENV_BIN / "gunicorn"), "-c", str(REPO / "gunicorn.conf.py")],
            cwd=REPO, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited early:\n{self.log_path.read_text()[-3000:]}")
            try:
                with self.open("/v2/", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"gunicorn did not answer in {timeout}s:\n{self.log_path.read_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            # Longer than gunicorn's graceful_timeout (30 s): a worker still booting on a busy
            # machine may hold the master that long, and a SIGKILL then loses its last log lines.
            self.process.wait(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def kill(self) -> None:
        """SIGKILL the whole process tree, as a crash would."""
        self.stop(signal.SIGKILL)

    def pids(self) -> list[int]:
        """The gunicorn master and its workers."""
        if self.process is None:
            return []
        out = subprocess.run(["pgrep", "-g", str(self.process.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]


_migrated: list[Path] = []
_migrating = threading.Lock()


def _migrated_database() -> Path:
    """A SQLite database that ``manage.py migrate`` wrote, made once per test process (the schema and
    rows migrate writes depend on no setting)."""
    with _migrating:
        if not _migrated:
            workdir = Path(tempfile.mkdtemp(prefix="registry-migrated-"))
            atexit.register(shutil.rmtree, workdir, True)
            template = RegistryServer(workdir, port=1)  # never started: the port only has to be valid
            (workdir / "config.toml").write_text("")
            done = template.manage("migrate", "--noinput")
            if done.returncode != 0:
                raise RuntimeError(f"migrate failed: {done.stderr}")
            if list(workdir.glob("db.sqlite3-*")):  # a journal left behind: the file alone is not the database
                raise RuntimeError(f"migrate left a journal beside {workdir / 'db.sqlite3'}")
            _migrated.append(workdir / "db.sqlite3")
        return _migrated[0]


def access_log_env(path: Path) -> dict[str, str]:
    """Env for ``start_registry(**...)``: gunicorn logs every request with its worker's pid to ``path``.

    GUNICORN_CMD_ARGS wins over gunicorn.conf.py, which keeps the access log off.
    """
    args = ["--access-logfile", str(path), "--access-logformat", ACCESS_LOG_FORMAT]
    return {"GUNICORN_CMD_ARGS": shlex.join(args)}


@dataclass(frozen=True)
class AccessEntry:
    pid: int
    method: str
    path: str
    query: str
    status: int


def read_access_log(
    path: Path, until: Callable[[list[AccessEntry]], bool] = lambda _entries: True, timeout: float = 10.0
) -> list[AccessEntry]:
    """The parsed access log, once ``until(entries)`` holds (gunicorn logs a request after replying)."""
    deadline = time.monotonic() + timeout
    while True:
        entries = []
        text = path.read_text() if path.exists() else ""
        for line in text.split("\n")[:-1]:  # the last piece is empty or a line still being written
            pid, method, url_path, query, status = (line.split(" ") + [""] * 5)[:5]
            entries.append(AccessEntry(int(pid.strip("<>")), method, url_path, query, int(status)))
        if until(entries):
            return entries
        if time.monotonic() > deadline:
            raise AssertionError(f"the access log {path} never showed what was expected")
        time.sleep(0.02)
