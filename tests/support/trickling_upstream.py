"""An upstream registry that answers every request one byte at a time, for the pull-through cache's
deadline tests: one byte (or ``chunk`` bytes) every ``interval`` seconds, under any read timeout, so
that only a deadline on the whole response ends it.

It serves one image, ``library/app:v1`` (a manifest and one layer) under any repository name, and
404 for anything else, also trickled. With ``trickle_head`` the status line and headers trickle too;
otherwise they go at once and only the body trickles. Every request is counted (``requests``), and
``open`` says how many are still being answered. ``stop`` cuts every answer short.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time

from tests.support.upstreams import OCI_CONFIG, OCI_LAYER, OCI_MANIFEST


class TricklingUpstream:
    def __init__(self, interval: float = 2.0, trickle_head: bool = False, layer_size: int = 64 * 1024,
                 chunk: int = 1) -> None:
        self.interval, self.trickle_head, self.chunk = interval, trickle_head, chunk
        self.layer = os.urandom(layer_size)
        self.config = json.dumps({"architecture": "amd64", "os": "linux"}).encode()
        self.layer_digest = "sha256:" + hashlib.sha256(self.layer).hexdigest()
        self.config_digest = "sha256:" + hashlib.sha256(self.config).hexdigest()
        self.manifest = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": self.config_digest, "size": len(self.config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": self.layer_digest, "size": len(self.layer)}],
        }).encode()
        self.manifest_digest = "sha256:" + hashlib.sha256(self.manifest).hexdigest()
        self.requests: list[str] = []
        self.open = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._connections: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def start(self) -> "TricklingUpstream":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()
        with self._lock:
            for conn in self._connections:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _answer(self, method: str, path: str) -> tuple[bytes, bytes]:
        """(head, body) for a request."""
        body, media_type = None, "application/octet-stream"
        if path.endswith(("/manifests/v1", f"/manifests/{self.manifest_digest}")):
            body, media_type = self.manifest, OCI_MANIFEST
        elif path.endswith(f"/blobs/{self.layer_digest}"):
            body = self.layer
        elif path.endswith(f"/blobs/{self.config_digest}"):
            body = self.config
        status = "200 OK" if body is not None else "404 Not Found"
        body = body if body is not None else b'{"errors":[{"code":"NAME_UNKNOWN","message":"no"}]}'
        head = (f"HTTP/1.1 {status}\r\nContent-Type: {media_type}\r\nContent-Length: {len(body)}\r\n"
                f"Docker-Distribution-API-Version: registry/2.0\r\n\r\n").encode()
        return head, (b"" if method == "HEAD" else body)

    def _serve(self, conn: socket.socket) -> None:
        with self._lock:
            self.open += 1
        try:
            request = b""
            while b"\r\n\r\n" not in request:
                data = conn.recv(65536)
                if not data:
                    return
                request += data
            method, path = request.split(b" ", 2)[:2]
            with self._lock:
                self.requests.append(f"{method.decode()} {path.decode()}")
            head, body = self._answer(method.decode(), path.decode())
            if not self.trickle_head:
                conn.sendall(head)
                head = b""
            data = head + body
            for start in range(0, len(data), self.chunk):
                if self._stopped.wait(self.interval):
                    return
                conn.sendall(data[start:start + self.chunk])
        except OSError:
            pass
        finally:
            with self._lock:
                self.open -= 1
            conn.close()

    def wait_idle(self, timeout: float) -> bool:
        """Whether every answer ended (the cache gave up on it) within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.open == 0:
                return True
            time.sleep(0.05)
        return self.open == 0
