"""Authentication for every request: sets ``request.principal`` and enforces access on the registry API.

With auth off every request is an anonymous admin. With auth on, a view marked ``public``
(tokens.access) is served to anyone and never looks at credentials; one marked ``login_optional``
(the /v2/ version check) is open but checks credentials that are sent; every other path needs Basic
credentials of an htpasswd user, of a robot account (``robot$name`` and its secret), Basic with the
username ``token`` and an API token as the password, ``Bearer <token>``, or ``Bearer`` with a signed
token from /auth/token (tokens/bearer.py), limited to its scope; or none, where the ``[[access]]``
rules let anonymous callers read. What the caller may do on the repository is the access decision's
(tokens.authz): a write it refuses is 403 DENIED naming the governing rule and the caller's role; a
read it refuses is answered as if the repository did not exist (registry.visibility).
"""
from __future__ import annotations

from typing import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import ResolverMatch

from audit import log as audit
from registry import errors, visibility
from registry.proxy.routing import MIRROR_PATH_PREFIX
from tokens import authz, bearer, robots, services
from tokens.access import Access, Action, access_of, action_for
from tokens.login import MalformedBasic, basic_credentials, password_login
from tokens.principal import (
    ANONYMOUS,
    OPEN,
    ROBOT_PREFIX,
    AuthAttempt,
    AuthenticatedHttpRequest,
    Mechanism,
    Outcome,
    Principal,
    user,
)
from tokens.throttle import Throttled

REALM = "svc-registry"
# An attempt is immutable: the successful one of each mechanism is made once, not per request.
_SUCCEEDED = {mechanism: AuthAttempt(mechanism, Outcome.SUCCESS) for mechanism in Mechanism}
CHALLENGE = f'Basic realm="{REALM}"'
MAX_HEADER_CHARS = bearer.MAX_AUTHORIZATION_CHARS


class BadCredentials(Exception):
    def __init__(self, mechanism: Mechanism, reason: str) -> None:
        super().__init__(reason)
        self.mechanism = mechanism


def _token_principal(request: AuthenticatedHttpRequest, token: str, mechanism: Mechanism) -> Principal:
    record = services.authenticate_token(token)
    if record is None:
        audit.claim(request, "", audit.Kind.TOKEN, services.claimed_prefix(token))
        raise BadCredentials(mechanism, "unknown, expired or revoked token")
    return services.token_principal(record, mechanism)


def _robot_principal(request: AuthenticatedHttpRequest, name: str, secret: str) -> Principal:
    audit.claim(request, name, audit.Kind.ROBOT)
    robot = robots.authenticate(name, secret)
    if robot is None:
        raise BadCredentials(Mechanism.ROBOT, "unknown, disabled or expired robot account, or a wrong secret")
    return robots.principal(robot, Mechanism.ROBOT)


def authenticate(request: AuthenticatedHttpRequest) -> Principal:
    """The caller named by the Authorization header: ANONYMOUS without one.

    Raises BadCredentials for credentials that do not check out and Throttled while the client
    address must wait after repeated failed passwords.
    """
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header:
        return ANONYMOUS
    scheme, _, value = header.strip().partition(" ")
    scheme = scheme.lower()
    if scheme not in ("basic", "bearer"):
        raise BadCredentials(Mechanism.OTHER, f"unsupported authorization scheme {scheme[:20]!r}")
    if len(header) > MAX_HEADER_CHARS:
        raise BadCredentials(Mechanism.OTHER, "Authorization header too long")
    if scheme == "bearer":
        value = value.strip()
        if bearer.looks_signed(value):
            try:
                return bearer.verify_access(value)
            except bearer.InvalidToken as exc:
                raise BadCredentials(Mechanism.SIGNED_TOKEN, str(exc)) from None
        return _token_principal(request, value, Mechanism.BEARER_TOKEN)
    try:
        username, password = basic_credentials(value)
    except MalformedBasic as exc:
        raise BadCredentials(Mechanism.BASIC_USER, str(exc)) from None
    if not username and not password:
        # What skopeo and containerd send after a challenge when they have no credentials.
        return ANONYMOUS
    if username == services.TOKEN_USERNAME:
        return _token_principal(request, password, Mechanism.BASIC_TOKEN)
    if username.startswith(ROBOT_PREFIX):
        return _robot_principal(request, username, password)
    if not password_login(request, username, password, Mechanism.BASIC_USER):
        raise BadCredentials(Mechanism.BASIC_USER, "invalid username or password")
    return user(username)


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


def forbidden(request: HttpRequest, decision: authz.Decision) -> HttpResponse:
    return _registry_error(request, errors.DENIED, decision.message)


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
    """Authentication runs once the path is resolved (process_view), so it reads the view's mark
    without resolving the path a second time; a path that no view serves is checked after Django
    has answered it, so that only a caller who may see the registry learns it is a 404."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: AuthenticatedHttpRequest) -> HttpResponse:
        request.auth_attempt = None
        request.principal = ANONYMOUS if settings.AUTH_ENABLED else OPEN
        request.refusal = request.hidden = None
        try:
            response = self.get_response(request)
        finally:
            if request.hidden is not None:
                visibility.unhide(request.hidden)
        if not settings.AUTH_ENABLED:
            return response
        match = request.resolver_match
        if match is None:
            # Whatever reaches Django under /static/ is an asset whitenoise does not have: a 404.
            if request.path_info.startswith(settings.STATIC_URL):
                return response
            return self._check(request, Access.REQUIRED, None) or response
        if access_of(match.func) is Access.OPTIONAL and not request.principal.is_authenticated:
            # The version check stays open, but it advertises the challenge: clients send
            # credentials on later requests only when the ping asked for them.
            response["WWW-Authenticate"] = challenge(request)
        return response

    def process_view(self, request: AuthenticatedHttpRequest, view_func: Callable[..., HttpResponse],
                     view_args: tuple[object, ...], view_kwargs: dict[str, object]) -> HttpResponse | None:
        if not settings.AUTH_ENABLED:
            return None
        return self._check(request, access_of(view_func), request.resolver_match)

    def _check(self, request: AuthenticatedHttpRequest, access: Access,
               match: ResolverMatch | None) -> HttpResponse | None:
        """None when the request may go on to its view; otherwise the refusal."""
        if access is Access.PUBLIC:
            return None
        route = match.url_name if match is not None else None
        try:
            request.principal = principal = authenticate(request)
        except BadCredentials as exc:
            request.auth_attempt = AuthAttempt(exc.mechanism, Outcome.FAILURE)
            # RFC 6750 3.1: a Bearer token refused (expired, revoked, not ours) says so, so that a
            # client drops it and asks the realm for a new one rather than retrying it.
            bad_bearer = exc.mechanism in (Mechanism.BEARER_TOKEN, Mechanism.SIGNED_TOKEN)
            return unauthorized(request, str(exc), error="invalid_token" if bad_bearer else None)
        except Throttled as exc:
            return throttled(request, exc.retry_after)
        if principal.is_authenticated and request.auth_attempt is None:
            request.auth_attempt = _SUCCEEDED[principal.mechanism]
        if access is Access.OPTIONAL:
            return unauthorized(request) if not principal.is_authenticated and _is_docker_engine(request) else None
        action = action_for(route, request.method)
        name = match.kwargs.get("name") if match is not None else None
        decision = authz.decide(principal, name, action)
        hide = not decision.allowed and action is Action.PULL and name is not None
        if not decision.allowed and not principal.is_authenticated:
            return unauthorized(request)
        if not decision.allowed:
            request.refusal = decision
            if not hide:
                return forbidden(request, decision)
            # The view runs as for a repository that does not exist: the same status, code and
            # message, whatever the route (registry.visibility), and whatever a signed token's
            # scope (the token endpoint grants nothing there, as for a repository that does not
            # exist in a namespace one may not read; "absent" needs no scope).
            assert name is not None
            request.hidden = visibility.hide(name)
            return None
        # A signed token allows only what it was issued for: a 401 names the scope to ask for. Other
        # credentials have no scope, and their requests need not parse the query string.
        if isinstance(principal, bearer.ScopedPrincipal):
            missing = bearer.missing_scopes(principal, route, match.kwargs if match is not None else {}, action,
                                            request.GET, request.META.get(MIRROR_PATH_PREFIX, ""))
            if missing:
                return unauthorized(request, "the token's scope does not cover this request",
                                    scopes=missing, error="insufficient_scope")
        return None
