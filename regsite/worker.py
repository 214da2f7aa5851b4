"""The gunicorn worker: gthread, with every wait on a slow client moved into its event loop.

gthread hands a connection to a thread as soon as it is accepted, and that thread then waits on
the client for as long as the client takes: to send its request head, its body, to read a blob of
hundreds of MiB at the speed of its link, or to close after the answer. A rollout of a few hundred
nodes, or a few hundred slow attackers, used up every thread, and the kubelet's probes queued
behind them. Here the worker's main loop, which already waits on sockets with a selector, does
those waits itself, so threads only ever run application code:

- a request is read in the loop, within ``client_timeout`` seconds of its first byte, and only a
  complete one goes to a thread: its head, and its body of any route and encoding up to a bound
  (regsite/request_reader.py), or the client gets 408; a body over the bound is refused unread;
- the one exception is a blob upload's body, which its view hashes and writes as it arrives: it is
  streamed by an upload thread, at no less than ``min_body_rate`` (regsite/client_timeouts.py);
- a response that is a file (a blob) is sent from the loop with ``sendfile``, as the client reads;
- a closed connection lingers (half-closed, its late bytes drained) in the loop, not in a thread.

With ``[server] tls_cert`` the port speaks HTTPS (regsite/tls.py, regsite/worker_tls.py): the
loop does the handshake within the request head's ``client_timeout``, reads through the SSL
object, and sends files by reading and encrypting them itself (``sendfile`` would send them in
clear); threads read upload bodies and write answers through the same object.
"""
from __future__ import annotations

import errno
import heapq
import itertools
import json
import logging
import os
import selectors
import socket
import time
from concurrent import futures
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from gunicorn.http import wsgi
from gunicorn.workers import gthread

from regsite.client_timeouts import ClientSocket, count_timeout
from regsite.request_reader import CONTINUE, Ready, Refused, RequestReader, error_body
from regsite.tls import Certificates
from regsite.worker_tls import HANDSHAKE, TLSLoop, close_notify, pending_bytes, tls_error, tls_waiting

log = logging.getLogger("gunicorn.error")

LINGER_SECONDS = 2.0
LINGER_BYTES = 64 * 1024
SEND_CHUNK = 4 * 1024 * 1024

READING, TRANSFER, LINGERING = "reading", "transfer", "lingering"  # HANDSHAKE: worker_tls.py
TLS_HANDSHAKE = b"\x16"
_tls_logged = False


@dataclass
class Limits:
    """Set once from the service configuration by gunicorn.conf.py."""

    upload_threads: int = 64
    client_timeout: float = 60.0
    max_manifest_bytes: int = 4 * 1024 * 1024
    min_body_rate: int = 0


@dataclass
class _Transfer:
    resp: Any
    respiter: Any
    req: Any
    environ: dict[str, Any]
    started: datetime
    fd: int
    offset: int
    left: int
    keepalive: bool = False
    progress: float = field(default_factory=time.monotonic)
    unsent: bytes | memoryview = b""  # over TLS: file bytes read, not yet taken by the SSL object


class RegistryWorker(TLSLoop, gthread.ThreadWorker):
    limits = Limits()
    certificates: Certificates | None = None  # [server] tls_cert: the master's, inherited at fork

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Deadlines as (when, token); a connection that moves on drops its token, so the heap never
        # keeps a finished connection (and its buffers) alive until its old deadline.
        self._deadlines: list[tuple[float, int]] = []
        self._waiting: dict[int, Any] = {}
        self._seq = itertools.count()
        self._transfers: set[Any] = set()

    def init_process(self) -> None:
        if self.cfg.is_ssl:
            raise RuntimeError("set [server] tls_cert and tls_key rather than gunicorn's certfile and keyfile")
        if getattr(self.cfg, "http2_cleartext", "off") not in ("off", None, False):
            raise RuntimeError("the registry worker serves HTTP/1.1")
        # Uploads stream their bodies for as long as the client takes, so they get their own
        # threads: probes and pulls never queue behind a hundred slow pushes.
        self.upload_pool = futures.ThreadPoolExecutor(self.limits.upload_threads, "upload")
        super().init_process()

    def enqueue_req(self, conn: Any) -> None:
        pool = self.upload_pool if getattr(conn, "uploading", False) else self.tpool
        done = pool.submit(self.handle, conn)
        done.add_done_callback(lambda fut: self.method_queue.defer(self.finish_request, conn, fut))

    def handle_quit(self, sig: Any, frame: Any) -> None:
        self.upload_pool.shutdown(wait=False)
        super().handle_quit(sig, frame)

    # -- reading heads and small bodies --------------------------------------------------------

    def accept(self, listener: socket.socket) -> None:
        try:
            client, address = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        client = ClientSocket.adopt(client, self.limits.client_timeout, self.limits.min_body_rate)
        conn = gthread.TConn(self.cfg, client, address, listener.getsockname())
        if self.certificates is not None:
            self._start_tls(conn)
        else:
            self._read(conn)

    def on_client_socket_readable(self, conn: Any, client: Any) -> None:
        # A kept-alive connection starts its next request: read it here, not in a thread.
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._read(conn)

    def _read(self, conn: Any, received: bytes = b"", deadline: float | None = None) -> None:
        """Read the connection's next request in the loop, starting with what is ``received``,
        within ``client_timeout`` (or by ``deadline``: a new TLS connection's, set at accept)."""
        conn.sock.setblocking(False)
        conn.state = READING
        conn.reader = RequestReader(self.limits.max_manifest_bytes)
        self._expire_at(conn, deadline or time.monotonic() + self.limits.client_timeout)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))
        if received:
            self._take(conn, received)
        if conn.reader is not None and pending_bytes(conn.sock):
            self._on_readable(conn, conn.sock)  # decrypted already: the socket will not say so

    def _on_readable(self, conn: Any, _sock: Any) -> None:
        while True:
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if tls_waiting(exc):  # a TLS record not complete yet
                    return
                tls_error(conn, exc)
                data = b""
            if not data:  # the client left before finishing its request
                self._forget(conn)
                self._close(conn)
                return
            self._take(conn, data)
            # A TLS record may hold more than was asked for: what stays in the SSL object does
            # not make the socket readable again.
            if conn.reader is None or not pending_bytes(conn.sock):
                return

    def _take(self, conn: Any, data: bytes) -> None:
        reader: RequestReader = conn.reader
        if not reader.received and data[:1] == TLS_HANDSHAKE:
            self._tls_probe(conn)
            return
        try:
            ready = reader.feed(data)
        except Refused as refusal:
            log.info("refused a request from %s: %s %s", _peer(conn), refusal.status, refusal.message)
            self._refuse(conn, refusal.status, refusal.reason, refusal.message)
            return
        if reader.continue_due:
            reader.continue_due = False
            try:
                conn.sock.send(CONTINUE)  # into an empty send buffer: it never blocks
            except OSError:
                pass
        if ready is not None:
            self._dispatch(conn, ready)

    def _dispatch(self, conn: Any, ready: Ready) -> None:
        self._forget(conn)
        self.poller.unregister(conn.sock)
        conn.reader = None
        conn.pending = ready.data
        conn.uploading = ready.upload
        conn.sock.streaming = ready.upload  # any other thread gets the end of stream, never a wait
        conn.sock.setblocking(True)
        self.enqueue_req(conn)

    def _tls_probe(self, conn: Any) -> None:
        """A TLS ClientHello on this plain-HTTP port: a client (docker, podman, skopeo told the
        registry is insecure) trying HTTPS before HTTP. Closing at once sends it to HTTP; waiting
        for a request head that never comes would hold it until the client gives up."""
        global _tls_logged
        if not _tls_logged:
            _tls_logged = True
            log.debug("TLS handshake from %s on a plain HTTP port: closed, the client falls back to "
                      "HTTP (logged once per worker)", _peer(conn))
        self._forget(conn)
        self._close(conn)

    def handle(self, conn: Any) -> Any:
        pending = getattr(conn, "pending", None)
        if pending is not None:
            conn.pending = None
            conn.data_ready = True
            conn.init()
            conn.parser.unreader.unread(pending)
            conn.sock.head_received()
        return super().handle(conn)

    # -- deadlines -----------------------------------------------------------------------------

    def _expire_at(self, conn: Any, deadline: float) -> None:
        self._forget(conn)
        conn.token = next(self._seq)
        self._waiting[conn.token] = conn
        heapq.heappush(self._deadlines, (deadline, conn.token))
        if len(self._deadlines) > 4 * len(self._waiting) + 1024:  # mostly stale entries: compact
            self._deadlines = [entry for entry in self._deadlines if entry[1] in self._waiting]
            heapq.heapify(self._deadlines)

    def _forget(self, conn: Any) -> None:
        token = getattr(conn, "token", None)
        if token is not None:
            self._waiting.pop(token, None)
        conn.token = None

    def murder_pending(self) -> None:
        super().murder_pending()
        if self.certificates is not None:
            self.certificates.refresh()  # at most once a second: a replaced certificate for new connections
        now = time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            _deadline, token = heapq.heappop(self._deadlines)
            conn = self._waiting.pop(token, None)
            if conn is None:
                continue  # the connection moved on since this deadline was set
            conn.token = None
            if conn.state == LINGERING:
                self._close(conn)
            elif conn.state == HANDSHAKE:
                self._handshake_timed_out(conn)
            elif conn.reader.head is not None:
                self._timed_out(conn, "request body", 408, "Request Timeout")
            else:
                if conn.reader.received:
                    log.warning("closing connection from %s: request head not complete within %ss",
                                _peer(conn), self.limits.client_timeout)
                    count_timeout("head")
                self.poller.unregister(conn.sock)
                self._close(conn)
        for conn in [c for c in self._transfers if now - c.transfer.progress > self.limits.client_timeout]:
            log.warning("closing connection from %s: response not read for %ss", _peer(conn),
                        self.limits.client_timeout)
            count_timeout("response")
            self._end_transfer(conn, complete=False)

    def murder_keepalived(self, force: bool = False) -> None:
        if self.certificates is not None:  # the idle connections about to be closed hear of it
            now = time.monotonic()
            for conn in self.keepalived_conns:  # in the order they expire
                if conn.timeout > now and not force:
                    break
                close_notify(conn.sock)
        super().murder_keepalived(force)

    def _timed_out(self, conn: Any, what: str, status: int, reason: str) -> None:
        log.warning("closing connection from %s: %s not complete within %ss", _peer(conn), what,
                    self.limits.client_timeout)
        count_timeout("body")
        self._refuse(conn, status, reason, f"{what} not received within {self.limits.client_timeout:g} seconds")

    def _refuse(self, conn: Any, status: int, reason: str, message: str) -> None:
        """Answer from the loop (best effort: a client that does not read gets nothing) and close."""
        self._forget(conn)
        self.poller.unregister(conn.sock)
        reader: RequestReader = conn.reader
        request_line = reader.head.request_line if reader.head else bytes(reader.received[:512]).split(b"\r\n")[0]
        body = json.dumps(error_body(request_line, message)).encode()
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            conn.sock.send(head + body)
        except OSError:
            pass
        conn.reader = None
        self._linger(conn)  # the client may still be sending: a reset would lose the answer

    # -- files sent from the loop --------------------------------------------------------------

    def handle_request(self, req: Any, conn: Any) -> bool:
        environ: dict[str, Any] = {}
        resp = None
        try:
            self.cfg.pre_request(self, req)
            started = datetime.now()
            resp, environ = wsgi.create(req, conn.sock, conn.client, conn.server, self.cfg)
            environ["wsgi.multithread"] = True
            if self.certificates is not None:
                environ["wsgi.url_scheme"], environ["HTTPS"] = "https", "on"
            self.nr += 1
            if self.nr >= self.max_requests:
                if self.alive:
                    self.log.info("Autorestarting worker after current request.")
                    self.alive = False
                resp.force_close()
            if not self.alive or not self.cfg.keepalive or len(self.keepalived_conns) >= self.max_keepalived:
                resp.force_close()
            respiter = self.wsgi(environ, resp.start_response)
            transfer = None
            if isinstance(respiter, environ["wsgi.file_wrapper"]):
                transfer = self._plan_transfer(resp, respiter, req, environ, started)
            if transfer is not None:
                resp.send_headers()
                transfer.keepalive = not resp.should_close()
                conn.transfer = transfer  # the loop sends the body, logs and closes the response
                return transfer.keepalive
            try:
                if isinstance(respiter, environ["wsgi.file_wrapper"]):
                    resp.write_file(respiter)
                else:
                    for item in respiter:
                        resp.write(item)
                resp.close()
            finally:
                self.log.access(resp, req, environ, datetime.now() - started)
                if hasattr(respiter, "close"):
                    respiter.close()
            if resp.should_close():
                return False
        except OSError:
            raise
        except (Exception, SystemExit):
            if resp and resp.headers_sent:
                self.log.exception("Error handling request")
                raise StopIteration() from None
            raise
        finally:
            try:
                self.cfg.post_request(self, req, environ, resp)
            except Exception:
                self.log.exception("Exception in post_request hook")
        return True

    @staticmethod
    def _plan_transfer(resp: Any, respiter: Any, req: Any, environ: dict[str, Any],
                       started: datetime) -> _Transfer | None:
        filelike = respiter.filelike
        if resp._omits_body or not resp.can_sendfile() or not hasattr(filelike, "fileno"):
            return None
        try:
            fd = filelike.fileno()
            offset = os.lseek(fd, 0, os.SEEK_CUR)
            left = resp.response_length
            if left is None:
                left = os.fstat(fd).st_size - offset
        except (OSError, ValueError, AttributeError):
            return None
        return _Transfer(resp, respiter, req, environ, started, fd, offset, left)

    def finish_request(self, conn: Any, fs: Any) -> None:
        try:
            result = False if fs.cancelled() else fs.result()
        except Exception:
            result = False
        transfer = getattr(conn, "transfer", None)
        if transfer is not None:
            conn.state = TRANSFER
            conn.sock.setblocking(False)
            self._transfers.add(conn)
            self.poller.register(conn.sock, selectors.EVENT_WRITE, partial(self._on_writable, conn))
        elif result is gthread._DEFER:
            self._read(conn)
        elif result:
            self._keepalive(conn)
        else:
            self._linger(conn)

    def _on_writable(self, conn: Any, _sock: Any) -> None:
        transfer: _Transfer = conn.transfer
        if self.certificates is not None:
            self._send_file_tls(conn, transfer)
            return
        try:
            sent = os.sendfile(conn.sock.fileno(), transfer.fd, transfer.offset, min(transfer.left, SEND_CHUNK))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._end_transfer(conn, complete=False)
            return
        if sent == 0:  # the file is shorter than the length announced: the client must see a cut
            self._end_transfer(conn, complete=False)
            return
        self._sent(conn, transfer, sent)

    def _sent(self, conn: Any, transfer: Any, sent: int) -> None:
        transfer.offset += sent
        transfer.left -= sent
        transfer.resp.sent += sent
        transfer.progress = time.monotonic()
        if transfer.left <= 0:
            self._end_transfer(conn, complete=True)

    def _end_transfer(self, conn: Any, complete: bool) -> None:
        transfer: _Transfer = conn.transfer
        conn.transfer = None
        self._transfers.discard(conn)
        self.poller.unregister(conn.sock)
        try:
            self.log.access(transfer.resp, transfer.req, transfer.environ, datetime.now() - transfer.started)
            transfer.respiter.close()  # Django's response close: request log line, signals
        except Exception:
            self.log.exception("Error closing a response")
        if complete and transfer.keepalive and self.alive:
            self._keepalive(conn)
        else:
            self._linger(conn)

    def _keepalive(self, conn: Any) -> None:
        conn.state = None
        pipelined = conn.parser.unreader.take_buffered()
        if pipelined or pending_bytes(conn.sock):  # the client's next request, or a part of it, came with this one
            self._read(conn, pipelined)
            return
        conn.sock.setblocking(False)
        conn.set_timeout()
        if not self.alive:
            conn.timeout = min(conn.timeout, time.monotonic() + gthread.STOP_KEEPALIVE_LINGER)
        self.keepalived_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_client_socket_readable, conn))

    # -- closing -------------------------------------------------------------------------------

    def _linger(self, conn: Any) -> None:
        """Half-close and drain what the client still sends, so that the kernel does not answer
        its late bytes with a reset that could destroy the end of our response in flight."""
        try:
            conn.sock.setblocking(False)
            close_notify(conn.sock)
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(conn)
            return
        conn.state = LINGERING
        conn.drained = 0
        self._expire_at(conn, time.monotonic() + LINGER_SECONDS)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_linger_readable, conn))

    def _on_linger_readable(self, conn: Any, _sock: Any) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        conn.drained += len(data)
        if not data or conn.drained >= LINGER_BYTES:
            self._forget(conn)
            self.poller.unregister(conn.sock)
            self._close(conn)

    def _close(self, conn: Any) -> None:
        self._forget(conn)
        try:
            self.poller.unregister(conn.sock)  # before close: the selector knows it by descriptor
        except (KeyError, ValueError, OSError):
            pass
        conn.state = None
        self.nr_conns -= 1
        try:
            conn.sock.close()
        except OSError:
            pass


def _peer(conn: Any) -> str:
    client = conn.client
    if isinstance(client, (tuple, list)) and len(client) >= 2:
        return f"{client[0]}:{client[1]}"
    return str(client)
