"""Who is making a request, and what a role may do."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from django.http import HttpRequest

from registry.access import Action

Kind = Literal["user", "token", "anonymous"]

ROLE_RANK = {"read": 1, "write": 2, "admin": 3}
REQUIRED_ROLE = {Action.PULL: "read", Action.PUSH: "write", Action.DELETE: "admin"}
NO_ROLE = "none"


@dataclass(frozen=True)
class Principal:
    name: str
    kind: Kind
    role: str
    hash_prefix: str | None = None

    @property
    def is_authenticated(self) -> bool:
        return self.kind != "anonymous"


# With authentication off every caller may do everything; with it on, an anonymous caller may
# only reach the public paths.
OPEN = Principal(name="anonymous", kind="anonymous", role="admin")
ANONYMOUS = Principal(name="anonymous", kind="anonymous", role=NO_ROLE)


def role_allows(role: str, action: Action | str) -> bool:
    required = REQUIRED_ROLE[Action(action)]
    return ROLE_RANK.get(role, 0) >= ROLE_RANK[required]


class AuthenticatedHttpRequest(HttpRequest):
    """A request as it leaves tokens.middleware, with the caller set on it."""

    principal: Principal
