"""/auth/token: the token endpoint of Docker's token flow (the realm of the Bearer challenge).

GET takes Basic credentials (an htpasswd user, a robot account, or ``token`` and an API token) or
``Bearer <API token>``, or none where the ``[[access]]`` rules let anonymous callers read, with
``service``, ``scope`` (repeatable) and ``offline_token=true`` for a refresh token, as docker,
podman, skopeo and oras ask. POST takes the OAuth2 form docker uses once it holds a refresh token
(docker/distribution docs/spec/auth/oauth.md): ``grant_type=password`` with ``username`` and
``password``, or ``grant_type=refresh_token`` with ``refresh_token``, and ``scope`` separated by
spaces. Either answers a short-lived signed token granting the requested scopes as far as the
access decision allows the caller (tokens/bearer.py, tokens/authz.py).

The view checks the credentials it is given itself (the middleware leaves it alone: tokens.access).
Its password checks are throttled by client address like every other (tokens.login), and each check
is recorded on the request for the auth metrics.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from audit import log as audit
from registry import errors
from regsite import text
from tokens import authz, bearer, services
from tokens.access import checks_own_credentials
from tokens.login import MalformedBasic, basic_credentials, password_login
from tokens.principal import ROBOT_PREFIX, AuthAttempt, AuthenticatedHttpRequest, Mechanism, Outcome
from tokens.throttle import Throttled

MAX_FORM_BYTES = 64 * 1024
FORM_TYPE = "application/x-www-form-urlencoded"
INVALID_REQUEST = errors.ErrorCode("UNSUPPORTED", "invalid token request", 400)
BASIC_CHALLENGE = f'Basic realm="{bearer.SERVICE}"'  # the endpoint itself takes Basic credentials


class Refused(Exception):
    """The credentials do not check out: a 401."""


class BadRequest(Exception):
    """The request itself is wrong (a malformed scope, an unknown grant type): a 400."""


def _error(request: HttpRequest, status: int, message: str, **headers: str) -> HttpResponse:
    code = {401: errors.UNAUTHORIZED, 429: errors.TOOMANYREQUESTS}.get(status, INVALID_REQUEST)
    # The seed's 401 body (an error text) and the OCI envelope, whose message docker prints.
    response = errors.error_response(code, message, status=status, extra={"error": message})
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    response["Cache-Control"] = "no-store"
    return response


def _refused(request: AuthenticatedHttpRequest, mechanism: Mechanism, reason: str) -> Refused:
    request.auth_attempt = AuthAttempt(mechanism, Outcome.FAILURE)
    return Refused(reason)


def _password_identity(request: AuthenticatedHttpRequest, username: str, password: str,
                       mechanism: Mechanism) -> bearer.Identity:
    """A username and password: an htpasswd user's, throttled by client address (raises
    Throttled), a robot account's, or the username ``token`` and an API token."""
    if username == services.TOKEN_USERNAME:
        return _api_token_identity(request, password, Mechanism.BASIC_TOKEN)
    if username.startswith(ROBOT_PREFIX):
        audit.claim(request, username, audit.Kind.ROBOT)
        identity = bearer.robot_identity(username, password)
        if identity is None:
            raise _refused(request, Mechanism.ROBOT, "unknown, disabled or expired robot account, or a wrong secret")
        request.auth_attempt = AuthAttempt(Mechanism.ROBOT, Outcome.SUCCESS)
        return identity
    if not password_login(request, username, password, mechanism):
        raise Refused("invalid username or password")
    try:
        return bearer.user_identity(username, mechanism)
    except bearer.InvalidToken as exc:
        raise _refused(request, mechanism, str(exc)) from None


def _api_token_identity(request: AuthenticatedHttpRequest, token: str, mechanism: Mechanism) -> bearer.Identity:
    identity = bearer.token_identity(token, mechanism)
    if identity is None:
        audit.claim(request, "", audit.Kind.TOKEN, services.claimed_prefix(token))
        raise _refused(request, mechanism, "unknown, expired or revoked token")
    request.auth_attempt = AuthAttempt(mechanism, Outcome.SUCCESS)
    return identity


def _header_identity(request: AuthenticatedHttpRequest) -> bearer.Identity:
    scheme, _, value = request.META.get("HTTP_AUTHORIZATION", "").strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "basic":
        try:
            username, password = basic_credentials(value)
        except MalformedBasic as exc:
            raise _refused(request, Mechanism.BASIC_USER, str(exc)) from None
        if not username and not password:  # what skopeo and containerd send when they have none
            return _anonymous_identity()
        return _password_identity(request, username, password, Mechanism.BASIC_USER)
    if scheme.lower() == "bearer" and not bearer.looks_signed(value):
        return _api_token_identity(request, value, Mechanism.BEARER_TOKEN)
    if scheme.lower() == "bearer":
        # A signed token must not buy the next one for ever: that is what refresh tokens are for.
        raise _refused(request, Mechanism.SIGNED_TOKEN,
                       "a signed token cannot be exchanged here; send credentials or a refresh token")
    raise _refused(request, Mechanism.OTHER,
                   "send Basic credentials (a user, or the username token and an API token)")


def _anonymous_identity() -> bearer.Identity:
    """No credentials: a token for what anonymous callers may read, where some rule lets them."""
    if settings.AUTH_ENABLED and not authz.rules().anonymous_anywhere:
        raise Refused("")
    return bearer.anonymous_identity()


def _signed_in(request: AuthenticatedHttpRequest, identity: bearer.Identity) -> None:
    """Who the audit log names for this sign-in (the middleware leaves this view's principal anonymous)."""
    principal = identity.principal
    if principal.is_authenticated:
        audit.claim(request, principal.name, audit.Kind(principal.kind.value), principal.hash_prefix or "")


def _form(request: HttpRequest) -> dict[str, list[str]]:
    if request.content_type != FORM_TYPE:
        raise BadRequest(f"the POST body must be {FORM_TYPE}")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise BadRequest("invalid Content-Length") from None
    try:
        raw = request.read(MAX_FORM_BYTES + 1) if declared <= MAX_FORM_BYTES else b"x" * (MAX_FORM_BYTES + 1)
    except OSError:  # the client went away or was cut off (regsite.client_timeouts)
        raise BadRequest("the POST body was not received whole") from None
    if len(raw) > MAX_FORM_BYTES:
        raise BadRequest(f"the POST body must be at most {MAX_FORM_BYTES} bytes")
    try:
        form = parse_qs(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=200)
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("the POST body is not a form") from None
    for key, values in form.items():
        why = next(filter(None, map(text.problem, [key, *values])), None)
        if why:
            raise BadRequest(f"the form's {text.printable(key)[:40]!r} field {why}")
    return form


def _one(form: dict[str, list[str]], field: str) -> str:
    return form.get(field, [""])[-1]


def _check_service(service: str) -> None:
    if service and service != bearer.SERVICE:
        raise BadRequest(f"unknown service {service[:100]!r}; this registry is {bearer.SERVICE!r}")


def _get(request: AuthenticatedHttpRequest) -> dict[str, Any]:
    _check_service(request.GET.get("service", ""))
    scopes = bearer.parse_scopes(request.GET.getlist("scope"))
    if not settings.AUTH_ENABLED or not request.META.get("HTTP_AUTHORIZATION"):
        identity = _anonymous_identity()
    else:
        identity = _header_identity(request)
    _signed_in(request, identity)
    issued = bearer.issue_access(identity, bearer.grant(identity.principal, scopes))
    body = _token_body(issued)
    if request.GET.get("offline_token", "").lower() == "true":
        body["refresh_token"] = bearer.issue_refresh(identity)
    return body


def _post(request: AuthenticatedHttpRequest) -> dict[str, Any]:
    form = _form(request)
    _check_service(_one(form, "service"))
    scopes = bearer.parse_scopes(form.get("scope", []))
    grant_type = _one(form, "grant_type")
    if grant_type == "password":
        identity = (bearer.anonymous_identity() if not settings.AUTH_ENABLED
                    else _password_identity(request, _one(form, "username"), _one(form, "password"),
                                            Mechanism.PASSWORD))
    elif grant_type == "refresh_token":
        try:
            identity = bearer.verify_refresh(_one(form, "refresh_token"))
        except bearer.InvalidToken as exc:
            raise _refused(request, Mechanism.SIGNED_TOKEN, f"refresh token refused: {exc}") from None
        request.auth_attempt = AuthAttempt(Mechanism.SIGNED_TOKEN, Outcome.SUCCESS)
    else:
        raise BadRequest(f"grant_type must be password or refresh_token, got {grant_type[:40]!r}")
    _signed_in(request, identity)
    issued = bearer.issue_access(identity, bearer.grant(identity.principal, scopes))
    body = _token_body(issued)
    body["scope"] = " ".join(str(scope) for scope in issued.scopes)
    if grant_type == "password" and _one(form, "access_type") == "offline":
        body["refresh_token"] = bearer.issue_refresh(identity)
    return body


def _token_body(issued: bearer.Issued) -> dict[str, Any]:
    # Both names: docker reads token, OAuth2 clients access_token (the spec allows either).
    return {"token": issued.token, "access_token": issued.token, "expires_in": issued.expires_in,
            "issued_at": issued.issued_at.isoformat(timespec="seconds").replace("+00:00", "Z")}


@checks_own_credentials
@csrf_exempt
def token(request: AuthenticatedHttpRequest) -> HttpResponse:
    if request.method not in ("GET", "POST"):
        return _error(request, 405, f"method {request.method} is not allowed; use GET or POST",
                      Allow="GET, POST")
    try:
        body = _get(request) if request.method == "GET" else _post(request)
    except Refused as exc:
        message = "authentication required" + (f": {exc}" if str(exc) else "")
        return _error(request, 401, message, WWW_Authenticate=BASIC_CHALLENGE)
    except Throttled as exc:
        return _error(request, 429, str(exc), Retry_After=str(exc.retry_after))
    except (BadRequest, bearer.InvalidScope) as exc:
        return _error(request, 400, str(exc))
    response = JsonResponse(body)
    response["Cache-Control"] = "no-store"  # RFC 6749 5.1: token responses are never cached
    response["Pragma"] = "no-cache"
    return response
