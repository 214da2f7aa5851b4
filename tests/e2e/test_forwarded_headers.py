"""Under gunicorn: forwarding headers are believed from [server] trusted_proxies only, and gunicorn
itself believes none (a SCRIPT_NAME header from loopback used to rewrite the path Django routed on)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import pytest

from tests.support.rawhttp import Client
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


def logged(server: RegistryServer, request_id: str) -> dict:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in server.log_path.read_text().splitlines():
            if line.startswith("{") and json.loads(line).get("request_id") == request_id:
                return json.loads(line)
        time.sleep(0.05)
    raise AssertionError(f"no log line for {request_id}")


def test_gunicorn_lets_no_header_rewrite_the_path_or_the_scheme(start_registry: Callable[..., RegistryServer]) -> None:
    server = start_registry()
    http = Client(server.host)
    # From loopback, which gunicorn trusted by default: SCRIPT_NAME made /anything/health serve /health.
    moved = http.request("GET", "/anything/health", headers={"SCRIPT_NAME": "/anything"})
    assert moved.status == 404 and moved.body != b'{"status": "ok"}'
    page = http.request("GET", "/ui/sign-in", headers={"X-Forwarded-Proto": "https",
                                                        "X-Forwarded-For": "198.51.100.7",
                                                        "X-Request-ID": "untrusted-1"})
    assert page.status == 200
    assert "strict-transport-security" not in page.headers
    assert "secure" not in page.header("Set-Cookie").lower()
    assert logged(server, "untrusted-1")["client"] == "127.0.0.1"


def test_a_trusted_proxy_names_the_client_and_its_https(start_registry: Callable[..., RegistryServer]) -> None:
    server = start_registry(SVC_SERVER_TRUSTED_PROXIES="127.0.0.1,10.0.0.0/8")
    http = Client(server.host)
    page = http.request("GET", "/ui/sign-in", headers={"X-Forwarded-Proto": "https",
                                                        "X-Forwarded-For": "6.6.6.6, 198.51.100.7, 10.1.1.1",
                                                        "X-Request-ID": "trusted-1"})
    assert page.status == 200
    assert page.header("Strict-Transport-Security").startswith("max-age=")
    assert "secure" in page.header("Set-Cookie").lower()
    # 6.6.6.6 was written by the client; 198.51.100.7 by the first trusted proxy: that is the client.
    assert logged(server, "trusted-1")["client"] == "198.51.100.7"
    plain = http.request("GET", "/health", headers={"X-Request-ID": "trusted-2"})
    assert "strict-transport-security" not in plain.headers
    assert logged(server, "trusted-2")["client"] == "127.0.0.1"
    assert http.request("GET", "/anything/health", headers={"SCRIPT_NAME": "/anything"}).status == 404


def test_the_configuration_refuses_an_entry_that_is_no_address(tmp_path: Path) -> None:
    server = RegistryServer(tmp_path / "bad", env_overrides={"SVC_SERVER_TRUSTED_PROXIES": "proxy.internal"})
    with pytest.raises(RuntimeError):
        server.start(timeout=10, migrate=False)
    assert "[server] trusted_proxies: 'proxy.internal' is not an IP address" in server.log_path.read_text()
