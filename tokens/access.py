"""Who may do what: the roles, the action each registry request needs, and which views are public.

Roles are defined here once; tokens, the principal, metrics, the OpenAPI document and the UI all
read them from ``Role``. A view says where it is defined whether it needs credentials (``public``,
``login_optional``, as Django 5.1's ``login_not_required`` does), so no list of paths has to be
kept in step with the URL table.
"""
from __future__ import annotations

from enum import Enum, StrEnum
from typing import Any, Callable, TypeVar

from registry import routes


class Role(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @classmethod
    def parse(cls, value: object) -> Role | None:
        """The role a stored or requested value names; None for anything else."""
        try:
            return cls(value) if isinstance(value, str) else None
        except ValueError:
            return None


_RANK = {Role.READ: 1, Role.WRITE: 2, Role.ADMIN: 3}
# A new token's role when none is asked for (the product spec): the command, the API, the UI and
# the OpenAPI document all say it through this name.
DEFAULT_ROLE = Role.READ
ROLE_NAMES: tuple[str, ...] = tuple(role.value for role in Role)


class Action(StrEnum):
    PULL = "pull"
    PUSH = "push"
    DELETE = "delete"


REQUIRED_ROLE = {Action.PULL: Role.READ, Action.PUSH: Role.WRITE, Action.DELETE: Role.ADMIN}
# Every verb on an upload session, including GET (status) and DELETE (cancel), is part of a push.
UPLOAD_ROUTES = frozenset({routes.UPLOAD_START, routes.UPLOAD_SESSION})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def action_for(route: str | None, method: str | None) -> Action:
    """The one place that says which action a registry request needs: pull, push or delete."""
    if route in UPLOAD_ROUTES:
        return Action.PUSH
    if method in SAFE_METHODS:
        return Action.PULL
    if method == "DELETE":
        return Action.DELETE
    return Action.PUSH


# Every authenticated request asks: one lookup (members hash as their values), not two enum calls.
_ALLOWED = {(role.value, action.value): role.rank >= REQUIRED_ROLE[action].rank for role in Role for action in Action}


def role_allows(role: Role | str | None, action: Action | str) -> bool:
    try:
        return _ALLOWED[role, action]  # type: ignore[index]
    except (KeyError, TypeError):
        Action(action)  # an action that does not exist is a mistake of the caller's: ValueError
        return False


class Access(Enum):
    REQUIRED = "required"  # credentials needed (with auth on), checked and role-checked
    OPTIONAL = "optional"  # open, but credentials that are sent are checked (the /v2/ version check)
    PUBLIC = "public"      # open; credentials that are sent are ignored: never checked nor counted


View = TypeVar("View", bound=Callable[..., Any])
_ATTRIBUTE = "registry_access"
_OWN_CREDENTIALS = "registry_checks_own_credentials"


def public(view: View) -> View:
    """Mark a view as open to anyone even with auth on; an Authorization header is not looked at."""
    setattr(view, _ATTRIBUTE, Access.PUBLIC)
    return view


def checks_own_credentials(view: View) -> View:
    """Mark a view public to the middleware because it checks the credentials it is sent itself and
    answers its own 401 and 429 (/auth/token takes Basic or Bearer in the Authorization header, as the
    registry API does): they are not checked, nor counted, twice. Unlike a ``public`` view's, its
    OpenAPI operations may name the credentials they take."""
    setattr(view, _OWN_CREDENTIALS, True)
    return public(view)


def login_optional(view: View) -> View:
    """Mark a view as open to anyone, but one whose sent credentials are checked (a wrong password
    is a 401): ``docker login`` and ``podman login`` verify credentials on the version check."""
    setattr(view, _ATTRIBUTE, Access.OPTIONAL)
    return view


def access_of(view: Callable[..., Any] | None) -> Access:
    """How a view is reached; a path that no view serves needs credentials like any other."""
    return getattr(view, _ATTRIBUTE, Access.REQUIRED) if view is not None else Access.REQUIRED


def has_own_credential_check(view: Callable[..., Any] | None) -> bool:
    return view is not None and getattr(view, _OWN_CREDENTIALS, False)
