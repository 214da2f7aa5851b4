"""Registry and auth metrics derived from a finished request: a table lookup on the route, no I/O.

Counting at the edge, from the route name, the method and the status, keeps the views and the
services free of metric calls and costs a manifest GET one dictionary lookup and one increment.
"""
from __future__ import annotations

import base64
import binascii
from typing import Callable

from django.conf import settings
from django.http import HttpRequest
from django.urls import Resolver404, resolve

from ops import metrics
from tokens.services import TOKEN_USERNAME

Recorder = Callable[[HttpRequest, int, int, int], None]
TOKEN_API_ROUTES = frozenset({"tokens-create", "tokens-list", "tokens-revoke"})


def _blob_pull(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    metrics.BLOB_OPERATIONS.labels("pull", metrics.outcome(status)).inc()
    if status in (200, 206):
        metrics.BYTES_DOWNLOADED.inc(bytes_out)


def _blob_delete(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    metrics.BLOB_OPERATIONS.labels("delete", metrics.outcome(status)).inc()


def _manifest_pull(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    metrics.MANIFEST_OPERATIONS.labels("pull", metrics.outcome(status)).inc()
    if status == 200:
        metrics.BYTES_DOWNLOADED.inc(bytes_out)


def _manifest_push(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    metrics.MANIFEST_OPERATIONS.labels("push", metrics.outcome(status)).inc()
    if status == 201:
        metrics.BYTES_UPLOADED.inc(bytes_in)


def _manifest_delete(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    metrics.MANIFEST_OPERATIONS.labels("delete", metrics.outcome(status)).inc()


def _upload_start(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    if status == 202:
        metrics.UPLOAD_SESSIONS.labels("started").inc()
    elif status == 201:  # a monolithic upload or a mount: the blob is pushed in one request
        metrics.BLOB_OPERATIONS.labels("push", "success").inc()
        metrics.BYTES_UPLOADED.inc(bytes_in)
    elif "digest" in request.GET:
        metrics.BLOB_OPERATIONS.labels("push", metrics.outcome(status)).inc()


def _upload_chunk(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    if status < 400:
        metrics.BYTES_UPLOADED.inc(bytes_in)
    else:
        metrics.UPLOAD_SESSIONS.labels("failed").inc()


def _upload_finish(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    metrics.BLOB_OPERATIONS.labels("push", metrics.outcome(status)).inc()
    if status == 201:
        metrics.UPLOAD_SESSIONS.labels("completed").inc()
        metrics.BYTES_UPLOADED.inc(bytes_in)
    else:
        metrics.UPLOAD_SESSIONS.labels("failed").inc()


def _upload_cancel(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    if status == 204:
        metrics.UPLOAD_SESSIONS.labels("cancelled").inc()


# HEAD requests are existence checks, not transfers, and are deliberately not counted.
ROUTES: dict[tuple[str, str], Recorder] = {
    ("blob", "GET"): _blob_pull,
    ("blob", "DELETE"): _blob_delete,
    ("manifest", "GET"): _manifest_pull,
    ("manifest", "PUT"): _manifest_push,
    ("manifest", "DELETE"): _manifest_delete,
    ("upload-start", "POST"): _upload_start,
    ("upload-session", "PATCH"): _upload_chunk,
    ("upload-session", "PUT"): _upload_finish,
    ("upload-session", "DELETE"): _upload_cancel,
}


def route_name(request: HttpRequest, status: int) -> str | None:
    match = getattr(request, "resolver_match", None)
    if match is None and status in (401, 403, 429):
        # Refused by the auth middleware before URL resolution; resolving costs only refusals.
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return None
    return match.url_name if match is not None else None


def record(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    route = route_name(request, status)
    recorder = ROUTES.get((route or "", request.method or ""))
    if recorder is not None:
        recorder(request, status, bytes_in, bytes_out)
    if settings.AUTH_ENABLED:
        _record_auth(request, route, status)


def _record_auth(request: HttpRequest, route: str | None, status: int) -> None:
    if route in TOKEN_API_ROUTES:
        # Credentials travel in the body; the status says whether they were accepted.
        if status == 401:
            metrics.AUTH_ATTEMPTS.labels("password", "failure").inc()
        elif status == 429:
            metrics.AUTH_ATTEMPTS.labels("password", "throttled").inc()
        elif status < 300 or status == 404:
            metrics.AUTH_ATTEMPTS.labels("password", "success").inc()
        return
    header = request.META.get("HTTP_AUTHORIZATION")
    if not header:
        return
    kind = getattr(getattr(request, "principal", None), "kind", None)
    if status == 429:
        result = "throttled"
    elif kind in ("user", "token"):
        result = "success"
    else:
        result = "failure"
    metrics.AUTH_ATTEMPTS.labels(mechanism(header), result).inc()


def mechanism(header: str) -> str:
    """basic (an htpasswd user), token (Basic with the username ``token``), bearer, or other."""
    scheme, _, value = header.strip().partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer":
        return "bearer"
    if scheme != "basic":
        return "other"
    try:
        username = base64.b64decode(value.strip(), validate=True).split(b":", 1)[0]
    except (binascii.Error, ValueError):
        return "basic"
    return "token" if username == TOKEN_USERNAME.encode() else "basic"
