"""What the fault tests need beyond a normal client: half-sent requests over raw sockets, the open
file descriptors of the workers, and a check that storage and the database agree."""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import select
import socket
import sqlite3
import ssl
import struct
import threading
import time
from pathlib import Path
from typing import Callable

from tests.support.rawhttp import Reply, dechunk
from tests.support.server import RegistryServer

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MiB = 1024 * 1024


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Registry:
    """HTTP to one registry (HTTPS with ``context``); a new connection per request."""

    def __init__(self, host: str, headers: dict[str, str] | None = None, timeout: float = 60,
                 source: str | None = None, context: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.headers = headers or {}
        self.timeout = timeout
        self.source = (source, 0) if source else None  # e.g. 127.0.0.2: another client address
        self.context = context

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        """Send while watching for an early answer, as Go's HTTP client (docker, skopeo) does.

        A server that refuses a body part-way (disk full) answers and closes once gunicorn has
        drained 64 KiB of it; a client that only reads after sending everything would see a
        broken pipe instead of the answer.
        """
        host, port = self.host.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=self.timeout, source_address=self.source)
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_hostname=host)
        try:
            lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}", "Connection: close",
                     f"Content-Length: {len(body or b'')}"]
            lines += [f"{k}: {v}" for k, v in {**self.headers, **(headers or {})}.items()]
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            pending = memoryview(body or b"")
            if self.context is not None:  # the server's TLS session tickets make the socket readable at once
                sock.sendall(pending)
                pending = pending[len(pending):]
            while pending:
                readable, writable, _ = select.select([sock], [sock], [], self.timeout)
                if readable:
                    break  # answered before the whole body was sent
                if writable:
                    try:
                        pending = pending[sock.send(pending[:256 * 1024]):]
                    except (BrokenPipeError, ConnectionResetError):
                        break
            resp = http.client.HTTPResponse(sock, method=method)
            resp.begin()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            sock.close()

    def push_blob(self, name: str, data: bytes) -> str:
        reply = self.request("POST", f"/v2/{name}/blobs/uploads/?digest={digest(data)}", data,
                             {"Content-Type": "application/octet-stream"})
        assert reply.status == 201, (reply.status, reply.body)
        return digest(data)

    def push_image(self, name: str, tag: str, layers: list[bytes]) -> tuple[str, bytes]:
        """Push a config, the layers and a manifest; returns the manifest digest and bytes."""
        config = json.dumps({"architecture": "amd64", "os": "linux", "tag": tag}).encode()
        for blob in [config, *layers]:
            self.push_blob(name, blob)
        manifest = image_manifest(config, layers)
        reply = self.request("PUT", f"/v2/{name}/manifests/{tag}", manifest, {"Content-Type": OCI_MANIFEST})
        assert reply.status == 201, (reply.status, reply.body)
        return digest(manifest), manifest

    def pull_image(self, name: str, reference: str) -> dict[str, bytes]:
        """Every blob of an image, each checked against its digest; keyed by digest."""
        reply = self.request("GET", f"/v2/{name}/manifests/{reference}", headers={"Accept": OCI_MANIFEST})
        assert reply.status == 200, (reply.status, reply.body)
        assert reply.header("Docker-Content-Digest") == digest(reply.body)
        doc = json.loads(reply.body)
        blobs = {}
        for descriptor in [doc["config"], *doc["layers"]]:
            got = self.request("GET", f"/v2/{name}/blobs/{descriptor['digest']}")
            assert got.status == 200, (got.status, got.body[:200])
            assert digest(got.body) == descriptor["digest"] and len(got.body) == descriptor["size"]
            blobs[descriptor["digest"]] = got.body
        return blobs


def image_manifest(config: bytes, layers: list[bytes]) -> bytes:
    return json.dumps({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": digest(x), "size": len(x)} for x in layers],
    }).encode()


def send_partial(host: str, method: str, path: str, headers: dict[str, str], body_prefix: bytes) -> socket.socket:
    """Send a request head and the first bytes of its body; the caller decides what happens next."""
    hostname, port = host.rsplit(":", 1)
    sock = socket.create_connection((hostname, int(port)), timeout=30)
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock.sendall(head.encode("latin-1") + body_prefix)
    return sock


def exchange(host: str, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """A request whose answer may come before its body is all sent (a server may refuse early and
    close): the body goes out from a thread while the reply is read, as careful clients do."""
    sock = send_partial(host, method, path, {**headers, "Content-Length": str(len(body)), "Connection": "close"},
                        b"")

    def pump() -> None:
        try:
            sock.sendall(body)
        except OSError:
            pass  # the server answered and closed: the reply is what matters

    sender = threading.Thread(target=pump, daemon=True)
    sender.start()
    try:
        return read_reply(sock)
    finally:
        sock.close()
        sender.join(timeout=30)


def reset(sock: socket.socket) -> None:
    """Close with an RST, as a client that crashes or loses its network does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def read_reply(sock: socket.socket) -> tuple[int, bytes]:
    """Read a whole response (until the server closes or Content-Length is reached), after any
    interim one (``100 Continue``)."""
    data = bytearray()
    while b"\r\n\r\n" not in data or data.startswith(b"HTTP/1.1 1"):
        if data.startswith(b"HTTP/1.1 1") and b"\r\n\r\n" in data:
            del data[:data.index(b"\r\n\r\n") + 4]
            continue
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    if not head:
        return 0, b""
    status = int(head.split(b" ", 2)[1])
    lines = [line.lower() for line in head.split(b"\r\n")]
    length = next((int(line.split(b":", 1)[1]) for line in lines if line.startswith(b"content-length:")), None)
    body = bytearray(rest)
    chunked = b"transfer-encoding: chunked" in lines
    while (len(body) < length) if length is not None else (chunked and not body.endswith(b"0\r\n\r\n")):
        chunk = sock.recv(MiB)
        if not chunk:
            break
        body += chunk
    return status, dechunk(bytes(body)) if chunked else bytes(body)



def wait_until(condition: Callable[[], bool], timeout: float = 15, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def upload_files(server: RegistryServer) -> dict[str, int]:
    """Upload session id -> size of its data on disk (-1: a session directory without data)."""
    uploads = storage_root(server) / "uploads"
    if not uploads.is_dir():
        return {}
    return {p.name: (p / "data").stat().st_size if (p / "data").exists() else -1 for p in uploads.iterdir()}


def storage_root(server: RegistryServer) -> Path:
    return Path(server.env()["SVC_STORAGE_ROOT"])


def db_rows(server: RegistryServer, query: str) -> list[tuple]:
    path = server.env()["SVC_DATABASE_URL"].removeprefix("sqlite:///")
    with sqlite3.connect(path, timeout=30) as conn:
        return conn.execute(query).fetchall()


def worker_fds(server: RegistryServer) -> dict[int, list[str]]:
    """Open descriptors of every process of the server: pid -> their targets."""
    fds = {}
    for pid in server.pids():
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue
        targets = []
        for name in names:
            try:
                targets.append(os.readlink(f"/proc/{pid}/fd/{name}"))
            except FileNotFoundError:
                pass
        fds[pid] = sorted(targets)
    return fds


def storage_fds(server: RegistryServer) -> list[str]:
    """Descriptors any process of the server holds on files below the storage root."""
    root = str(storage_root(server).resolve())
    return [t for targets in worker_fds(server).values() for t in targets if t.startswith(root)]


def storage_problems(server: RegistryServer) -> list[str]:
    """Where storage and the database disagree: blob rows without data, data without rows, upload
    sessions without data or data without a session, and temp files. Empty when they agree."""
    root = storage_root(server)
    problems = []
    rows = {d for (d,) in db_rows(server, "SELECT digest FROM registry_blob")}
    on_disk = set()
    for data in root.glob("blobs/*/*/*/data"):
        on_disk.add(f"{data.parts[-4]}:{data.parts[-2]}")
        algorithm, hex_part = data.parts[-4], data.parts[-2]
        actual = hashlib.new(algorithm, data.read_bytes()).hexdigest()
        if actual != hex_part:
            problems.append(f"blob file {data} holds {algorithm}:{actual}")
    problems += [f"blob row without data: {d}" for d in sorted(rows - on_disk)]
    problems += [f"blob data without a row: {d}" for d in sorted(on_disk - rows)]
    sessions = {u for (u,) in db_rows(server, "SELECT id FROM registry_upload")}
    files = upload_files(server)
    problems += [f"upload session without data: {u}" for u in sorted(sessions - set(files))]
    # A start killed between creating its (empty) data file and recording its session leaves the file
    # alone: no client byte is in it, no one can reach it, and purge_expired removes it. Data with
    # bytes in it and no session would be a lost upload.
    problems += [f"upload data without a session: {u}" for u in sorted(set(files) - sessions) if files[u] != 0]
    problems += [f"temp file left: {p}" for p in root.rglob("*") if p.is_file() and
                 (p.name.endswith(".tmp") or p.name.startswith("."))]
    return problems


def scrub_problems(server: RegistryServer) -> list[str]:
    """What ``manage.py scrub`` (the storage-lifecycle check) finds, grace period off; empty when clean."""
    result = server.manage("scrub", "--grace-hours", "0")
    if result.returncode == 0:
        return []
    return [line for line in result.stdout.splitlines() if not line.startswith("checked ")] + [result.stderr.strip()]
