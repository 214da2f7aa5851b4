"""deploy/systemd/svc-registry.service: systemd accepts it (systemd-analyze verify), it runs what
`make run` runs, stops gracefully and leaves only data/ writable, and its Type=notify holds: gunicorn
tells the notify socket when it listens (without that, systemd would fail every start after 90 s)."""
from __future__ import annotations

import configparser
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import require_tool
from tests.support.server import REPO, VENV_BIN, RegistryServer

UNIT = REPO / "deploy" / "systemd" / "svc-registry.service"
CHECKOUT = "/srv/svc-registry"


def service() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser["Service"]


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    verify = require_tool("systemd-analyze")
    checkout = tmp_path / "svc-registry"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    for name in ("python", "gunicorn"):
        (checkout / ".venv" / "bin" / name).symlink_to(VENV_BIN / name)
    unit = tmp_path / "svc-registry.service"
    unit.write_text(UNIT.read_text().replace(CHECKOUT, str(checkout)))
    done = subprocess.run([verify, "verify", str(unit)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and "svc-registry.service" not in done.stderr + done.stdout, done.stderr


def test_it_runs_the_checkout_as_make_run_does_behind_a_proxy_and_stops_gracefully() -> None:
    unit = service()
    assert unit["ExecStart"] == f"{CHECKOUT}/.venv/bin/gunicorn -c gunicorn.conf.py"
    assert unit["ExecStartPre"] == f"{CHECKOUT}/.venv/bin/python manage.py migrate --noinput"
    assert unit["WorkingDirectory"] == CHECKOUT and unit["Environment"] == "SVC_SERVER_BIND=127.0.0.1:4000"
    graceful = re.search(r"^graceful_timeout = (\d+)", (REPO / "gunicorn.conf.py").read_text(), re.M)
    assert graceful is not None
    assert unit["KillMode"] == "mixed" and int(unit["TimeoutStopSec"]) > int(graceful[1])
    assert unit["ExecReload"] == "/bin/kill -HUP $MAINPID"
    # Writable: the data directory, where the defaults put storage, database, tokens and the key.
    assert unit["ProtectSystem"] == "strict" and unit["ReadWritePaths"] == f"{CHECKOUT}/data"
    assert unit["User"] != "root" and unit["NoNewPrivileges"] == "yes" and unit["CapabilityBoundingSet"] == ""


@pytest.mark.e2e
def test_gunicorn_tells_systemd_when_it_is_ready(tmp_path: Path) -> None:
    assert service()["Type"] == "notify"
    if shutil.which("gunicorn", path=str(VENV_BIN)) is None:
        pytest.skip("gunicorn is not installed")
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(path))
        notify.settimeout(60)
        server = RegistryServer(tmp_path / "server", {"NOTIFY_SOCKET": str(path)}, workers=1).start()
        try:
            message = notify.recv(4096).decode()
        finally:
            server.stop()
    assert "READY=1" in message.split("\n"), message
