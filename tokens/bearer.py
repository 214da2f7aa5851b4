"""Docker's token flow: the Bearer challenge, scopes, and the short-lived signed tokens of /auth/token.

With ``[auth] challenge = "bearer"`` a 401 names a realm (this service's token endpoint), the
service and the scope the request needs; the client gets a token for that scope from the realm with
its credentials and sends it as ``Authorization: Bearer``. The tokens are JWTs (HS256) whose
``access`` claim lists what was granted: the requested repositories and actions, cut down to what
the access decision (tokens.authz) allows the caller there; it is decided again at every use, so a
claim never outlasts the right it came from. Refresh tokens (docker's ``identitytoken``) are JWTs with their own
audience, so neither kind passes for the other.

The signing key is derived from the server's SECRET_KEY, which every replica already shares
([server] secret_key_file or SVC_SECRET_KEY). Each token names the credential it came from, checked
again on every use: revoking the API token, removing the user or changing their password refuses
its signed tokens and refresh tokens at their next request, as it refuses the credential itself.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Iterable, Mapping

from django.conf import settings
from django.http import HttpRequest
from django.utils.crypto import salted_hmac

from registry import routes
from registry.proxy import mirrors
from regsite.forwarded import public_base
from tokens import authz, external, htpasswd, robots, services
from tokens.access import Action, action_for
from tokens.principal import ANONYMOUS, OPEN, Mechanism, Principal, user

log = logging.getLogger(__name__)

SERVICE = "svc-registry"
TOKEN_PATH = "/auth/token"
ALGORITHM = "HS256"
ACCESS_AUDIENCE = SERVICE
REFRESH_AUDIENCE = SERVICE + ":refresh"
LEEWAY_SECONDS = 30  # clocks of replicas may differ a little
MAX_SCOPES = 64
MAX_SCOPE_NAME = 255  # a repository name's longest (registry.names)
# The longest Authorization header the registry reads (tokens.middleware): a token must fit in one.
MAX_AUTHORIZATION_CHARS = 8192
MAX_TOKEN_CHARS = MAX_AUTHORIZATION_CHARS - len("Bearer ")
CATALOG = ("registry", "catalog")
EXTERNAL = "external"  # the claims' kind of a user of an outside identity source (LDAP)
HEADER_SAFE = re.compile(r"[!#-~]{1,255}")  # printable ASCII without space and double quote


class InvalidToken(Exception):
    """A signed token that is malformed, forged, expired, or whose credential is gone."""


class InvalidScope(ValueError):
    pass


@dataclass(frozen=True)
class Scope:
    type: str
    name: str
    actions: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.type}:{self.name}:{','.join(self.actions)}"

    @classmethod
    def parse(cls, text: str) -> Scope:
        """``type:name:action[,action]``; the name may hold a colon (a host's port), so the actions
        are after the last one."""
        kind, sep, rest = text.partition(":")
        name, sep2, actions = rest.rpartition(":")
        parsed = tuple(action for action in actions.split(",") if action)
        if not (sep and sep2 and kind and name and parsed):
            raise InvalidScope(f"scope {text[:200]!r} is not type:name:actions")
        if len(name) > MAX_SCOPE_NAME:
            raise InvalidScope(f"scope {text[:60]!r}...: a name is at most {MAX_SCOPE_NAME} characters")
        return cls(kind, name, parsed)


@dataclass(frozen=True)
class ScopedPrincipal(Principal):
    """The caller behind a signed token (Mechanism.SIGNED_TOKEN): the user or API token it was
    issued for, that credential's role, and what the token grants ((type, name, action))."""

    access: frozenset[tuple[str, str, str]] = frozenset()

    def grants(self, scope: Scope) -> bool:
        return all((scope.type, scope.name, action) in self.access for action in scope.actions)

    def may(self, action: Action, repository: str | None = None) -> bool:
        # A request's own repository is checked by the middleware (missing_scopes, which names the
        # scope to ask for); one the request reaches beyond it (a mount's source) is checked here.
        return super().may(action, repository) and (
            repository is None or ("repository", repository, action.value) in self.access)


@dataclass(frozen=True)
class Identity:
    """Who asked for a token, and the claims that tie the token to that credential."""

    principal: Principal
    binding: dict[str, Any]  # claims: strings, and an external user's list of groups
    not_after: datetime | None = None  # an API token's own expiry: no refresh token outlives it

    @property
    def refreshable(self) -> bool:
        """An LDAP user gets no refresh token: a refresh would keep their access without the
        directory being asked again (docker then keeps the password and logs in with it)."""
        return self.binding.get("kind") != EXTERNAL


def parse_scopes(values: Iterable[str]) -> list[Scope]:
    """Scopes from repeated ``scope`` parameters, each possibly several separated by spaces."""
    texts = [text for value in values for text in value.split(" ") if text]
    if len(texts) > MAX_SCOPES:
        raise InvalidScope(f"at most {MAX_SCOPES} scopes per request")
    return [Scope.parse(text) for text in texts]


def _allowed(principal: Principal, name: str) -> tuple[str, ...]:
    allowed = authz.actions_on(principal, name)
    if Action.PULL.value not in allowed:
        # Docker Engine, with this registry as a mirror at /<prefix>/, asks for the name it knows
        # (library/alpine) for what is served as <prefix>/library/alpine: the pull it may make there.
        # (Each request is decided again on the name it serves, so this grants nothing else.)
        if any(authz.allows(principal, f"{mirror.prefix}/{name}", Action.PULL) for mirror in mirrors.configured()):
            allowed = (Action.PULL.value, *allowed)
    return allowed


def grant(principal: Principal, requested: Iterable[Scope]) -> list[Scope]:
    """What the caller gets: each requested scope cut down to the actions the access decision
    allows it there."""
    granted: dict[tuple[str, str], list[str]] = {}
    for scope in requested:
        if scope.type == "repository":
            allowed = _allowed(principal, scope.name)
            wanted = allowed if "*" in scope.actions else scope.actions
            actions = [action for action in wanted if action in allowed]
        elif (scope.type, scope.name) == CATALOG and authz.decide(principal, None, Action.PULL).allowed:
            actions = ["*"]  # listing the catalog is a pull: it lists what the caller may read
        else:
            actions = []
        if actions:
            merged = granted.setdefault((scope.type, scope.name), [])
            merged.extend(action for action in actions if action not in merged)
    return [Scope(kind, name, tuple(actions)) for (kind, name), actions in granted.items()]


# -- the credentials a token stands for ---------------------------------------------------------

def _fingerprint(stored_hash: str) -> str:
    # Ties a user's tokens to the password they logged in with, without putting anything derived
    # from the bcrypt hash in the clear: changing the password refuses the tokens.
    return hmac.new(signing_key(), stored_hash.encode(), hashlib.sha256).hexdigest()[:32]


def user_identity(username: str, mechanism: Mechanism = Mechanism.BASIC_USER) -> Identity:
    """An htpasswd user whose password was checked, presented by ``mechanism``."""
    stored = htpasswd.current_file().snapshot().users.get(username)
    if stored is None:  # removed from the file since its password was checked
        raise InvalidToken(f"no user {username!r}")
    return Identity(user(username, mechanism), {"kind": "user", "pwd": _fingerprint(stored)})


def external_identity(principal: Principal) -> Identity:
    """An LDAP user whose password the directory accepted: their access tokens carry the groups it
    gave (each lives ``bearer_ttl_seconds``)."""
    return Identity(principal, {"kind": EXTERNAL, "src": principal.source, "grp": sorted(principal.groups)})


def token_identity(token: str, mechanism: Mechanism = Mechanism.BASIC_TOKEN) -> Identity | None:
    """The identity of an API token (``svc_...``), or None if it is unknown, expired, revoked or
    its owner is gone."""
    record = services.authenticate_token(token)
    if record is None:
        return None
    principal = services.token_principal(record, mechanism)
    return Identity(principal, {"kind": "token", "tok": services.token_digest(token)}, record.expires_at)


def robot_identity(name: str, secret: str) -> Identity | None:
    """A robot account's identity, or None for an unknown, disabled or expired robot or a wrong secret."""
    robot = robots.authenticate(name, secret)
    if robot is None:
        return None
    return Identity(robots.principal(robot, Mechanism.ROBOT), {"kind": "robot", "rob": _fingerprint(robot.digest)},
                    robot.expires_at)


def anonymous_identity() -> Identity:
    """With authentication off everyone may do everything; with it on, an anonymous caller may read
    where the [[access]] rules let anonymous callers read. The token says which."""
    return Identity(OPEN if not settings.AUTH_ENABLED else ANONYMOUS, {"kind": "anonymous"})


def _current_identity(claims: dict[str, Any]) -> Identity:
    kind, subject = claims.get("kind"), str(claims.get("sub", ""))
    if kind == "user":
        stored = htpasswd.current_file().snapshot().users.get(subject)
        if stored is None or not hmac.compare_digest(_fingerprint(stored), str(claims.get("pwd", ""))):
            raise InvalidToken("the user was removed or their password changed since this token was issued")
        return user_identity(subject, Mechanism.SIGNED_TOKEN)
    if kind == EXTERNAL and claims.get("aud") == ACCESS_AUDIENCE:
        if subject in htpasswd.current_file().snapshot().users or external.disabled(subject):
            raise InvalidToken("the user was disabled, or a local account of that name now exists")
        groups = claims.get("grp")
        principal = user(subject, Mechanism.SIGNED_TOKEN, frozenset(map(str, groups)) if isinstance(groups, list)
                         else frozenset(), str(claims.get("src", "")))
        return Identity(principal, {"kind": EXTERNAL, "src": principal.source, "grp": sorted(principal.groups)})
    if kind == "token":
        record = services.live_record(str(claims.get("tok", "")))
        if record is None:
            raise InvalidToken("the API token this token was issued for is revoked or expired")
        principal = services.token_principal(record, Mechanism.SIGNED_TOKEN)
        return Identity(principal, {"kind": "token", "tok": str(claims["tok"])}, record.expires_at)
    if kind == "robot":
        robot = robots.live(subject)
        if robot is None or not hmac.compare_digest(_fingerprint(robot.digest), str(claims.get("rob", ""))):
            raise InvalidToken("the robot account was disabled, deleted or expired, or its secret rotated, since "
                               "this token was issued")
        return Identity(robots.principal(robot, Mechanism.SIGNED_TOKEN), {"kind": "robot", "rob": str(claims["rob"])},
                        robot.expires_at)
    if kind == "anonymous" and (not settings.AUTH_ENABLED or authz.rules().anonymous_anywhere):
        return anonymous_identity()
    raise InvalidToken("the token names no credential this registry knows")


# -- signing and verifying ------------------------------------------------------------------------

def signing_key() -> bytes:
    return _derived_key(settings.SECRET_KEY)


@lru_cache(maxsize=4)
def _derived_key(secret: str) -> bytes:
    # A key of its own, derived from SECRET_KEY: nothing else signed with SECRET_KEY verifies here.
    return salted_hmac("tokens.bearer", "signing key", secret=secret, algorithm="sha256").digest()


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _sign(claims: dict[str, Any]) -> str:
    import jwt  # here, not at the top: PyJWT loads cryptography (about 11 MiB a worker) when installed

    return jwt.encode(claims, signing_key(), algorithm=ALGORITHM)


def _claims(identity: Identity, audience: str, issued: datetime, expires: datetime) -> dict[str, Any]:
    return {"iss": SERVICE, "sub": identity.principal.name, "aud": audience,
            "iat": int(issued.timestamp()), "nbf": int(issued.timestamp()), "exp": int(expires.timestamp()),
            "jti": secrets.token_urlsafe(12), **identity.binding}


@dataclass(frozen=True)
class Issued:
    token: str
    expires_in: int
    issued_at: datetime
    scopes: list[Scope]


def issue_access(identity: Identity, scopes: list[Scope]) -> Issued:
    issued = _now()
    lifetime = settings.AUTH_BEARER_TTL_SECONDS
    claims = _claims(identity, ACCESS_AUDIENCE, issued, issued + timedelta(seconds=lifetime))
    claims["access"] = [{"type": s.type, "name": s.name, "actions": list(s.actions)} for s in scopes]
    token = _sign(claims)
    if len(token) > MAX_TOKEN_CHARS:
        # It could never be sent back: refused now, rather than by every request that carries it.
        raise InvalidScope(f"the {len(scopes)} scopes granted make a token of {len(token)} characters, over the "
                           f"{MAX_TOKEN_CHARS} characters an Authorization header may carry here; ask for fewer "
                           "scopes (repositories) at a time")
    return Issued(token, lifetime, issued, scopes)


def issue_refresh(identity: Identity) -> str:
    issued = _now()
    expires = issued + timedelta(days=settings.AUTH_REFRESH_TTL_DAYS)
    if identity.not_after is not None:
        expires = min(expires, identity.not_after)
    return _sign(_claims(identity, REFRESH_AUDIENCE, issued, expires))


def _decode(token: str, audience: str) -> dict[str, Any]:
    import jwt

    try:
        return jwt.decode(token, signing_key(), algorithms=[ALGORITHM], audience=audience, issuer=SERVICE,
                          leeway=LEEWAY_SECONDS,
                          options={"require": ["iss", "sub", "aud", "exp", "nbf", "iat"]})
    except jwt.ExpiredSignatureError:
        raise InvalidToken("the token has expired") from None
    except jwt.InvalidTokenError:
        raise InvalidToken("the token is not one this registry issued") from None


def looks_signed(value: str) -> bool:
    """A JWT (three base64url parts), as opposed to an API token (``svc_...``)."""
    return value.count(".") == 2 and not value.startswith(services.TOKEN_PREFIX)


def verify_access(token: str) -> ScopedPrincipal:
    claims = _decode(token, ACCESS_AUDIENCE)
    principal = _current_identity(claims).principal
    access = claims.get("access")
    if not isinstance(access, list):
        raise InvalidToken("the token has no access claim")
    entries = frozenset(
        (str(entry.get("type")), str(entry.get("name")), str(action))
        for entry in access if isinstance(entry, dict) and isinstance(entry.get("actions"), list)
        for action in entry["actions"])
    # A token issued to an anonymous caller stays anonymous: it reads what anonymous callers may.
    mechanism = Mechanism.SIGNED_TOKEN if principal.is_authenticated else Mechanism.ANONYMOUS
    return ScopedPrincipal(name=principal.name, mechanism=mechanism, role=principal.role,
                           hash_prefix=principal.hash_prefix, repositories=principal.repositories,
                           groups=principal.groups, source=principal.source, access=entries)


def verify_refresh(token: str) -> Identity:
    return _current_identity(_decode(token, REFRESH_AUDIENCE))


# -- what a request needs, and the challenge that says so -----------------------------------------

def required_scopes(url_name: str | None, kwargs: Mapping[str, Any], action: Action,
                    query: Mapping[str, str]) -> list[Scope]:
    if url_name == routes.CATALOG:
        return [Scope(*CATALOG, ("*",))]
    if "name" not in kwargs:
        return []  # the version check and unknown /v2/ paths need only valid credentials
    scopes = [Scope("repository", kwargs["name"], (action.value,))]
    if url_name == routes.UPLOAD_START and query.get("mount") and query.get("from"):
        scopes.append(Scope("repository", query["from"], (Action.PULL.value,)))
    return scopes


def missing_scopes(principal: Principal, url_name: str | None, kwargs: Mapping[str, Any], action: Action,
                   query: Mapping[str, str], mirror_prefix: str = "") -> list[Scope]:
    """The scopes a signed token lacks for this request (none for other credentials).

    ``mirror_prefix``: the request came as ``/<prefix>/v2/<name>/...`` (a Docker Engine mirror),
    whose client asks for <name> as it knows it; a token for that name covers ``<prefix>/<name>``.
    The role, not the scope, is what limits a caller, so naming the repository either way grants
    nothing more."""
    if not isinstance(principal, ScopedPrincipal):
        return []
    needed = required_scopes(url_name, kwargs, action, query)
    return needed if any(not principal.grants(scope) and not principal.grants(_unprefixed(scope, mirror_prefix))
                         for scope in needed) else []


def _unprefixed(scope: Scope, prefix: str) -> Scope:
    if prefix and scope.type == "repository" and scope.name.startswith(prefix + "/"):
        return Scope(scope.type, scope.name[len(prefix) + 1:], scope.actions)
    return scope


def _challenged(scope: Scope) -> Scope:
    # A challenge for a pull or a push asks for both: a client that keeps its first token for a
    # whole push (oras-py does) starts with a pull (does the blob exist?). The token endpoint
    # grants only what the role allows, so a read token asking for both still gets pull alone.
    if scope.type == "repository" and set(scope.actions) <= {"pull", "push"}:
        return Scope(scope.type, scope.name, ("pull", "push"))
    return scope


def realm(request: HttpRequest) -> str:
    """``[auth] token_realm``, else the token endpoint at ``[server] external_url``. Without either,
    the request's own address only when its Host names this machine's loopback: a Host header is the
    client's to write, and clients send their credentials to the realm. Otherwise the realm is the
    bare path, which docker, containerd, podman and skopeo do not resolve (they take the realm as an
    absolute URL): the operator is told once, in the log, to set external_url."""
    if settings.AUTH_TOKEN_REALM:
        return str(settings.AUTH_TOKEN_REALM)
    base = public_base(request)
    if base is None:
        _warn_no_realm()
        return TOKEN_PATH
    return base + TOKEN_PATH


@lru_cache(maxsize=1)
def _warn_no_realm() -> None:
    log.warning("the Bearer challenge names the realm %s without a host: set [server] external_url (or [auth] "
                "token_realm) to the URL clients use, or docker, podman and skopeo cannot get a token; a Host "
                "header is believed only when it names this machine's loopback", TOKEN_PATH)


def challenge(request: HttpRequest, scopes: list[Scope] | None = None, error: str | None = None) -> str:
    """The Bearer challenge for this request: the scope it needs, unless ``scopes`` says otherwise."""
    if scopes is None:
        scopes = _scopes_of(request)
    parts = [f'realm="{realm(request)}"', f'service="{SERVICE}"']
    if scopes:
        # The request's own repository first; a mount's source follows and needs pull alone.
        parts.append('scope="{}"'.format(" ".join([str(_challenged(scopes[0]))] + [str(s) for s in scopes[1:]])))
    if error:
        parts.append(f'error="{error}"')
    return "Bearer " + ",".join(parts)


def _scopes_of(request: HttpRequest) -> list[Scope]:
    # Authentication runs once Django has resolved the path (tokens.middleware), so the match is
    # on the request; a path that no view serves has none and needs no scope.
    match = request.resolver_match
    if match is None:
        return []
    needed = required_scopes(match.url_name, match.kwargs, action_for(match.url_name, request.method), request.GET)
    # A name that cannot be a repository (a quote, a space, a control character) must not break
    # the header: such requests are challenged without a scope.
    return [scope for scope in needed if HEADER_SAFE.fullmatch(scope.name)]
