"""Text that may enter the registry: no NUL, no lone surrogate. The one place that says so.

PostgreSQL refuses NUL in text and JSON columns (even in a lookup, so a username holding one was a
500 before any password was checked), and no encoder writes a lone surrogate ("\\ud800" is valid
JSON, and Python's text, but not Unicode), so such text breaks whatever stores or prints it later.
It is refused where a request is parsed: the path, the query string and the header values of every
request by ``TextMiddleware``, before any view; the text inside a body by the one reader of each
kind of body (Basic credentials, the token API's JSON, /auth/token's form, a manifest), with
``problem`` and ``find_in``. Text stored before this was refused is written out with ``printable``.
"""
from __future__ import annotations

from typing import Any, Callable

from django.http import HttpRequest, HttpResponseBase

NUL = "\x00"
MAX_DEPTH_SHOWN = 3


def problem(value: str, nul: bool = True) -> str | None:
    """Why ``value`` cannot be stored, or None; ``nul`` False lets a NUL pass (text kept as bytes,
    never in a column: a manifest's body)."""
    if nul and NUL in value:
        return "holds a NUL character"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid Unicode text (a lone surrogate)"
    return None


def find_in(data: Any, where: str = "", nul: bool = True) -> tuple[str, str] | None:
    """The first string in a decoded JSON document (keys included) that ``problem`` refuses, as
    (where it is, why), or None. ``where`` is a dotted path from the top: ``annotations.a``."""
    if isinstance(data, str):
        why = problem(data, nul)
        return (where or "the document", why) if why else None
    if isinstance(data, dict):
        for key, item in data.items():
            found = (find_in(key, f"{where} (a key)".lstrip(), nul)
                     or find_in(item, f"{where}.{key}".lstrip("."), nul))
            if found:
                return found
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found = find_in(item, f"{where}[{index}]", nul)
            if found:
                return found
    return None


def printable(value: str) -> str:
    """``value`` as any UTF-8 output takes it: a lone surrogate written out as ``\\ud800``."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def printable_json(data: Any) -> Any:
    """A decoded JSON document with every string ``printable``."""
    if isinstance(data, str):
        return printable(data)
    if isinstance(data, dict):
        return {printable_json(k): printable_json(v) for k, v in data.items()}
    if isinstance(data, list):
        return [printable_json(item) for item in data]
    return data


def request_problem(request: HttpRequest) -> str | None:
    """Where the request line or a header holds a NUL; None when neither does. (WSGI gives both as
    text decoded from bytes, so they hold no surrogate; the query string is still percent-encoded.)"""
    meta = request.META
    if NUL in request.path_info:
        return "the path holds a NUL character"
    query = meta.get("QUERY_STRING", "")
    if "%00" in query or NUL in query:
        return "the query string holds a NUL character (%00)"
    for key, value in meta.items():
        if key.startswith("HTTP_") and isinstance(value, str) and NUL in value:
            return f"the {key[5:].replace('_', '-').title()} header holds a NUL character"
    return None


class TextMiddleware:
    """Refuses, with a 400 before any view runs, a request whose path, query string or headers hold
    a NUL: whatever route parses them, a new one included. The body carries both the OCI envelope
    and the token API's ``error``, so every client shows the reason."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        refused = request_problem(request)
        if refused is None:
            return self.get_response(request)
        from registry import errors

        response = errors.error_response(errors.TEXT_INVALID, refused, extra={"error": refused})
        if request.path_info.startswith("/v2"):
            response["Docker-Distribution-API-Version"] = "registry/2.0"
        return response
