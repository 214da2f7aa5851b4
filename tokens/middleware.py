"""Authentication for every request: sets ``request.principal`` and enforces roles on the registry API.

With auth off every request is an anonymous admin. With auth on, the public paths (seed 5.4) are
served to anyone and every other path needs Basic credentials of an htpasswd user (full access),
Basic with the username ``token`` and an API token as the password, ``Bearer <token>``, or
``Bearer`` with a signed token from /auth/token (tokens/bearer.py), limited to its scope.
"""
from __future__ import annotations

import base64
import binascii
from typing import Any, Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from registry import errors
from registry.access import Action, action_for
from tokens import bearer, services
from tokens.principal import ANONYMOUS, OPEN, REQUIRED_ROLE, AuthenticatedHttpRequest, Principal, role_allows
from tokens.throttle import Throttled, verify_password

REALM = "svc-registry"
CHALLENGE = f'Basic realm="{REALM}"'
PING_PATHS = frozenset({"/v2/", "/v2"})
# The token endpoints check the credentials they are given themselves.
TOKEN_API_PATHS = frozenset({"/api/tokens", "/api/tokens/list", "/api/tokens/revoke", bearer.TOKEN_PATH})
# "/" only redirects to /ui/: a browser must not meet a Basic challenge (and its login dialog) there.
PUBLIC_PATHS = frozenset({"/", "/health", "/ready", "/metrics"}) | PING_PATHS | TOKEN_API_PATHS
PUBLIC_TREES = ("/ui", "/api-docs", "/static")
_PUBLIC_TREE_PREFIXES = tuple(tree + "/" for tree in PUBLIC_TREES)
MAX_HEADER_CHARS = 8192


class BadCredentials(Exception):
    pass


def is_public(path: str) -> bool:
    # Called twice per request: one tuple startswith instead of a generator over the trees.
    return path in PUBLIC_PATHS or path in PUBLIC_TREES or path.startswith(_PUBLIC_TREE_PREFIXES)


def _client_address(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR") or "unknown"


def _basic(value: str) -> tuple[str, str]:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise BadCredentials("malformed Basic credentials") from None
    username, sep, password = decoded.partition(":")
    if not sep:
        raise BadCredentials("malformed Basic credentials")
    return username, password


def _token_principal(token: str) -> Principal:
    record = services.authenticate_token(token)
    if record is None:
        raise BadCredentials("unknown, expired or revoked token")
    return Principal(name=record.owner, kind="token", role=record.role, hash_prefix=record.hash_prefix)


def authenticate(request: HttpRequest) -> Principal:
    """The caller named by the Authorization header: ANONYMOUS without one.

    Raises BadCredentials for credentials that do not check out and Throttled while a user is
    locked out after repeated failed passwords.
    """
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header:
        return ANONYMOUS
    if len(header) > MAX_HEADER_CHARS:
        raise BadCredentials("Authorization header too long")
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() == "bearer" and bearer.looks_signed(value.strip()):
        try:
            return bearer.verify_access(value.strip())
        except bearer.InvalidToken as exc:
            raise BadCredentials(str(exc)) from None
    if scheme.lower() == "bearer":
        return _token_principal(value.strip())
    if scheme.lower() != "basic":
        raise BadCredentials(f"unsupported authorization scheme {scheme[:20]!r}")
    username, password = _basic(value)
    if username == services.TOKEN_USERNAME:
        return _token_principal(password)
    if not verify_password(username, password, _client_address(request)):
        raise BadCredentials("invalid username or password")
    return Principal(name=username, kind="user", role="admin")


def _registry_error(request: HttpRequest, code: errors.ErrorCode, message: str,
                    extra: dict[str, str] | None = None, **headers: str) -> HttpResponse:
    # Clients show the envelope's message (podman, docker, skopeo, oras), so the reason goes there.
    response = errors.error_response(code, message, extra=extra)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    if request.path_info.startswith("/v2"):
        response["Docker-Distribution-API-Version"] = "registry/2.0"
    if request.method == "HEAD":
        response["Content-Length"] = str(len(response.content))
        response.content = b""
    return response


def challenge(request: HttpRequest, scopes: list[bearer.Scope] | None = None, error: str | None = None) -> str:
    """The configured challenge: Basic, or Bearer naming the token endpoint and the needed scope."""
    if settings.AUTH_CHALLENGE == "bearer":
        return bearer.challenge(request, scopes, error)
    return CHALLENGE


def unauthorized(request: HttpRequest, reason: str | None = None, scopes: list[bearer.Scope] | None = None,
                 error: str | None = None) -> HttpResponse:
    message = "authentication required" + (f": {reason}" if reason else "")
    # The seed's 401 body: an ``error`` text saying that authentication is required.
    return _registry_error(request, errors.UNAUTHORIZED, message, extra={"error": message},
                           WWW_Authenticate=challenge(request, scopes, error))


def forbidden(request: HttpRequest, principal: Principal, action: Action) -> HttpResponse:
    who = f"token {principal.hash_prefix}" if principal.kind == "token" else principal.name
    return _registry_error(request, errors.DENIED,
                           f"{who} has role {principal.role}; {action.value} needs {REQUIRED_ROLE[action]}")


def throttled(request: HttpRequest, retry_after: int) -> HttpResponse:
    return _registry_error(request, errors.TOOMANYREQUESTS,
                           f"too many failed logins; retry after {retry_after} seconds",
                           Retry_After=str(retry_after))


def _is_docker_engine(request: HttpRequest) -> bool:
    # The docker engine reads challenges only from a 401 (distribution's ResponseChallenges), so
    # an open 200 ping would leave it sending every later request anonymously. skopeo, podman and
    # containerd read the challenge on the 200 (or on any later 401) and need no exception.
    return request.headers.get("User-Agent", "").startswith("docker/")


class AuthenticationMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: AuthenticatedHttpRequest) -> HttpResponse:
        if not settings.AUTH_ENABLED:
            request.principal = OPEN
            return self.get_response(request)
        request.principal = ANONYMOUS
        path = request.path_info
        if is_public(path) and path not in PING_PATHS:
            request.principal = self._optional_principal(request)
            return self.get_response(request)
        try:
            request.principal = authenticate(request)
        except BadCredentials as exc:
            return unauthorized(request, str(exc))
        except Throttled as exc:
            return throttled(request, exc.retry_after)
        if request.principal.is_authenticated:
            return self.get_response(request)
        if path not in PING_PATHS or _is_docker_engine(request):
            return unauthorized(request)
        # The version check stays open, but it advertises the challenge: clients send
        # credentials on later requests only when the ping asked for them.
        response = self.get_response(request)
        response["WWW-Authenticate"] = challenge(request)
        return response

    @staticmethod
    def _optional_principal(request: HttpRequest) -> Principal:
        # Public pages may show who is calling, but bad credentials never block them; the token
        # endpoints take their credentials from the body and ignore the header.
        if request.path_info in TOKEN_API_PATHS:
            return ANONYMOUS
        try:
            return authenticate(request)
        except (BadCredentials, Throttled):
            return ANONYMOUS

    def process_view(self, request: AuthenticatedHttpRequest, view_func: Callable[..., Any],
                     view_args: tuple[Any, ...], view_kwargs: dict[str, Any]) -> HttpResponse | None:
        if not settings.AUTH_ENABLED or is_public(request.path_info):
            return None
        url_name = request.resolver_match.url_name if request.resolver_match else None
        action = action_for(url_name, request.method)
        if not role_allows(request.principal.role, action):
            return forbidden(request, request.principal, action)
        # A signed token allows only what it was issued for: a 401 names the scope to ask for.
        missing = bearer.missing_scopes(request.principal, url_name, view_kwargs, action, request.GET)
        if missing:
            return unauthorized(request, "the token's scope does not cover this request",
                                scopes=missing, error="insufficient_scope")
        return None
