"""Plain HTTP against a running registry (http.client, one fresh connection per request by default).

What the Django test client cannot show: chunked request bodies, bodies streamed from generators,
what actually goes over the wire for HEAD, and requests landing on different gunicorn workers.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
from dataclasses import dataclass
from typing import Iterable, Iterator

MiB = 1024 * 1024


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    def json(self) -> dict:
        return json.loads(self.body)

    def code(self) -> str:
        """The code of the first error of an OCI error envelope."""
        return json.loads(self.body)["errors"][0]["code"]


class Client:
    """Requests to one registry host; each on a new connection unless ``conn`` is given."""

    def __init__(self, host: str, timeout: float = 120.0) -> None:
        self.host = host
        self.timeout = timeout

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, timeout=self.timeout)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | Iterable[bytes] | None = None,
        headers: dict[str, str] | None = None,
        chunked: bool = False,
        conn: http.client.HTTPConnection | None = None,
    ) -> Reply:
        """Send one request. An iterable body is streamed: chunked if ``chunked``, else the
        caller gives Content-Length."""
        own = conn is None
        conn = conn or self.connect()
        headers = dict(headers or {})
        if chunked:
            headers["Transfer-Encoding"] = "chunked"
            body = [body] if isinstance(body, bytes) else body
        try:
            conn.request(method, path, body=body, headers=headers, encode_chunked=chunked)
            resp = conn.getresponse()
            data = resp.read()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        finally:
            if own:
                conn.close()

    def start_upload(self, name: str) -> str:
        reply = self.request("POST", f"/v2/{name}/blobs/uploads/", headers={"Content-Length": "0"})
        assert reply.status == 202, reply
        return reply.header("Location")

    def push_blob(self, name: str, data: bytes) -> str:
        """Monolithic POST ?digest=; returns the digest."""
        digest = sha256_digest(data)
        reply = self.request("POST", f"/v2/{name}/blobs/uploads/?digest={digest}", body=data,
                             headers={"Content-Type": "application/octet-stream"})
        assert reply.status == 201, reply
        return digest

    def push_manifest(self, name: str, reference: str, manifest: bytes, media_type: str) -> Reply:
        return self.request("PUT", f"/v2/{name}/manifests/{reference}", body=manifest,
                            headers={"Content-Type": media_type})


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def raw_exchange(host: str, request_head: str) -> tuple[str, bytes]:
    """Send a bodiless request with ``Connection: close`` and return (response head, every byte
    after it), read to EOF: the ground truth of what the server wrote."""
    hostname, port = host.rsplit(":", 1)
    with socket.create_connection((hostname, int(port)), timeout=30) as sock:
        sock.sendall(request_head.encode("latin-1"))
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
    head, _, rest = bytes(received).partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def head_headers(head: str) -> dict[str, str]:
    lines = head.split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}


def dechunk(data: bytes) -> bytes:
    """The payload of a body sent with ``Transfer-Encoding: chunked``."""
    out = bytearray()
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += data[:size]
        data = data[size + 2:]


class GeneratedStream:
    """``total`` bytes produced on the fly in ``chunk``-sized pieces and hashed as they are sent.

    Only one chunk exists at a time; each differs from the others (a counter is written into it).
    """

    def __init__(self, total: int, chunk: int = MiB) -> None:
        assert total % chunk == 0
        self.total = total
        self.chunk = chunk
        self.hasher = hashlib.sha256()
        self.sent = 0
        self._block = os.urandom(chunk)

    def _chunks(self) -> Iterator[bytes]:
        for i in range(self.total // self.chunk):
            yield i.to_bytes(8, "big") + self._block[8:]

    def __iter__(self) -> Iterator[bytes]:
        for data in self._chunks():
            self.hasher.update(data)
            self.sent += len(data)
            yield data

    def digest_ahead(self) -> str:
        """The digest of what will be sent, by generating it once without sending (a monolithic
        POST names its digest before the body)."""
        hasher = hashlib.sha256()
        for data in self._chunks():
            hasher.update(data)
        return "sha256:" + hasher.hexdigest()

    @property
    def digest(self) -> str:
        assert self.sent == self.total, "the stream was not sent completely"
        return "sha256:" + self.hasher.hexdigest()
