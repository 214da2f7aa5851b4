"""Time limits on slow clients for gunicorn's gthread worker ([server] client_timeout).

gthread reads a request on a blocking socket with no timeout, so a client that sends half a request
line, or stops in the middle of a layer, would hold a worker thread for ever, and a few dozen such
clients would stop the service. ``install`` (called from gunicorn.conf.py's ``post_worker_init``)
gives every accepted connection a socket whose blocking mode carries limits instead:

- the request line and headers must all arrive within ``client_timeout`` seconds (sending one byte
  at a time does not extend it); otherwise the connection is closed without an answer;
- while a body is read or a response written, ``client_timeout`` seconds without any progress end
  the request: a partial upload chunk is discarded (the session keeps what it had before), and the
  connection is closed. A slow transfer that keeps moving is never cut off.

A connection that timed out reads as closed from then on, so gunicorn does not linger on it (its
graceful close would otherwise wait up to 2 s on the worker's main thread for each one).
"""
from __future__ import annotations

import errno
import logging
import socket
import time
from typing import Any

log = logging.getLogger("gunicorn.error")


class ClientSocket(socket.socket):
    """An accepted connection with a head deadline and an idle timeout while it is blocking."""

    __slots__ = ("idle_timeout", "head_deadline", "gave_up")

    idle_timeout: float
    head_deadline: float | None
    gave_up: bool

    @classmethod
    def adopt(cls, sock: socket.socket, idle_timeout: float) -> "ClientSocket":
        blocking = sock.getblocking()
        adopted = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        adopted.idle_timeout = idle_timeout
        adopted.head_deadline = None
        adopted.gave_up = False
        adopted.setblocking(blocking)
        return adopted

    def setblocking(self, flag: bool) -> None:
        # gthread makes a connection blocking when a thread starts on its next request.
        if flag:
            self.head_deadline = time.monotonic() + self.idle_timeout
            self.settimeout(self.idle_timeout)
        else:
            super().setblocking(False)

    def head_received(self) -> None:
        self.head_deadline = None

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if self.gave_up:
            return b""
        in_head = self.head_deadline is not None
        try:
            if in_head:
                left = self.head_deadline - time.monotonic()  # type: ignore[operator]
                if left <= 0:
                    raise TimeoutError("timed out")
                super().settimeout(min(left, self.idle_timeout))
            return super().recv(bufsize, flags)
        except TimeoutError:
            self._give_up("request head not complete within" if in_head else "no request body data for")
            if in_head:
                return b""  # gunicorn closes quietly, as if the client had left
            raise

    def send(self, data: Any, flags: int = 0) -> int:
        try:
            return super().send(data, flags)
        except TimeoutError:
            self._give_up("response not read for")
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
            self._give_up("response not read for")
            raise BrokenPipeError(errno.EPIPE, "client stopped reading") from None

    def _give_up(self, what: str) -> None:
        if self.gave_up:
            return
        self.gave_up = True
        self.head_deadline = None
        log.warning("closing connection from %s: %s %ss", _peer(self), what, self.idle_timeout)
        try:
            self.shutdown(socket.SHUT_RD)
        except OSError:
            pass


def _peer(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "a closed socket"


def install(worker: Any, idle_timeout: float) -> None:
    """Wrap the worker so that every connection it hands to a thread is a ``ClientSocket``."""
    enqueue = getattr(worker, "enqueue_req", None)
    if enqueue is None:
        raise RuntimeError(f"client timeouts need gunicorn's gthread worker, not {type(worker).__name__}")

    def enqueue_req(conn: Any) -> None:
        if not isinstance(conn.sock, ClientSocket) and getattr(conn, "parser", None) is None:
            conn.sock = ClientSocket.adopt(conn.sock, idle_timeout)
        enqueue(conn)

    worker.enqueue_req = enqueue_req


def head_received(req: Any) -> None:
    """gunicorn ``pre_request``: the head is in; the body and the response are bounded by idleness."""
    sock = getattr(getattr(req, "unreader", None), "sock", None)
    if isinstance(sock, ClientSocket):
        sock.head_received()
