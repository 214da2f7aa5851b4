"""A webhook receiver for notification tests: a small HTTP server that records what it is sent."""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]  # names lowercased
    body: bytes

    @property
    def events(self) -> list[dict[str, Any]]:
        return json.loads(self.body)["events"]

    def signed_with(self, secret: str) -> bool:
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("x-registry-signature", ""), expected)


@dataclass
class Receiver:
    """Answers ``status`` after ``delay`` seconds; records every request in ``attempts`` as it
    arrives, and those it accepts (2xx) in ``deliveries``. ``port`` 0 picks a free one."""

    port: int = 0
    status: int = 200
    delay: float = 0.0
    deliveries: list[Delivery] = field(default_factory=list)
    attempts: list[Delivery] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/registry"

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                delivery = Delivery(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with receiver._lock:
                    receiver.attempts.append(delivery)
                if receiver.delay:
                    time.sleep(receiver.delay)
                status = receiver.status
                if 200 <= status < 300:
                    # Taken in before answering, as a real receiver acts on an event: if the sender
                    # dies before reading the answer, it sends the event again.
                    with receiver._lock:
                        receiver.deliveries.append(delivery)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok" if status < 300 else b"no")
                except OSError:
                    pass  # the sender is gone

            def log_message(self, format: str, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return [event for delivery in self.deliveries for event in delivery.events]

    def wait_for(self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            events = self.events()
            if done(events):
                return events
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver never got what was expected; it got {len(events)} events: "
                                     + json.dumps([(e["action"], e["target"]) for e in events])[:3000])
            time.sleep(0.05)
