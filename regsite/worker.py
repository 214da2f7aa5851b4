"""The gunicorn worker: gthread, with every wait on a slow client moved into its event loop.

gthread hands a connection to a thread as soon as it is accepted, and that thread then waits on
the client for as long as the client takes: to send its request head, its body, to read a blob of
hundreds of MiB at the speed of its link, or to close after the answer. A rollout of a few hundred
nodes, or a few hundred slow attackers, used up every thread, and the kubelet's probes queued
behind them. Here the worker's main loop, which already waits on sockets with a selector, does
those waits itself, so threads only ever run application code:

- a request head is read in the loop, within ``client_timeout`` seconds of its first byte, and
  only a complete head goes to a thread (with its bytes, so gunicorn's parser sees them first);
- a small body (a manifest up to the manifest size limit, a token API or UI form up to
  ``SMALL_BODY``) is read in the loop too, within ``client_timeout`` seconds in all, or the client
  gets 408;
- a response that is a file (a blob) is sent from the loop with ``sendfile``, as the client reads;
- a closed connection lingers (half-closed, its late bytes drained) in the loop, not in a thread.

Large request bodies (blob uploads) are still read by the thread running the view, since they are
hashed and written as they arrive; ``regsite.client_timeouts`` bounds their stalls and rate.
"""
from __future__ import annotations

import errno
import heapq
import itertools
import json
import logging
import os
import re
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

log = logging.getLogger("gunicorn.error")

HEAD_END = b"\r\n\r\n"
MAX_HEAD = 64 * 1024  # more than gunicorn's own limits let through for a sane request
SMALL_BODY = 64 * 1024
LINGER_SECONDS = 2.0
LINGER_BYTES = 64 * 1024
SEND_CHUNK = 4 * 1024 * 1024
_MANIFEST_PUT = re.compile(rb"^PUT /v2/\S+/manifests/[^/\s?]+(?:\?\S*)? HTTP/1\.[01]$")
_UPLOAD = re.compile(rb"^(?:PATCH|PUT|POST) /v2/\S+/blobs/uploads/")
_FORM_POST = re.compile(rb"^POST /(?:api/tokens(?:/list|/revoke)?|ui/\S*) HTTP/1\.[01]$")

READING, TRANSFER, LINGERING = "reading", "transfer", "lingering"
TLS_HANDSHAKE = b"\x16"
_METHOD = re.compile(rb"^(?:\r\n)*[A-Z]{0,16}(?: |$)")
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


class RegistryWorker(gthread.ThreadWorker):
    limits = Limits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Deadlines as (when, token); a connection that moves on drops its token, so the heap never
        # keeps a finished connection (and its buffers) alive until its old deadline.
        self._deadlines: list[tuple[float, int]] = []
        self._waiting: dict[int, Any] = {}
        self._seq = itertools.count()
        self._transfers: set[Any] = set()

    def init_process(self) -> None:
        if self.cfg.is_ssl or getattr(self.cfg, "http2_cleartext", "off") not in ("off", None, False):
            raise RuntimeError("the registry worker serves plain HTTP/1.1 (terminate TLS in front)")
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
        self._read(conn)

    def on_client_socket_readable(self, conn: Any, client: Any) -> None:
        # A kept-alive connection starts its next request: read it here, not in a thread.
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._read(conn)

    def _read(self, conn: Any) -> None:
        conn.sock.setblocking(False)
        conn.state = READING
        conn.buffer = bytearray()
        conn.need = 0  # bytes the request needs in all once its head is in; 0 while it is not
        self._expire_at(conn, time.monotonic() + self.limits.client_timeout)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _on_readable(self, conn: Any, _sock: Any) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client left before finishing its request
            self._forget(conn)
            self._close(conn)
            return
        conn.buffer += data
        if not conn.need:
            if conn.buffer[:1] == TLS_HANDSHAKE:
                self._tls_probe(conn)
                return
            end = conn.buffer.find(HEAD_END)
            if end < 0 and not _could_be_http(conn.buffer):
                conn.need = len(conn.buffer)  # not HTTP: the parser answers it with a 400 at once
            elif end < 0:
                if len(conn.buffer) > MAX_HEAD:
                    self._refuse(conn, 431, "Request Header Fields Too Large", "request head too large")
                return
            else:
                head = bytes(conn.buffer[:end])
                conn.uploading = is_upload(head)
                conn.need = end + len(HEAD_END) + body_to_read(head, self.limits.max_manifest_bytes)
        if len(conn.buffer) >= conn.need:
            self._forget(conn)
            self.poller.unregister(conn.sock)
            conn.pending = bytes(conn.buffer)
            conn.buffer = None
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
        now = time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            _deadline, token = heapq.heappop(self._deadlines)
            conn = self._waiting.pop(token, None)
            if conn is None:
                continue  # the connection moved on since this deadline was set
            conn.token = None
            if conn.state == LINGERING:
                self._close(conn)
            elif conn.need:
                self._timed_out(conn, "request body", 408, "Request Timeout")
            else:
                if conn.buffer:
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

    def _timed_out(self, conn: Any, what: str, status: int, reason: str) -> None:
        log.warning("closing connection from %s: %s not complete within %ss", _peer(conn), what,
                    self.limits.client_timeout)
        count_timeout("body")
        self._refuse(conn, status, reason, f"{what} not received within {self.limits.client_timeout:g} seconds")

    def _refuse(self, conn: Any, status: int, reason: str, message: str) -> None:
        """Answer from the loop (best effort: a client that does not read gets nothing) and close."""
        self._forget(conn)
        self.poller.unregister(conn.sock)
        body = json.dumps(error_body(bytes(conn.buffer or b"")[:512], message)).encode()
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            conn.sock.send(head + body)
        except OSError:
            pass
        self._close(conn)

    # -- files sent from the loop --------------------------------------------------------------

    def handle_request(self, req: Any, conn: Any) -> bool:
        environ: dict[str, Any] = {}
        resp = None
        try:
            self.cfg.pre_request(self, req)
            started = datetime.now()
            resp, environ = wsgi.create(req, conn.sock, conn.client, conn.server, self.cfg)
            environ["wsgi.multithread"] = True
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
        if conn.parser.unreader.buf.getvalue():
            conn.sock.setblocking(True)
            self.enqueue_req(conn)
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


def _could_be_http(start: bytes | bytearray) -> bool:
    """Whether the first bytes of a connection may still become an HTTP/1 request line."""
    return _METHOD.match(bytes(start[:40])) is not None


def body_to_read(head: bytes, max_manifest_bytes: int) -> int:
    """How many body bytes the loop reads before a thread takes the request: the whole body of a
    manifest PUT or a token API / UI form with a Content-Length within its limit, else none."""
    lines = head.split(b"\r\n")
    request_line = lines[0].strip()
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
        elif name == b"transfer-encoding" or (name == b"expect" and b"100" in value):
            return 0  # chunked bodies and clients waiting for "100 Continue" go to a thread
    if not length:
        return 0
    if _MANIFEST_PUT.match(request_line):
        limit = max_manifest_bytes
    elif _FORM_POST.match(request_line):
        limit = SMALL_BODY
    else:
        return 0  # a blob upload: streamed by its view, bounded by the minimum body rate
    return length if length <= limit else 0


def is_upload(head: bytes) -> bool:
    """A blob upload carrying a body: it runs on the upload threads."""
    return _UPLOAD.match(head) is not None and _has_body(head)


def _has_body(head: bytes) -> bool:
    lowered = head.lower()
    if b"\r\ntransfer-encoding:" in lowered:
        return True
    at = lowered.find(b"\r\ncontent-length:")
    if at < 0:
        return False
    value = lowered[at + 17:].split(b"\r\n", 1)[0].strip()
    return value.isdigit() and int(value) > 0


def error_body(head: bytes, message: str) -> dict[str, Any]:
    """What a client of the path expects: the OCI envelope on /v2/, the token API's ``error``."""
    target = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
    if not target.startswith(b"/v2/"):
        return {"error": message}
    code = "UNKNOWN"
    if b"/manifests/" in target:
        code = "MANIFEST_INVALID"
    elif b"/blobs/uploads" in target:
        code = "BLOB_UPLOAD_INVALID"
    return {"errors": [{"code": code, "message": message}]}


def _peer(conn: Any) -> str:
    client = conn.client
    if isinstance(client, (tuple, list)) and len(client) >= 2:
        return f"{client[0]}:{client[1]}"
    return str(client)
