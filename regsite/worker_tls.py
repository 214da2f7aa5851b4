"""HTTPS in the worker's event loop (regsite/worker.py), with ``[server] tls_cert`` (regsite/tls.py).

- **Handshake.** A new connection's first byte is peeked at: a TLS record (0x16) starts the
  handshake; anything else is a client speaking plain HTTP to this port, told so in clear (400) and
  closed. The handshake runs non-blocking in the loop, reading or writing as the SSL object asks,
  by the deadline that the first request head then shares (``client_timeout`` from accept): a
  client slow or silent in it costs a socket, never a thread.
- **Reads** go through the SSL object. A record may hold more than a read asked for, and bytes
  decrypted already do not make the socket readable: ``pending_bytes`` tells the loop to take them.
- **Files.** ``os.sendfile`` would send a blob in clear: the loop reads it a piece at a time and
  gives each piece to the SSL object as the client takes it, at the pace of the plain path, with
  the same bound on a reader that stops (a record taken is progress). OpenSSL asks to be given the
  same bytes again after it had to wait, so a piece stays in the transfer (``unsent``) until taken.
- **Closing.** A connection the worker ends gets a TLS close_notify before its TCP half-close.
"""
from __future__ import annotations

import errno
import logging
import os
import selectors
import socket
import ssl
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from regsite.client_timeouts import TLSClientSocket, count_timeout

log = logging.getLogger("gunicorn.error")

HANDSHAKE = "handshake"
HANDSHAKE_RECORD = 0x16  # the content type of a TLS handshake record: a ClientHello starts with it
TLS_CHUNK = 64 * 1024  # a file's piece held in memory for a client while it reads
RECORD_BYTES = 16 * 1024  # given to the SSL object at a time: one record, and one step of progress
TLS_BURST = 4 * 1024 * 1024  # sent in one go before other connections get their turn
_PLAIN_BODY = b'{"error": "this port serves HTTPS: use an https:// URL"}'
PLAIN_ON_TLS_PORT = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (len(_PLAIN_BODY), _PLAIN_BODY))


def pending_bytes(sock: Any) -> int:
    """Bytes the SSL object has decrypted and not yet handed out (0 for a plain socket)."""
    return sock.pending() if isinstance(sock, ssl.SSLSocket) else 0


def tls_waiting(exc: OSError) -> bool:
    """Whether a non-blocking TLS read or write only has to wait for the socket."""
    return isinstance(exc, (ssl.SSLWantReadError, ssl.SSLWantWriteError))


def tls_error(conn: Any, exc: OSError) -> None:
    """A client's TLS failure (a certificate it refused, a protocol it does not speak): the
    client's to see, not the operator's, so at debug level."""
    if isinstance(exc, ssl.SSLError) and not isinstance(exc, ssl.SSLEOFError):
        log.debug("TLS connection from %s failed: %s", _peer(conn), exc.reason or exc)


def close_notify(sock: Any) -> None:
    if isinstance(sock, TLSClientSocket):
        sock.close_notify()


def _peer(conn: Any) -> str:
    client = conn.client
    return f"{client[0]}:{client[1]}" if isinstance(client, (tuple, list)) and len(client) >= 2 else str(client)


class TLSLoop:
    """The TLS part of RegistryWorker's loop; a mixin, using the worker's poller and deadlines."""

    if TYPE_CHECKING:
        poller: selectors.BaseSelector
        limits: Any
        certificates: Any

        def _expire_at(self, conn: Any, deadline: float) -> None: ...
        def _forget(self, conn: Any) -> None: ...
        def _close(self, conn: Any) -> None: ...
        def _linger(self, conn: Any) -> None: ...
        def _read(self, conn: Any, received: bytes = b"", deadline: float | None = None) -> None: ...
        def _sent(self, conn: Any, transfer: Any, sent: int) -> None: ...
        def _end_transfer(self, conn: Any, complete: bool) -> None: ...

    def _start_tls(self, conn: Any) -> None:
        conn.state = HANDSHAKE
        conn.first_deadline = time.monotonic() + self.limits.client_timeout
        self._expire_at(conn, conn.first_deadline)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_hello, conn))

    def _on_hello(self, conn: Any, _sock: Any) -> None:
        try:
            first = conn.sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            first = b""
        self.poller.unregister(conn.sock)
        if not first:
            self._close(conn)
        elif first[0] != HANDSHAKE_RECORD:
            log.debug("plain HTTP from %s on the HTTPS port: answered 400", _peer(conn))
            try:
                conn.sock.send(PLAIN_ON_TLS_PORT)  # into an empty send buffer: it never blocks
            except OSError:
                pass
            self._forget(conn)
            self._linger(conn)
        else:
            # The context of this moment: a certificate replaced on disk is the next connections'.
            try:
                conn.sock = TLSClientSocket.wrap(conn.sock, self.certificates.context)
            except OSError:
                self._close(conn)
                return
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_handshake, conn))
            self._on_handshake(conn, conn.sock)

    def _on_handshake(self, conn: Any, _sock: Any) -> None:
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self.poller.modify(conn.sock, selectors.EVENT_READ, partial(self._on_handshake, conn))
            return
        except ssl.SSLWantWriteError:
            self.poller.modify(conn.sock, selectors.EVENT_WRITE, partial(self._on_handshake, conn))
            return
        except OSError as exc:
            tls_error(conn, exc)
            self._close(conn)
            return
        self.poller.unregister(conn.sock)
        self._read(conn, deadline=conn.first_deadline)

    def _handshake_timed_out(self, conn: Any) -> None:
        if isinstance(conn.sock, TLSClientSocket):  # it began a handshake; a silent client is no news
            log.warning("closing connection from %s: TLS handshake not complete within %ss", _peer(conn),
                        self.limits.client_timeout)
            count_timeout("handshake")
        self._close(conn)

    def _send_file_tls(self, conn: Any, transfer: Any) -> None:
        """Send what the client takes now of the file, through the SSL object."""
        burst = 0
        while burst < TLS_BURST:
            if not transfer.unsent:
                try:
                    transfer.unsent = memoryview(os.pread(transfer.fd, min(transfer.left, TLS_CHUNK), transfer.offset))
                except OSError:
                    transfer.unsent = b""
                if not transfer.unsent:  # shorter than announced, or unreadable: the client must see a cut
                    self._end_transfer(conn, complete=False)
                    return
            try:
                # A record at a time: each one taken is progress, as each byte is for sendfile, so a
                # reader slower than a piece per client_timeout is not taken for a stalled one.
                sent = conn.sock.send(transfer.unsent[:RECORD_BYTES])
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
                return  # the same bytes again once the socket takes more
            except OSError as exc:
                if not isinstance(exc, ssl.SSLError) and exc.errno not in (errno.EPIPE, errno.ECONNRESET):
                    log.debug("sending a file to %s failed: %s", _peer(conn), exc)
                self._end_transfer(conn, complete=False)  # SSLWantReadError too: no renegotiation here
                return
            transfer.unsent = transfer.unsent[sent:]
            burst += sent
            self._sent(conn, transfer, sent)
            if conn.transfer is None:  # all sent: the transfer ended
                return
