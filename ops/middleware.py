"""Request id, one JSON log line per request, and the registry metrics of each request.

The line is written when the server closes the response, after the last byte of a streamed blob,
so its duration covers the whole transfer. It holds no header values except the request id and the
user agent: never the Authorization header, a password or a token (a token principal is named by its
hash_prefix). regsite.logs writes it as JSON, like every other line, and puts the request id on any
line logged while the request is being served.
"""
from __future__ import annotations

import logging
import os
import re
import time
from typing import Any, BinaryIO, Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from ops import observe
from regsite import logs
from regsite.forwarded import client_address
from tokens.principal import AuthenticatedHttpRequest, Principal

log = logging.getLogger("ops.requests")
REQUEST_ID_HEADER = "X-Request-ID"
_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:+/=-]{1,128}$")
MAX_USER_AGENT = 256


def request_id(supplied: str | None) -> str:
    """The client's X-Request-ID when it is a sane token, otherwise a new one."""
    if supplied and _CLIENT_REQUEST_ID.fullmatch(supplied):
        return supplied
    return os.urandom(16).hex()


class CountingReader:
    """Counts the bytes of a chunked request body as the view streams it."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.count += len(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        data = self._stream.readline(size)
        self.count += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _count_chunked_body(request: HttpRequest) -> CountingReader | None:
    # A body with Content-Length is measured by that header; only chunked bodies need counting.
    if request.META.get("CONTENT_LENGTH") or "wsgi.input" not in request.META:
        return None
    if "chunked" not in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        return None
    reader = CountingReader(request.META["wsgi.input"])
    request.META["wsgi.input"] = reader
    return reader


def bytes_in(request: HttpRequest, reader: CountingReader | None) -> int:
    if reader is not None:
        return reader.count
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


def bytes_out(request: HttpRequest, response: HttpResponseBase) -> int:
    if request.method == "HEAD":
        return 0
    if isinstance(response, HttpResponse):  # not streamed: the body is in memory
        return len(response.content)
    try:
        return int(response.get("Content-Length") or 0)
    except ValueError:
        return 0


def principal_label(request: HttpRequest) -> str | None:
    # A request answered before authentication ran (a static file) has no principal.
    principal: Principal | None = getattr(request, "principal", None)
    return principal.label if principal is not None else None


class RequestLogMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: AuthenticatedHttpRequest) -> HttpResponse:
        started_wall = time.time()
        started = time.perf_counter()
        request.request_id = request_id(request.META.get("HTTP_X_REQUEST_ID"))
        reader = _count_chunked_body(request)
        serving = logs.current_request_id.set(request.request_id)
        try:
            response = self.get_response(request)
        finally:
            logs.current_request_id.reset(serving)
        response[REQUEST_ID_HEADER] = request.request_id
        received = bytes_in(request, reader)
        sent = bytes_out(request, response)
        observe.record(request, response.status_code, received, sent)
        level = logging.ERROR if response.status_code >= 500 else logging.INFO
        if log.isEnabledFor(level):
            _after_close(response, lambda: log.log(
                level, "%s %s %s", request.method, request.path, response.status_code,
                extra=_fields(request, response, received, sent, started_wall, started)))
        return response


def _fields(request: AuthenticatedHttpRequest, response: HttpResponseBase, received: int, sent: int,
            started_wall: float, started: float) -> dict[str, Any]:
    """The line's own fields, after time, level ("error" for a 5xx), logger and message (regsite.logs)."""
    match = getattr(request, "resolver_match", None)
    return {
        "time": logs.timestamp(started_wall),
        "request_id": request.request_id,
        "method": request.method,
        "path": request.path,
        "route": match.view_name if match is not None else None,
        "status": response.status_code,
        "bytes_in": received,
        "bytes_out": sent,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        "remote_addr": request.META.get("REMOTE_ADDR"),
        "forwarded_for": request.META.get("HTTP_X_FORWARDED_FOR"),
        "client": client_address(request),
        "user_agent": request.META.get("HTTP_USER_AGENT", "")[:MAX_USER_AGENT] or None,
        "principal": principal_label(request),
    }


def _after_close(response: HttpResponseBase, callback: Callable[[], None]) -> None:
    # WSGI servers (and Django's file_wrapper path) call response.close() once the body is sent.
    close = response.close

    def close_then_log() -> None:
        try:
            close()
        finally:
            callback()

    response.close = close_then_log  # type: ignore[method-assign]  # wrapped on this one response object
