"""Registry and auth metrics derived from a finished request: a table lookup on the route, no I/O.

Counting at the edge, from the route name, the method and the status, keeps the views and the
services free of metric calls and costs a manifest GET one dictionary lookup and one increment.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from django.conf import settings
from django.http import HttpRequest

from ops import metrics
from registry import routes
from tokens.principal import AuthAttempt, Mechanism, Outcome

Recorder = Callable[[HttpRequest, int, int, int], None]


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
    (routes.BLOB, "GET"): _blob_pull,
    (routes.BLOB, "DELETE"): _blob_delete,
    (routes.MANIFEST, "GET"): _manifest_pull,
    (routes.MANIFEST, "PUT"): _manifest_push,
    (routes.MANIFEST, "DELETE"): _manifest_delete,
    (routes.UPLOAD_START, "POST"): _upload_start,
    (routes.UPLOAD_SESSION, "PATCH"): _upload_chunk,
    (routes.UPLOAD_SESSION, "PUT"): _upload_finish,
    (routes.UPLOAD_SESSION, "DELETE"): _upload_cancel,
}


def route_name(request: HttpRequest) -> str | None:
    # Set by Django's URL resolution (before the authentication middleware refuses a request).
    match = getattr(request, "resolver_match", None)
    return match.url_name if match is not None else None


def record(request: HttpRequest, status: int, bytes_in: int, bytes_out: int) -> None:
    route = route_name(request)
    recorder = ROUTES.get((route or "", request.method or ""))
    if recorder is not None:
        recorder(request, status, bytes_in, bytes_out)
    if settings.AUTH_ENABLED:
        _record_auth(request)


def _record_auth(request: HttpRequest) -> None:
    # What authentication (or a password check of the token API or the UI) recorded on the
    # request: credentials that were never looked at (public endpoints) are not an attempt.
    attempt: AuthAttempt | None = getattr(request, "auth_attempt", None)
    if attempt is not None:
        _auth_attempts(attempt.mechanism, attempt.outcome).inc()
        if attempt.distributed:
            metrics.AUTH_DISTRIBUTED_FAILURES.inc()


@lru_cache(maxsize=None)
def _auth_attempts(mechanism: Mechanism, outcome: Outcome) -> Any:
    # The child counter of each (mechanism, outcome): a handful in all, and labels() takes a lock
    # and builds its key on every call, which every authenticated request paid.
    return metrics.AUTH_ATTEMPTS.labels(mechanism.value, outcome.value)
