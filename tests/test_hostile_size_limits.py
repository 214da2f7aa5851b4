"""Size limits through gunicorn: manifests over [registry] max_manifest_bytes get 413 however they are
sent, token bodies are capped at 64 KiB, and oversized request lines and headers are refused by
gunicorn before they reach the application, which keeps serving."""
from __future__ import annotations

import json
import socket
from typing import Iterator

import pytest

from tests.faults.wire import OCI_MANIFEST, Registry, image_manifest, read_reply, send_partial
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e
LIMIT = 4096
CONFIG = b'{"architecture":"amd64","os":"linux"}'
LAYER = b"layer" * 100


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    server = RegistryServer(tmp_path_factory.mktemp("limits"), {"SVC_REGISTRY_MAX_MANIFEST_BYTES": str(LIMIT)})
    server.start()
    client = Registry(server.host)
    client.push_blob("team/app", CONFIG)
    client.push_blob("team/app", LAYER)
    yield server
    server.stop()


def manifest_of_size(size: int) -> bytes:
    """A valid manifest padded with an annotation to exactly ``size`` bytes."""
    base = json.loads(image_manifest(CONFIG, [LAYER]))
    base["annotations"] = {"pad": ""}
    pad = size - len(json.dumps(base).encode())
    base["annotations"]["pad"] = "x" * pad
    body = json.dumps(base).encode()
    assert len(body) == size
    return body


def chunked(host: str, method: str, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    sock = send_partial(host, method, path, {"Transfer-Encoding": "chunked", "Content-Type": content_type,
                                             "Connection": "close"}, b"")
    for i in range(0, len(body), 1000):
        piece = body[i:i + 1000]
        sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
    sock.sendall(b"0\r\n\r\n")
    reply = read_reply(sock)
    sock.close()
    return reply


def huge_body(server: RegistryServer, method: str, path: str, content_type: str) -> int:
    """Announce a 1 GiB body, send 128 KiB of it and read the answer: it must come without the rest."""
    sock = send_partial(server.host, method, path, {"Content-Length": str(1 << 30), "Content-Type": content_type},
                        b"{" + b" " * (128 * 1024))
    status, _ = read_reply(sock)
    sock.close()
    return status


def test_it_accepts_a_manifest_at_the_limit_and_refuses_one_byte_more(server) -> None:
    client = Registry(server.host)
    at_limit, over = manifest_of_size(LIMIT), manifest_of_size(LIMIT + 1)
    assert client.request("PUT", "/v2/team/app/manifests/fits", at_limit, {"Content-Type": OCI_MANIFEST}).status == 201
    refused = client.request("PUT", "/v2/team/app/manifests/big", over, {"Content-Type": OCI_MANIFEST})
    assert refused.status == 413 and refused.code() == "MANIFEST_INVALID"
    status, body = chunked(server.host, "PUT", "/v2/team/app/manifests/big", over, OCI_MANIFEST)
    assert status == 413 and json.loads(body)["errors"][0]["code"] == "MANIFEST_INVALID"
    status, _ = chunked(server.host, "PUT", "/v2/team/app/manifests/chunked", at_limit, OCI_MANIFEST)
    assert status == 201
    assert huge_body(server, "PUT", "/v2/team/app/manifests/huge", OCI_MANIFEST) == 413
    assert client.request("GET", "/v2/team/app/manifests/big").status == 404
    assert client.request("GET", "/v2/team/app/manifests/fits").body == at_limit


@pytest.mark.parametrize("path", ["/api/tokens", "/api/tokens/list", "/api/tokens/revoke"])
def test_it_caps_token_bodies_at_64_kib(server, path: str) -> None:
    client = Registry(server.host)
    body = json.dumps({"username": "alice", "password": "x", "description": "d" * 70_000}).encode()
    reply = client.request("POST", path, body, {"Content-Type": "application/json"})
    assert reply.status == 413, reply.body
    assert json.loads(reply.body)["error"]
    assert huge_body(server, "POST", path, "application/json") == 413


def raw_head(server: RegistryServer, head: bytes) -> int:
    host, port = server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        return read_reply(sock)[0]


@pytest.mark.parametrize("head", [
    b"GET /v2/" + b"a" * 10_000 + b"/tags/list HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /v2/ HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 20_000 + b"\r\n\r\n",
    b"GET /v2/ HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(150)) + b"\r\n",
    b"GET /v2/ HTTP/1.1\r\nHost: x\r\nCookie: " + b"c=1; " * 5000 + b"\r\n\r\n",
], ids=["long-request-line", "huge-header", "too-many-headers", "huge-cookie"])
def test_it_refuses_oversized_request_heads_and_keeps_serving(server, head: bytes) -> None:
    assert raw_head(server, head) in (400, 414, 431)
    assert Registry(server.host).request("GET", "/v2/").status == 200
