"""The decorator every registry view wears: method check, domain-error mapping, common headers."""
from __future__ import annotations

import functools
import json
import logging
from typing import Any, Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from registry import errors
from registry.http import BadHeader

log = logging.getLogger(__name__)
API_VERSION = ("Docker-Distribution-API-Version", "registry/2.0")
View = Callable[..., HttpResponseBase]  # blob GETs stream (FileResponse)


def registry_view(*methods: str) -> Callable[[View], View]:
    allowed = set(methods) | ({"HEAD"} if "GET" in methods else set())
    allow_header = ", ".join(sorted(allowed))

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method not in allowed:
                response: HttpResponseBase = errors.error_response(
                    errors.UNSUPPORTED, f"method {request.method} is not allowed here"
                )
                response["Allow"] = allow_header
            else:
                try:
                    response = view(request, *args, **kwargs)
                except errors.ANSWERED as exc:
                    response = errors.response_for(exc)
                except BadHeader as exc:
                    response = errors.error_response(errors.BLOB_UPLOAD_INVALID, str(exc))
                except Exception as exc:  # every failure of /v2/ is answered in the OCI envelope
                    response = errors.failure_response(request, exc)
            response[API_VERSION[0]] = API_VERSION[1]
            if request.method == "HEAD" and isinstance(response, HttpResponse):  # not streamed
                length = response.get("Content-Length") or str(len(response.content))
                response.content = b""
                response["Content-Length"] = length
            return response

        return wrapper

    return decorate


def json_response(data: Any, status: int = 200, content_type: str = "application/json") -> HttpResponse:
    body = json.dumps(data, separators=(",", ":")).encode()
    response = HttpResponse(body, status=status, content_type=content_type)
    response["Content-Length"] = str(len(body))
    return response


def empty(status: int, **headers: str) -> HttpResponse:
    response = HttpResponse(b"", status=status)
    del response["Content-Type"]
    response["Content-Length"] = "0"
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response
