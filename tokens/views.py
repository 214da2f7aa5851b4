"""Token and robot endpoints: JSON bodies carrying the username and password of an htpasswd user."""
from __future__ import annotations

import functools
import json
from typing import Any, Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from registry.http import BadHeader, has_body, request_body
from regsite import text
from tokens import services
from tokens.access import DEFAULT_ROLE, public
from tokens.login import password_login
from tokens.principal import AuthenticatedHttpRequest
from tokens.robots import RobotExists, RobotNotFound
from tokens.services import InvalidTokenRequest, NotAllowed, TokenNotFound, TooManyTokens
from tokens.throttle import Throttled

MAX_BODY_BYTES = 64 * 1024
TokenView = Callable[[AuthenticatedHttpRequest, dict[str, Any], str], HttpResponse]


class BodyTooLarge(Exception):
    pass


def error(status: int, message: str, field: str | None = None, **headers: str) -> JsonResponse:
    body: dict[str, Any] = {"error": message}
    if field:
        body["field"] = field
    response = JsonResponse(body, status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


class NotJson(Exception):
    pass


def _read_at_most(stream: Any, limit: int) -> bytes:
    data = bytearray()
    while len(data) < limit:
        piece = stream.read(limit - len(data))
        if not piece:
            break
        data += piece
    return bytes(data)


def _read_json(request: HttpRequest) -> dict[str, Any]:
    try:
        # A chunked body (no Content-Length) is read from the server's de-chunked input.
        body = request_body(request)
    except BadHeader:
        raise InvalidTokenRequest("body", "body: invalid Content-Length") from None
    # Only JSON: a web page can make a browser POST text/plain or a form anywhere without asking
    # (no CORS preflight), but not application/json. (No body at all is the 400 below.)
    if has_body(body) and request.content_type != "application/json":
        raise NotJson()
    if body.length is not None and body.length > MAX_BODY_BYTES:
        raise BodyTooLarge()
    try:
        raw = _read_at_most(body.stream, MAX_BODY_BYTES + 1)
    except OSError:  # the client went away, stalled past [server] client_timeout, or broke a chunk
        raise InvalidTokenRequest("body", "body: the client stopped sending it") from None
    if len(raw) > MAX_BODY_BYTES:
        raise BodyTooLarge()
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        # ValueError also covers integers over Python's 4300-digit limit; RecursionError, deep nesting.
        raise InvalidTokenRequest("body", "body: the request body must be JSON") from None
    if not isinstance(data, dict):
        raise InvalidTokenRequest("body", "body: the request body must be a JSON object")
    for key, value in data.items():
        found = text.find_in({key: value})
        if found:
            raise InvalidTokenRequest("body" if text.problem(key) else key, f"{found[0]} {found[1]}")
    return data


def string_field(body: dict[str, Any], field: str) -> str:
    if field not in body:
        raise InvalidTokenRequest(field, f"{field} is required")
    if not isinstance(body[field], str):
        raise InvalidTokenRequest(field, f"{field} must be a string")
    return body[field]  # its text was checked with the whole body's (_read_json)


def token_api(view: TokenView) -> Callable[[AuthenticatedHttpRequest], HttpResponse]:
    """Public (the credentials travel in the body); POST only; parses the body, verifies its
    username and password, maps service errors."""

    @public
    @csrf_exempt
    @functools.wraps(view)
    def wrapper(request: AuthenticatedHttpRequest) -> HttpResponse:
        if request.method != "POST":
            return error(405, f"method {request.method} is not allowed; use POST", Allow="POST")
        try:
            body = _read_json(request)
            username = string_field(body, "username")
            password = string_field(body, "password")
            if not password_login(request, username, password):
                return error(401, "invalid username or password")
            return view(request, body, username)
        except NotJson:
            return error(415, "the request body must be JSON, sent with Content-Type: application/json",
                         "body")
        except BodyTooLarge:
            return error(413, f"body: the request body must be at most {MAX_BODY_BYTES} bytes", "body")
        except TooManyTokens as exc:
            return error(400, exc.message)
        except InvalidTokenRequest as exc:
            return error(400, exc.message, exc.field)
        except TokenNotFound as exc:
            return error(404, str(exc), "hash_prefix")
        except RobotNotFound as exc:
            return error(404, exc.message, "name")
        except RobotExists as exc:
            return error(409, exc.message, "name")
        except NotAllowed as exc:
            return error(403, exc.message)
        except Throttled as exc:
            return error(429, str(exc), Retry_After=str(exc.retry_after))

    return wrapper


@token_api
def create_token(request: AuthenticatedHttpRequest, body: dict[str, Any], username: str) -> HttpResponse:
    created = services.create_token(
        username,
        role=body.get("role", DEFAULT_ROLE),
        ttl_days=body.get("ttl_days", services.DEFAULT_TTL_DAYS),
        description=body.get("description", ""),
        repositories=body.get("repositories"),
    )
    return JsonResponse(created.as_dict(), status=201)


@token_api
def list_tokens(request: AuthenticatedHttpRequest, body: dict[str, Any], username: str) -> HttpResponse:
    return JsonResponse({"tokens": [record.as_dict() for record in services.tokens_of_user(username)]})


@token_api
def revoke_token(request: AuthenticatedHttpRequest, body: dict[str, Any], username: str) -> HttpResponse:
    hash_prefix = string_field(body, "hash_prefix")
    services.revoke_token(username, hash_prefix)
    return JsonResponse({"revoked": hash_prefix.lower()})
