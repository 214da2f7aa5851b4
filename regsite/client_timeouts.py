"""Limits on a client while a worker thread waits on it in blocking mode.

The worker (regsite/worker.py) reads every request head and every body but a blob upload's in its
event loop, and sends files from it, so a thread waits on a client only for an upload body that its
view streams to storage, or for a response it writes itself. ``ClientSocket`` bounds those waits:

- a thread that runs a request the loop read whole never waits on the client: asked for more, the
  socket answers end of stream at once (only an upload's socket is ``streaming``);
- ``client_timeout`` seconds without any progress end the request: a partial upload chunk is
  discarded (the session keeps what it had before) and the connection is closed;
- with ``min_body_rate`` set, an upload body is held to that rate from its first seconds: it starts
  with ``RATE_GRACE`` seconds' worth of credit, earns what it sends, spends the rate for every
  second the thread waits for it (not while the view works between reads), and banks at most
  ``client_timeout`` seconds' worth; out of credit, it is cut off the same way. A client that never
  sends or trickles goes within ``RATE_GRACE`` seconds of waiting, one that stops after a fast
  start within ``client_timeout``; a transfer that keeps above the rate is never cut off.

In non-blocking mode (the event loop) the socket behaves as a plain socket. ``TLSClientSocket`` is
the same over TLS.
"""
from __future__ import annotations

import errno
import logging
import socket
import ssl
import time
from typing import Any

log = logging.getLogger("gunicorn.error")

RATE_GRACE = 5.0  # seconds an upload body may take to get going before min_body_rate applies


class ClientSocket(socket.socket):
    """An accepted connection with an idle timeout and a minimum body rate while it is blocking."""

    __slots__ = ("idle_timeout", "min_rate", "gave_up", "streaming", "_credit")

    idle_timeout: float
    min_rate: int
    gave_up: bool
    streaming: bool
    _credit: float

    @classmethod
    def adopt(cls, sock: socket.socket, idle_timeout: float, min_rate: int = 0) -> "ClientSocket":
        blocking = sock.getblocking()
        adopted = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        adopted.idle_timeout = idle_timeout
        adopted.min_rate = min_rate
        adopted.gave_up = False
        adopted.streaming = False
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
        self._credit = self.min_rate * min(RATE_GRACE, self.idle_timeout)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        wait = self.gettimeout()
        if wait == 0.0:
            return super().recv(bufsize, flags)
        if self.gave_up or not self.streaming:
            return b""
        if not self.min_rate:
            try:
                return super().recv(bufsize, flags)
            except TimeoutError:
                self._give_up(f"no request body data for {wait or self.idle_timeout:g}s")
                raise
        # Wait no longer than the credit lasts, so that a client sending nothing goes as soon as one
        # sending too little would. Only time spent waiting here is the client's: while the view
        # works between reads, the body waits on the server.
        self.settimeout(max(min(wait or self.idle_timeout, self._credit / self.min_rate), 0.001))
        started = time.monotonic()
        try:
            data = super().recv(bufsize, flags)
        except TimeoutError:
            if self._earn(0, time.monotonic() - started) < self.min_rate * 0.05:  # spent, give or take a tick
                self._too_slow()
            else:
                self._give_up(f"no request body data for {wait or self.idle_timeout:g}s")
            raise
        finally:
            self.settimeout(wait)
        if self._earn(len(data), time.monotonic() - started) < 0 and data:
            self._too_slow()
            raise TimeoutError("request body too slow")
        return data

    def _earn(self, received: int, waited: float) -> float:
        """The body's credit in bytes, after ``received`` more for ``waited`` seconds."""
        self._credit = min(self._credit + received - self.min_rate * waited, self.min_rate * self.idle_timeout)
        return self._credit

    def _too_slow(self) -> None:
        self._give_up(f"request body slower than the minimum of {self.min_rate} B/s")

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


class TLSClientSocket(ClientSocket, ssl.SSLSocket):  # type: ignore[misc]  # recv's parameter names
    """A ClientSocket speaking TLS ([server] tls_cert): the same bounds on a thread's waits, through
    the SSL object. The worker's loop does the handshake, non-blocking."""

    @classmethod
    def wrap(cls, plain: ClientSocket, context: ssl.SSLContext) -> "TLSClientSocket":
        context.sslsocket_class = cls
        sock = context.wrap_socket(plain, server_side=True, do_handshake_on_connect=False)
        assert isinstance(sock, cls)
        sock.idle_timeout, sock.min_rate = plain.idle_timeout, plain.min_rate
        sock.gave_up, sock.streaming = False, False
        sock.head_received()
        sock.setblocking(False)
        return sock

    def shutdown(self, how: int) -> None:
        if how == socket.SHUT_RD:
            # SSLSocket.shutdown drops the SSL object: the thread's answer would then go out in clear.
            socket.socket.shutdown(self, how)
        else:
            super().shutdown(how)

    def close_notify(self) -> None:
        """Tell the client the connection ends (TLS close_notify), without waiting for its own:
        best effort, in non-blocking mode."""
        if getattr(self, "_sslobj", None) is None:  # unwrapped, or the TCP write side already shut
            return
        try:
            self.unwrap()
        except (ssl.SSLError, OSError, ValueError):
            pass  # sent, with the client's answer still to come (or the connection already gone)


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
