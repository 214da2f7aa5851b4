"""What gunicorn is started with: the tested major version, and no control socket (one path per user
and host, which two instances on one host would fight over)."""
from __future__ import annotations

import importlib.metadata
import os
import signal
import socket
import subprocess
import time
import urllib.error

import pytest

from tests.support.server import REPO, VENV_BIN, RegistryServer, free_port

pytestmark = pytest.mark.e2e


def test_it_runs_the_gunicorn_it_is_tested_with() -> None:
    assert importlib.metadata.version("gunicorn").split(".")[0] == "27"


def test_two_instances_on_one_host_start_without_a_control_socket(start_registry) -> None:
    one, two = start_registry(name="one"), start_registry(name="two")
    for server in (one, two):
        log = server.log_path.read_text()
        assert "Control socket" not in log and "Permission denied" not in log, log[-2000:]


def test_it_warns_once_when_open_to_the_network_without_authentication(start_registry, tmp_path) -> None:
    port = free_port()
    open_to_all = RegistryServer(tmp_path / "open", {"SVC_SERVER_BIND": f"0.0.0.0:{port}"}, port=port).start()
    try:
        log = open_to_all.log_path.read_text()
    finally:
        open_to_all.stop()
    assert log.count("authentication is off and the registry listens on 0.0.0.0") == 1
    local = start_registry(name="local")
    assert "authentication is off" not in local.log_path.read_text()


def test_a_port_in_use_is_said_in_one_line_naming_the_setting(tmp_path) -> None:
    server = RegistryServer(tmp_path / "server")
    busy = socket.create_server(("127.0.0.1", 0))  # another program on the port
    port = busy.getsockname()[1]
    env = {**server.env(), "SVC_SERVER_BIND": f"127.0.0.1:{port}", "SVC_CONFIG": os.devnull}
    (server.workdir / "tmp").mkdir(parents=True)
    try:
        started = time.monotonic()
        done = subprocess.run([str(VENV_BIN / "gunicorn"), "-c", "gunicorn.conf.py"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
    finally:
        busy.close()
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if '"level":"info"' not in line]
    assert errors == [f"configuration error: [server] bind: 127.0.0.1:{port} is in use by another program: stop "
                      "it, or set SVC_SERVER_BIND (or [server] bind) to a free address"], done.stderr
    assert took < 20  # no five retries a second apart
    assert list((server.workdir / "tmp").iterdir()) == []  # its metrics directory went with it


def test_sighup_applies_a_changed_configuration_file_and_refuses_a_broken_one(start_registry) -> None:
    """The master imports Django and the libraries for its workers to share (regsite/preload.py), but
    not the settings: the workers SIGHUP starts read the file again. A file with a mistake changes
    nothing (regsite.config.load_for_master): the master exiting would take the service down."""
    server = start_registry(workers=1)
    with server.open("/v2/_catalog") as response:
        assert response.status == 200
    (server.workdir / "config.toml").write_text("[auth]\nenabled = true\n")  # and no htpasswd file
    booted = server.log_path.read_text().count("Booting worker")
    os.kill(server.process.pid, signal.SIGHUP)
    deadline = time.monotonic() + 30
    while server.log_path.read_text().count("Booting worker") == booted:  # a worker started after it
        assert server.process.poll() is None, server.log_path.read_text()[-2000:]
        assert time.monotonic() < deadline, "no worker started 30 s after SIGHUP"
        time.sleep(0.2)
    assert "the reload (SIGHUP) is refused" in server.log_path.read_text()
    for _ in range(5):
        with server.open("/v2/_catalog", timeout=5) as response:
            assert response.status == 200  # still the configuration from before: no authentication
        time.sleep(0.2)
    assert server.process.poll() is None

    (server.workdir / "users.htpasswd").write_text("")
    os.kill(server.process.pid, signal.SIGHUP)
    deadline = time.monotonic() + 30
    while True:
        try:
            with server.open("/v2/_catalog", timeout=5):
                pass
        except urllib.error.HTTPError as refused:
            assert refused.code == 401
            break
        assert time.monotonic() < deadline, "still open 30 s after SIGHUP"
        time.sleep(0.2)
    assert server.process.poll() is None
