"""Limits on a client while a worker thread waits on it in blocking mode.

The worker (regsite/worker.py) reads request heads and small bodies and sends files from its event
loop, so a thread waits on a client only for a large request body (a blob upload) or for a
response it writes itself. ``ClientSocket`` bounds those waits:

- ``client_timeout`` seconds without any progress end the request: a partial upload chunk is
  discarded (the session keeps what it had before) and the connection is closed;
- with ``min_body_rate`` set, a body that averages less than that many bytes per second over a
  ``client_timeout`` period is cut off the same way, so a client trickling a byte at a time cannot
  keep a thread for ever. A transfer that keeps above the rate is never cut off.

In non-blocking mode (the event loop) the socket behaves as a plain socket.
"""
from __future__ import annotations

import errno
import logging
import socket
import time
from typing import Any

log = logging.getLogger("gunicorn.error")


class ClientSocket(socket.socket):
    """An accepted connection with an idle timeout and a minimum body rate while it is blocking."""

    __slots__ = ("idle_timeout", "min_rate", "gave_up", "_window_start", "_window_bytes")

    idle_timeout: float
    min_rate: int
    gave_up: bool
    _window_start: float
    _window_bytes: int

    @classmethod
    def adopt(cls, sock: socket.socket, idle_timeout: float, min_rate: int = 0) -> "ClientSocket":
        blocking = sock.getblocking()
        adopted = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        adopted.idle_timeout = idle_timeout
        adopted.min_rate = min_rate
        adopted.gave_up = False
        adopted.head_received()
        adopted.setblocking(blocking)
        return adopted

    def setblocking(self, flag: bool) -> None:
        if flag:
            self.settimeout(self.idle_timeout)
        else:
            super().setblocking(False)

    def head_received(self) -> None:
        """A request starts: its body's rate is measured from now."""
        self._window_start = time.monotonic()
        self._window_bytes = 0

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if self.gettimeout() == 0.0:
            return super().recv(bufsize, flags)
        if self.gave_up:
            return b""
        try:
            data = super().recv(bufsize, flags)
        except TimeoutError:
            self._give_up(f"no request body data for {self.idle_timeout:g}s")
            raise
        if self.min_rate:
            self._check_rate(len(data))
        return data

    def _check_rate(self, received: int) -> None:
        self._window_bytes += received
        elapsed = time.monotonic() - self._window_start
        if elapsed < self.idle_timeout:
            return
        if self._window_bytes < self.min_rate * elapsed:
            rate = self._window_bytes / elapsed
            self._give_up(f"request body at {rate:.0f} B/s, below the minimum of {self.min_rate} B/s")
            raise TimeoutError("request body too slow")
        self._window_start, self._window_bytes = time.monotonic(), 0

    def send(self, data: Any, flags: int = 0) -> int:
        try:
            return super().send(data, flags)
        except TimeoutError:
            self._give_up(f"response not read for {self.idle_timeout:g}s")
            raise BrokenPipeError(errno.EPIPE, "client stopped reading") from None

    def sendall(self, data: Any, flags: int = 0) -> None:
        # socket.sendall's timeout bounds the whole call; send() bounds each wait for buffer space,
        # so a slow reader that keeps reading is not cut off.
        with memoryview(data) as view, view.cast("B") as remaining:
            while remaining:
                remaining = remaining[self.send(remaining, flags):]

    def sendfile(self, file: Any, offset: int = 0, count: int | None = None) -> int:
        try:
            return super().sendfile(file, offset, count)
        except TimeoutError:
            self._give_up(f"response not read for {self.idle_timeout:g}s")
            raise BrokenPipeError(errno.EPIPE, "client stopped reading") from None

    def _give_up(self, why: str) -> None:
        if self.gave_up:
            return
        self.gave_up = True
        log.warning("closing connection from %s: %s", _peer(self), why)
        count_timeout("body" if "body" in why else "response")
        try:
            self.shutdown(socket.SHUT_RD)
        except OSError:
            pass


def _peer(sock: socket.socket) -> str:
    try:
        peer = sock.getpeername()
    except OSError:
        return "a closed socket"
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer) or "a local socket"


def count_timeout(phase: str) -> None:
    """Count a client cut off for slowness (``registry_client_timeouts``), once the app is loaded."""
    try:
        from ops.metrics import CLIENT_TIMEOUTS
    except Exception:  # Django is not set up in this process (yet): the log line is enough
        return
    CLIENT_TIMEOUTS.labels(phase).inc()
