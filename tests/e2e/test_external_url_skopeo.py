"""The Bearer realm under gunicorn, with skopeo reaching the registry by an address that is not
loopback: without ``[server] external_url`` the challenge names no host (the request's Host is not
believed) and skopeo refuses the relative realm rather than send the credentials anywhere; with it,
skopeo gets its token from the configured URL and pushes. (README, Docker's token flow.)"""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.support.auth import write_htpasswd
from tests.support.images import Layout
from tests.support.server import RegistryServer, free_port

pytestmark = pytest.mark.e2e


def _outside_address() -> str:
    """An address of this machine that is not loopback (the one its default route leaves from)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
        address = probe.getsockname()[0]
    except OSError:
        address = ""
    finally:
        probe.close()
    if not address or address.startswith("127."):
        pytest.skip("this machine has no address but loopback")
    return address


@pytest.fixture
def outside_server(tmp_path: Path) -> Iterator[Callable[..., RegistryServer]]:
    """A server listening on every address, with authentication and the Bearer challenge on."""
    servers: list[RegistryServer] = []

    def start(**env: str) -> RegistryServer:
        port = free_port()
        users = write_htpasswd(tmp_path / "users.htpasswd", {"alice": "wonderland"})
        server = RegistryServer(tmp_path / "server", {
            "SVC_SERVER_BIND": f"0.0.0.0:{port}", "SVC_AUTH_ENABLED": "true", "SVC_AUTH_CHALLENGE": "bearer",
            "SVC_AUTH_HTPASSWD_FILE": str(users), **env}, port=port)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize("configured", [False, True], ids=["no-external-url", "external-url"])
def test_skopeo_follows_only_a_configured_realm(outside_server: Callable[..., RegistryServer], skopeo,
                                                tmp_path: Path, configured: bool) -> None:
    address = _outside_address()
    server = outside_server()
    if configured:  # the port is known once it runs: again, with the URL clients use
        server.stop()
        server.env_overrides["SVC_SERVER_EXTERNAL_URL"] = f"http://{address}:{server.port}"
        server.start()
    layout = Layout(tmp_path / "src")
    manifest, _layers, _ = layout.image_manifest(layers=1, layer_size=4096, seed="realm")
    layout.tag("v1", "application/vnd.oci.image.manifest.v1+json", manifest)

    pushed = skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", "alice:wonderland",
                        f"oci:{layout.root}:v1", f"docker://{address}:{server.port}/team/app:v1", check=False)

    if configured:
        assert pushed.returncode == 0, pushed.stderr
    else:
        assert pushed.returncode != 0
        assert "/auth/token?" in pushed.stderr and "unsupported protocol scheme" in pushed.stderr
        assert "warning" in {e["level"] for e in server.log_entries() if "external_url" in e["message"]}
