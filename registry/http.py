"""HTTP parsing shared by the registry views: bodies, Range, Content-Range, Link."""
from __future__ import annotations

import re
from typing import BinaryIO
from urllib.parse import urlencode

from django.http import HttpRequest

from registry.services.uploads import Body

_CONTENT_RANGE = re.compile(r"^(?:bytes[ =])?([0-9]{1,19})-([0-9]{1,19})(?:/(?:[0-9]{1,19}|\*))?$")
_RANGE = re.compile(r"^bytes=([0-9]{0,19})-([0-9]{0,19})$")


class BadHeader(ValueError):
    """A request header the registry needs is malformed."""


def request_body(request: HttpRequest) -> Body:
    """The request body as a stream, without buffering it.

    Django reads CONTENT_LENGTH bytes; a chunked body (docker streams layers this way) has no
    Content-Length, so it is read from the WSGI input, which gunicorn de-chunks and terminates.
    """
    raw_length = request.META.get("CONTENT_LENGTH") or ""
    if raw_length:
        try:
            length = int(raw_length)
        except ValueError:
            raise BadHeader(f"invalid Content-Length {raw_length[:40]!r}") from None
        if length < 0:
            raise BadHeader("negative Content-Length")
        return Body(request, length)
    chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
    if chunked and request.META.get("wsgi.input_terminated"):
        return Body(_ChunkedInput(request.META["wsgi.input"]), None)
    return Body(request, 0)


class _ChunkedInput:
    """The server's de-chunking input. A malformed chunk or a client gone mid-body raises the
    server's own parse error (gunicorn's are not OSError); it is re-raised as the OSError that
    readers of a body handle, so that it is answered as a bad upload and not as a 500."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        try:
            return self._stream.read(size)
        except OSError:
            raise
        except Exception as exc:
            raise OSError(f"malformed chunked body: {exc}") from exc


def has_body(body: Body) -> bool:
    return body.length is None or body.length > 0


def parse_content_range(header: str | None) -> tuple[int, int] | None:
    if header is None or header == "":
        return None
    match = _CONTENT_RANGE.match(header.strip())
    if not match:
        raise BadHeader(f"invalid Content-Range {header[:80]!r}; expected <start>-<end>")
    start, end = int(match.group(1)), int(match.group(2))
    if end < start:
        raise BadHeader(f"invalid Content-Range {header[:80]!r}: end before start")
    return start, end


class Unsatisfiable(Exception):
    pass


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """One byte range (inclusive) of a ``Range`` header, or None to send the whole body.

    Malformed and multi-range headers are ignored, as RFC 9110 allows; a range starting past the
    end raises ``Unsatisfiable``.
    """
    if not header:
        return None
    match = _RANGE.match(header.strip())
    if not match or (not match.group(1) and not match.group(2)):
        return None
    first, last = match.group(1), match.group(2)
    if not first:  # suffix: the last N bytes
        suffix = int(last)
        if suffix == 0:
            raise Unsatisfiable()
        # A suffix of an empty body is satisfiable but holds no byte: send the (empty) whole body.
        return (max(size - suffix, 0), size - 1) if size else None
    start = int(first)
    if last and int(last) < start:
        return None  # an invalid range-spec: ignore the header
    if start >= size:
        raise Unsatisfiable()
    return start, min(int(last), size - 1) if last else size - 1


class RangeFile:
    """A window of an open file: reads stop at the window's end, ``fileno`` allows sendfile.

    gunicorn's sendfile starts at the file's current position and sends Content-Length bytes.
    """

    def __init__(self, fh: BinaryIO, start: int, length: int) -> None:
        fh.seek(start)
        self._fh = fh
        self._left = length

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        size = self._left if size < 0 else min(size, self._left)
        data = self._fh.read(size)
        self._left -= len(data)
        return data

    def fileno(self) -> int:
        return self._fh.fileno()

    def close(self) -> None:
        self._fh.close()


def next_link(path: str, params: dict[str, str | int]) -> str:
    return f'<{path}?{urlencode(params)}>; rel="next"'
