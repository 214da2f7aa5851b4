"""A registry client for the workloads: keep-alive http.client, blobs streamed, never held whole."""
from __future__ import annotations

import hashlib
import http.client
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Iterator
from urllib.parse import urlsplit

from bench.servers import Endpoint

MIB = 1024 * 1024
PIECE = MIB
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
EMPTY_JSON = b"{}"
EMPTY_DIGEST = "sha256:" + hashlib.sha256(EMPTY_JSON).hexdigest()
ACCEPT = ", ".join([
    OCI_MANIFEST,
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
])


class ClientError(RuntimeError):
    """A request the workload relies on did not get the expected answer."""


@lru_cache(maxsize=1)
def _noise() -> bytes:
    return os.urandom(PIECE)


@dataclass(frozen=True)
class BlobSource:
    """``size`` bytes that differ for each ``seed``, produced 1 MiB at a time, with their digest."""

    seed: str
    size: int

    def pieces(self) -> Iterator[bytes]:
        noise = _noise()
        left, index = self.size, 0
        while left > 0:
            stamp = f"{self.seed}:{index}:".encode()
            piece = (stamp + noise[len(stamp):])[: min(PIECE, left)]
            yield piece
            left -= len(piece)
            index += 1

    def chunks(self, chunk_size: int) -> Iterator[bytes]:
        buf: list[bytes] = []
        held = 0
        for piece in self.pieces():
            buf.append(piece)
            held += len(piece)
            if held >= chunk_size:
                yield b"".join(buf)
                buf, held = [], 0
        if buf:
            yield b"".join(buf)

    @property
    def digest(self) -> str:
        return _digest_of(self)


@lru_cache(maxsize=16)
def _digest_of(source: BlobSource) -> str:
    hasher = hashlib.sha256()
    for piece in source.pieces():
        hasher.update(piece)
    return "sha256:" + hasher.hexdigest()


def _with_query(location: str, **params: str) -> str:
    parts = urlsplit(location)
    extra = "&".join(f"{k}={v}" for k, v in params.items())
    query = f"{parts.query}&{extra}" if parts.query else extra
    return f"{parts.path}?{query}"


class Client:
    """One keep-alive connection to one registry."""

    def __init__(self, endpoint: Endpoint, timeout: float = 900) -> None:
        self.endpoint = endpoint
        self.conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout)

    def close(self) -> None:
        self.conn.close()

    def request(self, method: str, path: str, body: bytes | Iterable[bytes] | None = None,
                headers: dict[str, str] | None = None, expect: tuple[int, ...] = (200,)
                ) -> http.client.HTTPResponse:
        """Send a request and return the response with its body still unread."""
        sent = dict(headers or {})
        if self.endpoint.authorization:
            sent["Authorization"] = self.endpoint.authorization
        self.conn.request(method, path, body=body, headers=sent)
        response = self.conn.getresponse()
        if response.status not in expect:
            detail = response.read()[:300]
            raise ClientError(f"{self.endpoint.label}: {method} {path} -> {response.status} {detail!r}")
        return response

    def call(self, method: str, path: str, body: bytes | Iterable[bytes] | None = None,
             headers: dict[str, str] | None = None, expect: tuple[int, ...] = (200,)
             ) -> tuple[http.client.HTTPResponse, bytes]:
        response = self.request(method, path, body, headers, expect)
        return response, response.read()

    def start_upload(self, repo: str) -> str:
        response, _ = self.call("POST", f"/v2/{repo}/blobs/uploads/", b"",
                                {"Content-Length": "0"}, expect=(202,))
        location = response.getheader("Location")
        if not location:
            raise ClientError(f"{self.endpoint.label}: upload start gave no Location")
        return location

    def push_monolithic(self, repo: str, source: BlobSource) -> None:
        """POST then one PUT carrying the whole blob: what docker and containerd do."""
        location = self.start_upload(repo)
        self.call("PUT", _with_query(location, digest=source.digest), source.pieces(),
                  {"Content-Length": str(source.size), "Content-Type": "application/octet-stream"},
                  expect=(201,))

    def push_chunked(self, repo: str, source: BlobSource, chunk_size: int) -> None:
        location = self.start_upload(repo)
        offset = 0
        for chunk in source.chunks(chunk_size):
            response, _ = self.call("PATCH", urlsplit(location).path + _query(location), chunk, {
                "Content-Length": str(len(chunk)),
                "Content-Range": f"{offset}-{offset + len(chunk) - 1}",
                "Content-Type": "application/octet-stream",
            }, expect=(202,))
            location = response.getheader("Location") or location
            offset += len(chunk)
        self.call("PUT", _with_query(location, digest=source.digest), b"",
                  {"Content-Length": "0"}, expect=(201,))

    def push_small(self, repo: str, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        location = self.start_upload(repo)
        self.call("PUT", _with_query(location, digest=digest), data,
                  {"Content-Length": str(len(data)), "Content-Type": "application/octet-stream"},
                  expect=(201,))
        return digest

    def pull_hashed(self, repo: str, digest: str) -> tuple[int, str]:
        """GET a blob and hash it; a 307 (object storage) is followed, as registry clients do."""
        response = self.request("GET", f"/v2/{repo}/blobs/{digest}", expect=(200, 307))
        store = None
        if response.status == 307:
            response.read()
            target = urlsplit(response.getheader("Location") or "")
            store = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=900)
            store.request("GET", target.path + (f"?{target.query}" if target.query else ""))
            response = store.getresponse()
            if response.status != 200:
                raise ClientError(f"{self.endpoint.label}: the redirect answered {response.status}")
        hasher = hashlib.sha256()
        buf = bytearray(PIECE)
        view = memoryview(buf)
        total = 0
        while n := response.readinto(buf):
            hasher.update(view[:n])
            total += n
        if store is not None:
            store.close()
        return total, "sha256:" + hasher.hexdigest()

    def mount(self, repo: str, digest: str, source_repo: str) -> bool:
        response, _ = self.call("POST", f"/v2/{repo}/blobs/uploads/?mount={digest}&from={source_repo}",
                                b"", {"Content-Length": "0"}, expect=(201, 202))
        if response.status == 202:  # not mountable: drop the session it opened
            location = response.getheader("Location") or ""
            self.call("DELETE", urlsplit(location).path + _query(location), expect=(204,))
        return response.status == 201

    def put_manifest(self, repo: str, reference: str, body: bytes, media_type: str = OCI_MANIFEST) -> None:
        self.call("PUT", f"/v2/{repo}/manifests/{reference}", body,
                  {"Content-Type": media_type, "Content-Length": str(len(body))}, expect=(201,))

    def get_json(self, path: str) -> object:
        _, body = self.call("GET", path, headers={"Accept": "application/json"})
        return json.loads(body)


def _query(location: str) -> str:
    query = urlsplit(location).query
    return f"?{query}" if query else ""


def tiny_manifest(label: str, layers: list[tuple[str, int]] | None = None) -> bytes:
    """An OCI image manifest whose config is the empty JSON blob; ``label`` makes it distinct."""
    return json.dumps({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_EMPTY, "digest": EMPTY_DIGEST, "size": len(EMPTY_JSON)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d, "size": s}
                   for d, s in (layers or [])],
        "annotations": {"bench.label": label},
    }, separators=(",", ":")).encode()
