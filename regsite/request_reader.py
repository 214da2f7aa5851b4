"""One request as the worker's event loop reads it (regsite/worker.py), before a thread sees it.

The rule has one exception and no list of routes, so a route added tomorrow is covered: every
request is read whole in the loop, its head and then its body, whatever the encoding
(Content-Length or chunked, after the loop has answered ``100 Continue`` itself when the client
waits for it), up to a bound: ``max_manifest_bytes`` for a manifest PUT, ``SMALL_BODY`` for anything
else. A body over its bound is refused (413) unread. The exception is a blob upload's body, which
its view hashes and writes as it arrives: that request goes on once its head is in, to the upload
threads, whose socket enforces the minimum body rate (regsite/client_timeouts.py).

What the loop hands on is what gunicorn's parser then reads from memory: the head, the body and
whatever the client pipelined after it. A chunked body is de-chunked here and handed on with a
Content-Length (trailers dropped), and a head whose ``Expect: 100-continue`` the loop answered loses
that header, so that gunicorn does not answer it a second time.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

HEAD_END = b"\r\n\r\n"
MAX_HEAD = 64 * 1024  # more than gunicorn's own limits let through for a sane request
SMALL_BODY = 64 * 1024
MAX_CHUNK_LINE = 4096  # a chunk size and its extensions
MAX_TRAILERS = 16 * 1024
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

_MANIFEST_PUT = re.compile(rb"^PUT /v2/\S+/manifests/[^/\s?]+(?:\?\S*)? HTTP/1\.[01]$")
_UPLOAD = re.compile(rb"^(?:PATCH|PUT|POST) /v2/\S+/blobs/uploads/")
_ABSOLUTE = re.compile(rb"^([A-Z]+ )https?://[^/\s]*")
_METHOD = re.compile(rb"^(?:\r\n)*[A-Z]{0,16}(?: |$)")
_HEX = re.compile(rb"^[0-9A-Fa-f]{1,16}$")
_FRAMING = re.compile(rb"\r\n(?:content-length|transfer-encoding|expect):")  # of a lower-cased head


class Refused(Exception):
    """The loop answers the request itself, with ``status``, and closes the connection."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def _bad(message: str) -> Refused:
    return Refused(400, "Bad Request", message)


@dataclass(frozen=True)
class Ready:
    """What a thread's parser reads first, and whether the body is still on the socket (an upload)."""

    data: bytes
    upload: bool = False


@dataclass
class Head:
    raw: bytes
    request_line: bytes  # in origin form (a path), for what the loop decides from it
    length: int | None = None
    chunked: bool = False
    expects_continue: bool = False

    @property
    def has_body(self) -> bool:
        return self.chunked or bool(self.length)

    def handed_on(self, length: int | None) -> bytes:
        """The head as the thread's parser gets it: without what the loop has dealt with, that is
        ``Expect: 100-continue`` (answered) and ``Transfer-Encoding`` (de-chunked: ``length`` is
        then the body's)."""
        drop = {b"expect"} if self.expects_continue else set()
        if length is not None:
            drop |= {b"transfer-encoding", b"content-length"}
        lines = self.raw.split(b"\r\n")
        kept = [line for line in lines[1:] if line.partition(b":")[0].lower() not in drop]
        if length is not None:
            kept.append(b"Content-Length: %d" % length)
        return b"\r\n".join([lines[0], *kept]) + HEAD_END


def parse_head(raw: bytes) -> Head:
    """The request line and the fields that frame the body; gunicorn's parser checks the rest."""
    if raw.startswith(b"\r\n"):  # RFC 9112 2.2 allows one empty line before the request line
        raw = raw[2:]
    request_line = raw.split(b"\r\n", 1)[0]
    head = Head(raw, _ABSOLUTE.sub(rb"\1", request_line) if b"://" in request_line else request_line)
    lowered = raw.lower()
    if not _FRAMING.search(lowered):  # most requests: a GET or HEAD
        return head
    http11 = head.request_line.endswith(b" HTTP/1.1")
    lengths, codings = [], []
    for field in lowered.split(b"\r\n")[1:]:
        name, _, value = field.partition(b":")
        value = value.strip(b" \t")
        if name == b"content-length":
            lengths.append(value)
        elif name == b"transfer-encoding":
            codings += [c.strip(b" \t") for c in value.split(b",")]
        elif name == b"expect" and value == b"100-continue" and http11:
            head.expects_continue = True
    if len(lengths) > 1:
        raise _bad("more than one Content-Length")
    if lengths and not (lengths[0].isdigit() and len(lengths[0]) <= 19):
        raise _bad(f"invalid Content-Length {lengths[0][:40]!r}")
    if codings and codings != [b"chunked"]:
        raise Refused(501, "Not Implemented", "Transfer-Encoding must be chunked, alone")
    if codings and (lengths or not http11):
        raise _bad("Transfer-Encoding: chunked with a Content-Length or on HTTP/1.0")
    head.chunked = bool(codings)
    head.length = int(lengths[0]) if lengths else None
    return head


def body_limit(head: Head, max_manifest_bytes: int) -> int | None:
    """How much body the loop reads for this request; None: none, the body streams (an upload)."""
    if head.has_body and _UPLOAD.match(head.request_line):
        return None
    return max_manifest_bytes if _MANIFEST_PUT.match(head.request_line) else SMALL_BODY


class RequestReader:
    """Fed the bytes of one request as they arrive; ``feed`` says when a thread may take it."""

    def __init__(self, max_manifest_bytes: int) -> None:
        self.max_manifest_bytes = max_manifest_bytes
        self.received = bytearray()
        self.head: Head | None = None
        self.continue_due = False  # the loop owes the client "100 Continue"
        self._continued = False
        self._head_size = 0
        self._scanned = 0
        self._limit: int | None = 0
        self._chunks: Dechunker | None = None

    def feed(self, data: bytes) -> Ready | None:
        """The request once the loop has read all it reads of it, else None; raises Refused."""
        self.received += data
        if self.head is None:
            if not self._read_head():
                return None
            if self._limit is None:
                return Ready(bytes(self.received), upload=True)
        assert self.head is not None
        ready = self._read_body(self.head)
        if ready is None and self.head.expects_continue and not self._continued:
            self._continued = self.continue_due = True
        return ready

    def _read_head(self) -> bool:
        end = self.received.find(HEAD_END, max(0, self._scanned - 3))
        self._scanned = len(self.received)
        if end < 0:
            if not _could_be_http(self.received):
                raise _bad("not an HTTP/1.1 request")
            if len(self.received) > MAX_HEAD:
                raise Refused(431, "Request Header Fields Too Large", "request head too large")
            return False
        self.head = head = parse_head(bytes(self.received[:end]))
        self._head_size = end + len(HEAD_END)
        self._limit = limit = body_limit(head, self.max_manifest_bytes)
        if limit is not None and head.length is not None and head.length > limit:
            raise Refused(413, "Content Too Large", f"request body of {head.length} bytes is over the limit "
                                                    f"of {limit} bytes")
        if limit is not None and head.chunked:
            self._chunks = Dechunker(limit)
        return True

    def _read_body(self, head: Head) -> Ready | None:
        if self._chunks is not None:
            done = self._chunks.feed(bytes(self.received[self._head_size:]))
            del self.received[self._head_size:]
            if done is None:
                return None
            body, rest = done
            return Ready(head.handed_on(len(body)) + body + rest)
        if len(self.received) < self._head_size + (head.length or 0):
            return None
        if not head.expects_continue:
            return Ready(bytes(self.received))
        return Ready(head.handed_on(None) + bytes(self.received[self._head_size:]))


class Dechunker:
    """A chunked body decoded as its bytes arrive, refused once it grows over ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.body = bytearray()
        self._pending = b""
        self._left = 0  # bytes of the current chunk still to come, then its CRLF
        self._state = "size"

    def feed(self, data: bytes) -> tuple[bytes, bytes] | None:
        """(the body, the bytes after it) once the last chunk and trailers are in, else None."""
        buf = self._pending + data
        pos = 0
        while True:
            if self._state == "size":
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if len(buf) - pos > MAX_CHUNK_LINE:
                        raise _bad("malformed chunked body: chunk size line too long")
                    break
                size = buf[pos:end].split(b";", 1)[0].rstrip(b" \t")
                if not _HEX.match(size):
                    raise _bad(f"malformed chunked body: chunk size {size[:20]!r}")
                pos, self._left = end + 2, int(size, 16)
                if len(self.body) + self._left > self.limit:
                    raise Refused(413, "Content Too Large", f"request body is over the limit of {self.limit} bytes")
                self._state = "data" if self._left else "trailers"
            elif self._state == "data":
                take = buf[pos:pos + self._left]
                self.body += take
                pos += len(take)
                self._left -= len(take)
                if self._left:
                    break
                self._state = "crlf"
            elif self._state == "crlf":
                if len(buf) - pos < 2:
                    break
                if buf[pos:pos + 2] != b"\r\n":
                    raise _bad("malformed chunked body: a chunk does not end with CRLF")
                pos += 2
                self._state = "size"
            else:  # trailers: none (CRLF), or fields up to an empty line, which are dropped
                if buf[pos:pos + 2] == b"\r\n":
                    return bytes(self.body), buf[pos + 2:]
                end = buf.find(HEAD_END, pos)
                if end >= 0:
                    return bytes(self.body), buf[end + 4:]
                if len(buf) - pos > MAX_TRAILERS:
                    raise _bad("malformed chunked body: trailers too long")
                break
        self._pending = buf[pos:]
        return None


def _could_be_http(start: bytes | bytearray) -> bool:
    """Whether the first bytes of a connection may still become an HTTP/1 request line."""
    return _METHOD.match(bytes(start[:40])) is not None


def error_body(request_line: bytes, message: str) -> dict[str, Any]:
    """What a client of the path expects: the OCI envelope on /v2/ (and on /auth/token, whose
    clients read either it or ``error``), ``{"error": ...}`` elsewhere."""
    target = request_line.split(b" ", 2)[1] if request_line.count(b" ") >= 2 else b""
    if target.startswith(b"/auth/token"):
        return {"errors": [{"code": "UNSUPPORTED", "message": message}], "error": message}
    if not target.startswith(b"/v2/"):
        return {"error": message}
    code = "UNKNOWN"
    if b"/manifests/" in target:
        code = "MANIFEST_INVALID"
    elif b"/blobs/uploads" in target:
        code = "BLOB_UPLOAD_INVALID"
    return {"errors": [{"code": code, "message": message}]}
