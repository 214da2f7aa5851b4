"""Who is making a request, and how they proved it."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from django.http import HttpRequest

from tokens.access import Action, Role, role_allows


class Mechanism(StrEnum):
    """How credentials were presented; the values are the ``mechanism`` label of
    ``registry_auth_attempts_total``."""

    ANONYMOUS = "anonymous"  # none (or none looked at: a public endpoint)
    BASIC_USER = "basic"     # Authorization: Basic with an htpasswd user
    BASIC_TOKEN = "token"    # the username "token" and an API token: Basic, or /auth/token's password grant
    BEARER_TOKEN = "bearer"  # Authorization: Bearer <API token>
    # A token this registry signed (tokens.bearer): an access token from /auth/token as Bearer, or
    # a refresh token posted back to it. A label of its own: access tokens lapse within minutes by
    # design, so their refusals must not read as API tokens refused.
    SIGNED_TOKEN = "signed"
    # An htpasswd user's password in a body: the token API, the UI sign-in, /auth/token's OAuth2
    # password grant.
    PASSWORD = "password"
    OTHER = "other"          # an Authorization scheme that is not supported (never a principal's)


@dataclass(frozen=True)
class Principal:
    name: str
    mechanism: Mechanism
    role: Role | None  # None: may do nothing (an anonymous caller with auth on)
    hash_prefix: str | None = None  # the API token's, for logs and errors (never the token)

    @property
    def is_authenticated(self) -> bool:
        return self.mechanism is not Mechanism.ANONYMOUS

    @property
    def is_token(self) -> bool:
        """An API token stands behind the request: sent itself, or a signed token issued for one
        (a user's signed token has no hash_prefix and is named by the user)."""
        return self.mechanism in (Mechanism.BASIC_TOKEN, Mechanism.BEARER_TOKEN) or (
            self.mechanism is Mechanism.SIGNED_TOKEN and self.hash_prefix is not None)

    @property
    def label(self) -> str | None:
        """How logs name the caller: the user, or the token's hash_prefix; None when anonymous."""
        if not self.is_authenticated:
            return None
        return self.hash_prefix if self.is_token else self.name

    def may(self, action: Action, repository: str | None = None) -> bool:
        """The one access decision: whether this caller may do ``action``, on ``repository`` when it
        is named (a signed token's scope limits it further: tokens.bearer.ScopedPrincipal)."""
        return role_allows(self.role, action)


# With authentication off every caller may do everything; with it on, an anonymous caller may
# only reach the public views.
OPEN = Principal(name="anonymous", mechanism=Mechanism.ANONYMOUS, role=Role.ADMIN)
ANONYMOUS = Principal(name="anonymous", mechanism=Mechanism.ANONYMOUS, role=None)


def user(name: str, mechanism: Mechanism = Mechanism.BASIC_USER) -> Principal:
    # htpasswd users are full admins.
    return Principal(name=name, mechanism=mechanism, role=Role.ADMIN)


class Outcome(StrEnum):
    """The ``outcome`` label of ``registry_auth_attempts_total``."""

    SUCCESS = "success"
    FAILURE = "failure"
    THROTTLED = "throttled"


@dataclass(frozen=True)
class AuthAttempt:
    """Credentials that were checked on this request, and what came of it."""

    mechanism: Mechanism
    outcome: Outcome
    distributed: bool = False  # a failure against a user failing from many addresses (tokens.throttle)


class AuthenticatedHttpRequest(HttpRequest):
    """A request as the views see it, with what the project's middleware set on it."""

    request_id: str  # ops.middleware
    principal: Principal  # tokens.middleware
    auth_attempt: AuthAttempt | None  # tokens.middleware or a password check; None: none checked
