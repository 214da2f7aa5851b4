"""Who is making a request, and how they proved it."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest

from tokens.access import Action, Role, role_allows


class Mechanism(StrEnum):
    """How credentials were presented; the values are the ``mechanism`` label of
    ``registry_auth_attempts_total``."""

    ANONYMOUS = "anonymous"  # none (or none looked at: a public endpoint)
    BASIC_USER = "basic"     # Authorization: Basic with an htpasswd user
    ROBOT = "robot"          # Authorization: Basic with a robot account (robot$name and its secret)
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


ROBOT_PREFIX = "robot$"  # robot accounts' names: never an htpasswd user's (tokens.robots)


class Kind(StrEnum):
    """What stands behind a request, as the access decision (tokens.authz) tells them apart."""

    ANONYMOUS = "anonymous"
    USER = "user"
    TOKEN = "token"
    ROBOT = "robot"


@dataclass(frozen=True)
class Principal:
    name: str
    mechanism: Mechanism
    # The credential's own cap: a token's or a robot's role, an htpasswd user's admin (the rules of
    # [[access]] may give less, repository by repository: tokens.authz). None: may do nothing.
    role: Role | None
    hash_prefix: str | None = None  # the API token's, for logs and errors (never the token)
    # The repository globs a token or robot is limited to; None: not limited by its own scope.
    repositories: tuple[str, ...] | None = None
    # Groups an identity source gave at sign-in (tokens.groups adds those of the groups file).
    groups: frozenset[str] = frozenset()
    # What tokens.authz worked out for this principal, kept for the request (a principal is made
    # per request): its groups, and its role on each repository asked about.
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

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

    @cached_property  # asked several times for each decision; a principal lives for one request
    def kind(self) -> Kind:
        if not self.is_authenticated:
            return Kind.ANONYMOUS
        if self.is_token:
            return Kind.TOKEN
        return Kind.ROBOT if self.name.startswith(ROBOT_PREFIX) else Kind.USER

    def may(self, action: Action, repository: str | None = None) -> bool:
        """Whether this caller may do ``action``: on ``repository`` as the access decision says
        (tokens.authz), else as the credential's own role allows."""
        if repository is None:
            return role_allows(self.role, action)
        from tokens import authz  # the decision reads principals: imported when first asked

        return authz.allows(self, repository, action)


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
    # The access decision that refused the request (a 403, or a read answered as absent); None when
    # none did (tokens.middleware; the audit log records it).
    refusal: Decision | None
    hidden: object  # registry.visibility's token while the repository is hidden from this request


if TYPE_CHECKING:
    from tokens.authz import Decision
