"""HTTPS served by the registry itself (``[server] tls_cert`` / ``tls_key``) with a CA of the test's own
making: skopeo (``--dest-cert-dir`` / ``--src-cert-dir``) and the Docker engine (the CA in its
``certs.d``) push and pull, and refuse the server until they trust the CA; blobs come whole and by
range through the worker's own TLS sender; plain HTTP on the port is told to use HTTPS, and the
application knows its requests came over HTTPS (HSTS)."""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.support.certs import CA, Issued, tls_env
from tests.support.docker import Docker
from tests.support.images import build_image
from tests.support.ports import free_port
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e
DOCKER_CERTS = Path("/etc/docker/certs.d")  # where dockerd looks, per registry host:port


@pytest.fixture
def ca(tmp_path: Path) -> CA:
    return CA(tmp_path / "ca")


def _issue(ca: CA, tmp_path: Path, *hosts: str) -> Issued:
    (tmp_path / "tls").mkdir(exist_ok=True)
    return ca.issue(tmp_path / "tls" / "cert.pem", tmp_path / "tls" / "key.pem", hosts=hosts or ("127.0.0.1",))


def _cert_dir(ca: CA, path: Path) -> Path:
    path.mkdir(parents=True)
    shutil.copy(ca.cert_file, path / "ca.crt")
    return path


def test_skopeo_pushes_and_pulls_over_https(start_registry: Callable[..., RegistryServer], skopeo, ca: CA,
                                            tmp_path: Path) -> None:
    server = start_registry(ca_file=ca.cert_file, **tls_env(_issue(ca, tmp_path)))
    image = build_image(tmp_path / "src", layers=2, layer_size=3 * 1024 * 1024)
    target = f"docker://{server.host}/team/app:v1"
    untrusted = skopeo.run("copy", f"oci:{image.layout}:v1", target, check=False)
    assert untrusted.returncode != 0 and "certificate signed by unknown authority" in untrusted.stderr

    certs = _cert_dir(ca, tmp_path / "certs")
    skopeo.run("copy", "--dest-cert-dir", str(certs), f"oci:{image.layout}:v1", target)
    out = tmp_path / "out"
    skopeo.run("copy", "--src-cert-dir", str(certs), target, f"oci:{out}:v1")
    assert sorted(p.name for p in (out / "blobs" / "sha256").iterdir()) == \
        sorted(p.name for p in (image.layout / "blobs" / "sha256").iterdir())

    layer = image.layer_digests[0]
    data = (image.layout / "blobs" / "sha256" / layer.removeprefix("sha256:")).read_bytes()
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=ca.client_context(), timeout=30)
    for _ in range(2):  # the second on the same connection: kept alive after a file sent by the loop
        connection.request("GET", f"/v2/team/app/blobs/{layer}")
        whole = connection.getresponse()
        assert whole.status == 200 and hashlib.sha256(whole.read()).hexdigest() == layer.removeprefix("sha256:")
    connection.request("GET", f"/v2/team/app/blobs/{layer}", headers={"Range": "bytes=1000-2000999"})
    part = connection.getresponse()
    assert part.status == 206 and part.read() == data[1000:2001000]
    connection.request("HEAD", f"/v2/team/app/blobs/{layer}")
    head = connection.getresponse()
    assert head.status == 200 and int(head.getheader("Content-Length")) == len(data) and head.read() == b""
    connection.close()
    log = server.log_path.read_text()
    assert "Traceback" not in log and '"level":"error"' not in log


def test_plain_http_on_the_https_port_is_told_to_use_https(start_registry, ca: CA, tmp_path: Path) -> None:
    server = start_registry(ca_file=ca.cert_file, **tls_env(_issue(ca, tmp_path)))
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and "https://" in json.loads(body)["error"]
    with server.open("/v2/") as response:  # and HTTPS goes on, known to the application as such
        assert response.status == 200
        assert response.headers["Docker-Distribution-API-Version"] == "registry/2.0"
        assert response.headers["Strict-Transport-Security"].startswith("max-age=")


def _outside_address() -> str:
    """An address of this machine that is not loopback: the Docker engine treats 127.0.0.0/8 as an
    insecure registry, which it would not ask to be trusted."""
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
def docker_certs() -> Iterator[list[Path]]:
    """certs.d directories the test writes, removed afterwards (they are the machine's)."""
    made: list[Path] = []
    yield made
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def test_docker_pushes_and_pulls_over_https(docker: Docker, start_registry: Callable[..., RegistryServer], ca: CA,
                                            tmp_path: Path, docker_certs: list[Path]) -> None:
    address, port = _outside_address(), free_port()
    server = start_registry(port=port, ca_file=ca.cert_file, SVC_SERVER_BIND=f"0.0.0.0:{port}",
                            **tls_env(_issue(ca, tmp_path, address, "127.0.0.1")))
    registry = f"{address}:{server.port}"
    image = f"{registry}/team/busybox:{uuid.uuid4().hex[:8]}"
    docker.import_busybox(image)
    untrusted = docker.run("push", image, check=False)
    assert untrusted.returncode != 0 and "certificate signed by unknown authority" in untrusted.stderr

    docker_certs.append(DOCKER_CERTS / registry)
    _cert_dir(ca, DOCKER_CERTS / registry)
    docker.run("push", image)
    pushed_id = docker.run("image", "inspect", "--format", "{{.Id}}", image).stdout.strip()
    docker.run("rmi", image)
    docker.run("pull", image)
    assert docker.run("image", "inspect", "--format", "{{.Id}}", image).stdout.strip() == pushed_id
    docker.run("rmi", image)
    asked = {(line["method"], line["path"].split("/")[4], line["status"]) for line in server.request_lines()
             if line["path"].startswith("/v2/team/busybox/")}
    assert {("PUT", "manifests", 201), ("GET", "manifests", 200), ("GET", "blobs", 200)} <= asked, asked


def test_gunicorns_own_certfile_is_refused_for_tls_cert(ca: CA, tmp_path: Path) -> None:
    """gunicorn's certfile would do each handshake in a request thread: the worker refuses to boot
    and says what to set instead."""
    issued = _issue(ca, tmp_path)
    server = RegistryServer(tmp_path / "server", env_overrides={
        "GUNICORN_CMD_ARGS": f"--certfile {issued.cert} --keyfile {issued.key}"})
    with pytest.raises(RuntimeError, match="exited early"):
        server.start(timeout=60)
    assert "set [server] tls_cert and tls_key rather than gunicorn's certfile and keyfile" in \
        server.log_path.read_text()


def test_pipelined_requests_after_an_upload_are_all_answered(start_registry, ca: CA, tmp_path: Path) -> None:
    """A request pipelined behind an upload, in the same TLS record as the body's end: the upload
    thread reads 8 KiB at a time, so the rest of that record stays decrypted in the SSL object,
    which no longer makes the socket readable; the loop must read it from there."""
    server = start_registry(ca_file=ca.cert_file, **tls_env(_issue(ca, tmp_path)))
    record = 16384  # what OpenSSL puts in one record of a large write
    head = b"POST /v2/team/app/blobs/uploads/?digest=%s HTTP/1.1\r\nHost: x\r\nContent-Length: %05d\r\n\r\n"
    body_end = 2 * record + 200  # early in the third record, whose first 8 KiB the thread then reads
    blob = os.urandom(body_end - len(head % (b"sha256:" + b"0" * 64, 0)))
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    upload = head % (digest.encode(), len(blob)) + blob
    assert len(upload) == body_end
    health = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    padding = 3 * record - 1000 - body_end - len(health) - 100  # all of it within the third record
    pipelined = f"GET /v2/team/app/blobs/{digest} HTTP/1.1\r\nHost: x\r\nX-Padding: {'x' * padding}\r\n\r\n"
    requests = upload + pipelined.encode() + health
    assert 2 * record + 8192 < len(requests) < 3 * record
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        with ca.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(requests)
            reply = b""
            while chunk := tls.recv(65536):
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 201 ") and reply.count(b"HTTP/1.1 200 OK") == 2, reply[:300]
    assert blob in reply and b'{"status": "ok"}' in reply[-100:]
