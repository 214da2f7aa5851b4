"""The error catalogue: every OCI error code once, with its HTTP status, and the one renderer.

Services raise domain exceptions (registry.services.exceptions) and pass a full storage device
through (registry.storage.driver.StorageFull); ``response_for`` turns any of them into the
``{"errors": [{"code", "message", "detail"}]}`` envelope with the right status.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse

from registry.services import exceptions as exc
from registry.storage.driver import StorageError, StorageFull

log = logging.getLogger("registry.errors")


@dataclass(frozen=True)
class ErrorCode:
    code: str
    message: str
    status: int


BLOB_UNKNOWN = ErrorCode("BLOB_UNKNOWN", "blob unknown to registry", 404)
BLOB_UPLOAD_INVALID = ErrorCode("BLOB_UPLOAD_INVALID", "blob upload invalid", 400)
BLOB_UPLOAD_UNKNOWN = ErrorCode("BLOB_UPLOAD_UNKNOWN", "blob upload unknown to registry", 404)
DIGEST_INVALID = ErrorCode("DIGEST_INVALID", "provided digest did not match uploaded content", 400)
MANIFEST_BLOB_UNKNOWN = ErrorCode(
    "MANIFEST_BLOB_UNKNOWN", "manifest references a manifest or blob unknown to registry", 400
)
MANIFEST_INVALID = ErrorCode("MANIFEST_INVALID", "manifest invalid", 400)
MANIFEST_UNKNOWN = ErrorCode("MANIFEST_UNKNOWN", "manifest unknown to registry", 404)
NAME_INVALID = ErrorCode("NAME_INVALID", "invalid repository name", 400)
NAME_UNKNOWN = ErrorCode("NAME_UNKNOWN", "repository name not known to registry", 404)
SIZE_INVALID = ErrorCode("SIZE_INVALID", "provided length did not match content length", 400)
UNAUTHORIZED = ErrorCode("UNAUTHORIZED", "authentication required", 401)
DENIED = ErrorCode("DENIED", "requested access to the resource is denied", 403)
UNSUPPORTED = ErrorCode("UNSUPPORTED", "the operation is unsupported", 405)
TOOMANYREQUESTS = ErrorCode("TOOMANYREQUESTS", "too many requests", 429)
PAGINATION_NUMBER_INVALID = ErrorCode("PAGINATION_NUMBER_INVALID", "invalid number of results requested", 400)
RANGE_INVALID = ErrorCode("RANGE_INVALID", "requested range not satisfiable", 416)
STORAGE_FULL = ErrorCode("BLOB_UPLOAD_INVALID", "no space left on the storage device", 507)
INTERNAL = ErrorCode("UNKNOWN", "internal server error", 500)
UNAVAILABLE = ErrorCode("UNAVAILABLE", "service unavailable", 503)
ENDPOINT_UNKNOWN = ErrorCode("UNSUPPORTED", "no registry endpoint at this path", 404)
UPSTREAM_FAILED = ErrorCode("UNAVAILABLE", "the upstream registry failed", 502)
UPSTREAM_TIMEOUT = ErrorCode("UNAVAILABLE", "the upstream registry did not answer in time", 504)
# A request whose path, query string or headers hold text no database stores (regsite.text).
TEXT_INVALID = ErrorCode("UNSUPPORTED", "the request holds text that is not valid", 400)

# The errors a registry view answers with the envelope rather than a 500.
ANSWERED = (exc.RegistryError, StorageFull)
Answered = exc.RegistryError | StorageFull

# Exception -> (code, status when it differs from the code's own).
EXCEPTION_CODES: dict[type[Exception], tuple[ErrorCode, int | None]] = {
    exc.NameInvalid: (NAME_INVALID, None),
    exc.NameUnknown: (NAME_UNKNOWN, None),
    exc.TagInvalid: (MANIFEST_INVALID, None),
    exc.DigestInvalid: (DIGEST_INVALID, None),
    exc.SizeInvalid: (SIZE_INVALID, None),
    exc.BlobUnknown: (BLOB_UNKNOWN, None),
    exc.UploadUnknown: (BLOB_UPLOAD_UNKNOWN, None),
    exc.UploadInvalid: (BLOB_UPLOAD_INVALID, None),
    exc.UploadOutOfOrder: (BLOB_UPLOAD_INVALID, 416),
    exc.TooManyUploads: (TOOMANYREQUESTS, None),
    exc.UploadBusy: (UNAVAILABLE, None),
    exc.ManifestInvalid: (MANIFEST_INVALID, None),
    exc.ManifestUnknown: (MANIFEST_UNKNOWN, None),
    exc.ManifestBlobUnknown: (MANIFEST_BLOB_UNKNOWN, None),
    exc.ManifestTooLarge: (MANIFEST_INVALID, 413),
    exc.PaginationInvalid: (PAGINATION_NUMBER_INVALID, None),
    exc.RangeNotSatisfiable: (RANGE_INVALID, None),
    exc.DeleteDisabled: (UNSUPPORTED, None),
    exc.PolicyDenied: (DENIED, None),
    exc.ReadOnlyNamespace: (UNSUPPORTED, None),
    exc.UpstreamUnavailable: (UNAVAILABLE, None),
    exc.UpstreamTimedOut: (UPSTREAM_TIMEOUT, None),
    exc.UpstreamFailed: (UPSTREAM_FAILED, None),
    exc.UpstreamThrottled: (TOOMANYREQUESTS, None),
    StorageFull: (STORAGE_FULL, None),
}


def envelope(code: ErrorCode, message: str | None = None, detail: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"code": code.code, "message": message or code.message}
    if detail is not None:
        entry["detail"] = detail
    return {"errors": [entry]}


def error_response(
    code: ErrorCode,
    message: str | None = None,
    detail: Any = None,
    status: int | None = None,
    extra: dict[str, Any] | None = None,
) -> HttpResponse:
    body = envelope(code, message, detail)
    if extra:
        body.update(extra)
    data = json.dumps(body).encode()
    response = HttpResponse(data, status=status or code.status, content_type="application/json")
    response["Content-Length"] = str(len(data))
    return response


def response_for(error: Answered) -> HttpResponse:
    for cls in type(error).__mro__:
        if cls in EXCEPTION_CODES:
            code, status = EXCEPTION_CODES[cls]
            break
    else:
        code, status = INTERNAL, None
    if isinstance(error, exc.RegistryError):
        message, detail = error.message, error.detail
    else:
        message, detail = str(error), None
    response = error_response(code, message or None, detail, status)
    if isinstance(error, exc.UploadOutOfOrder):
        response["Range"] = f"0-{max(error.offset - 1, 0)}"
    if isinstance(error, exc.RangeNotSatisfiable):
        response["Content-Range"] = f"bytes */{error.size}"
    if isinstance(error, (exc.TooManyUploads, exc.UploadBusy, exc.UpstreamError)):
        response["Retry-After"] = str(error.retry_after)
    return response


def failure_response(request: HttpRequest, error: BaseException) -> HttpResponse:
    """A 5xx in the OCI envelope for what went wrong underneath, logged with the request id.

    The database down, out of pooled connections, read-only or its connection lost (a failover), or
    the storage failing, are 503 with Retry-After (clients retry those); anything else is a 500. The
    message names the request id, which the log line carries too, never the error's own text (it may
    name paths or hosts).
    """
    request_id = getattr(request, "request_id", "")
    if isinstance(error, (OperationalError, InterfaceError)):
        code, what = UNAVAILABLE, "the database is not available"
    elif isinstance(error, StorageError):
        code, what = UNAVAILABLE, "the storage is not available"
    else:
        code, what = INTERNAL, "internal server error"
    log.error("%s %s failed (request %s): %s", request.method, request.path, request_id, what,
              exc_info=(type(error), error, error.__traceback__))
    response = error_response(code, f"{what}; request id {request_id}" if request_id else what)
    if code is UNAVAILABLE:
        response["Retry-After"] = "1"
    return response
