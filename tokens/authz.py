"""The one access decision: may this principal do this action on this repository, and why.

Identity sources say who a principal is and which groups they are in (htpasswd users, API tokens,
robot accounts; tokens.groups for the groups); this module alone turns that and the ``[[access]]``
rules (tokens.rules) into an answer. Every check in the codebase asks it: the authentication
middleware for each registry request, the token endpoint for the scopes it grants, mounts for their
source, listings for what they show (``visible``), the UI for its pages and buttons.

A principal's role on a repository:

- an htpasswd user: admin if ``[auth] admins`` names them or one of their groups; else the highest
  role the governing entries give them or their groups (none when entries govern and none names
  them); else, where no entry matches, ``[auth] default_role``;
- an API token: the least of its own role, its ``repositories`` (none outside them) and its owner's
  role at the time of use, so that a user taken out of a group loses that access through every
  token at once;
- a robot account: its own role, within its ``repositories``;
- anyone, signed in or not: at least what the governing entries' ``anonymous`` grants.

The answer for each repository is kept on the principal for the rest of the request (a principal
is made per request), as Django's ModelBackend keeps permissions on the user object; the rules are
compiled once per configuration and their match for a repository is kept by the rules.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from registry.visibility import EVERYTHING, NOTHING, Ladder, Part, Visible, any_of
from tokens import groups as group_sources
from tokens.access import REQUIRED_ROLE, Action, Role, role_allows
from tokens.principal import Kind, Principal
from tokens.rules import NO_ROLE, AccessRules, Governing, Glob, build

DEFAULT_ROLE_WHERE = "[auth] default_role"


class Decision(NamedTuple):  # every request makes one: a tuple is the cheapest record to build
    allowed: bool
    role: Role | None  # the principal's role on the repository (None: no access)
    where: str | None  # what governs it: a rule's glob, or [auth] default_role; None when nothing does
    message: str = ""  # why not, for a 403: "carol has role read on team-a/*; push needs write"


# -- the rules of the running configuration ---------------------------------------------------------

_compiled: AccessRules | None = None
RULE_SETTINGS = frozenset({"ACCESS_RULES", "AUTH_DEFAULT_ROLE", "AUTH_ADMINS"})


def rules() -> AccessRules:
    """The rules of the current settings, compiled once (the start-up check ran the same build, so
    it cannot fail here); compiled again when a test changes the settings (setting_changed)."""
    global _compiled
    compiled = _compiled
    if compiled is None:
        compiled = _compiled = build(settings.ACCESS_RULES, settings.AUTH_DEFAULT_ROLE or NO_ROLE,
                                     settings.AUTH_ADMINS)
    return compiled


@receiver(setting_changed)
def _forget_rules(setting: str, **kwargs: Any) -> None:
    global _compiled
    if setting in RULE_SETTINGS:
        _compiled = None


@lru_cache(maxsize=1024)
def _globs(patterns: tuple[str, ...]) -> tuple[Glob, ...]:
    return tuple(Glob.of(pattern) for pattern in patterns)


def within(patterns: tuple[str, ...] | None, repository: str) -> bool:
    """Whether a token's or robot's own ``repositories`` cover the repository (None: no limit)."""
    return patterns is None or any(glob.matches(repository) for glob in _globs(patterns))


# -- identity: groups and admins --------------------------------------------------------------------

def groups_of(principal: Principal) -> frozenset[str]:
    """The groups of the user behind the principal (a token's owner), once per request."""
    found = principal.memo.get("groups")
    if found is None:
        found = principal.groups | group_sources.groups_of(principal.name)
        principal.memo["groups"] = found
    return found


def is_admin(principal: Principal) -> bool:
    """An admin everywhere who may manage robots and read the audit log: a user (not a token or
    robot) named by ``[auth] admins``; or, with none named and the seed's behaviour unchanged, any
    user (every htpasswd user is an admin of every repository then)."""
    if not settings.AUTH_ENABLED:
        return True
    if principal.kind is not Kind.USER:
        return False
    compiled = rules()
    if not (compiled.admin_users or compiled.admin_groups):
        return not compiled.configured
    return compiled.is_admin(principal.name, groups_of(principal))


# -- the role on a repository -----------------------------------------------------------------------

def higher(a: Role | None, b: Role | None) -> Role | None:
    if a is None:
        return b
    return a if b is None or a.rank >= b.rank else b


def _lower(a: Role | None, b: Role | None) -> Role | None:
    if a is None or b is None:
        return None
    return a if a.rank <= b.rank else b


def _user_role(compiled: AccessRules, principal: Principal, governing: Governing) -> tuple[Role | None, str | None]:
    if not compiled.configured:
        return Role.ADMIN, None
    groups = groups_of(principal)
    if compiled.is_admin(principal.name, groups):
        return Role.ADMIN, "[auth] admins"
    if governing.glob is not None:
        return governing.role_of(principal.name, groups), governing.glob
    return compiled.default_role, DEFAULT_ROLE_WHERE


def role_on(principal: Principal, repository: str) -> tuple[Role | None, str | None]:
    """The principal's role on the repository, and what governs it."""
    if not settings.AUTH_ENABLED:
        return Role.ADMIN, None
    return _role_on(principal, repository)


def _role_on(principal: Principal, repository: str) -> tuple[Role | None, str | None]:
    kind = principal.kind
    if kind is not Kind.ANONYMOUS:
        known = principal.memo.get(("role", repository))
        if known is not None:
            return known
    compiled = rules()
    governing = compiled.governing(repository)
    if kind is Kind.ANONYMOUS:
        return governing.anonymous, governing.glob
    if kind is Kind.ROBOT:
        # A robot's scope is its own (an admin gave it): the rules do not narrow it further.
        role, where = (principal.role if within(principal.repositories, repository) else None), None
    else:
        role, where = _user_role(compiled, principal, governing)
        if kind is Kind.TOKEN:
            role = _lower(role, principal.role) if within(principal.repositories, repository) else None
    anonymous = governing.anonymous
    found = (role if anonymous is None else higher(role, anonymous), where)
    principal.memo[("role", repository)] = found
    return found


def _who(principal: Principal) -> str:
    if principal.kind is Kind.TOKEN:
        return f"token {principal.hash_prefix}"
    return principal.name if principal.is_authenticated else "anonymous"


def refusal(principal: Principal, role: Role | None, where: str | None, action: Action,
            repository: str | None = None) -> str:
    """The 403's message: who, their role where, and what the action needs."""
    place = ""
    if where == DEFAULT_ROLE_WHERE and repository is not None:
        place = f" on {repository} ({where})"
    elif where is not None:
        place = f" on {where}"
    if principal.repositories is not None and repository is not None and not within(principal.repositories,
                                                                                      repository):
        place = f" on {repository} (outside its repositories {', '.join(principal.repositories)})"
    return f"{_who(principal)} has role {role or 'none'}{place}; {action.value} needs {REQUIRED_ROLE[action]}"


def decide(principal: Principal, repository: str | None, action: Action) -> Decision:
    """May ``principal`` do ``action`` on ``repository``? None for requests about no one repository
    (the catalog, the version check, unknown /v2/ paths): judged by the credential's own role, and
    for anonymous callers open only to reads where some rule lets anonymous callers read."""
    if not settings.AUTH_ENABLED:
        return Decision(True, Role.ADMIN, None)
    if repository is None:
        if not principal.is_authenticated:
            ok = action is Action.PULL and rules().anonymous_anywhere
            return Decision(ok, Role.READ if ok else None, None)
        ok = role_allows(principal.role, action)
        return Decision(ok, principal.role, None, "" if ok else refusal(principal, principal.role, None, action))
    role, where = _role_on(principal, repository)
    if role_allows(role, action):
        return Decision(True, role, where)
    return Decision(False, role, where, refusal(principal, role, where, action, repository))


def allows(principal: Principal, repository: str, action: Action) -> bool:
    return decide(principal, repository, action).allowed


def actions_on(principal: Principal, repository: str) -> tuple[str, ...]:
    """The registry actions (pull, push, delete) the principal may take on the repository."""
    return tuple(action.value for action in Action if allows(principal, repository, action))


# -- what listings show -----------------------------------------------------------------------------

def _ladder(compiled: AccessRules, grants: Any, otherwise: bool) -> Ladder:
    steps = []
    for level in compiled.levels():
        regexes = [glob.regex for glob, _entries in level]
        granting = [glob.regex for glob, entries in level if any(grants(entry) for entry in entries)]
        steps.append((any_of(regexes) or "", any_of(granting)))
    return Ladder(tuple(steps), otherwise)


def visible(principal: Principal) -> Visible:
    """The repositories the principal may read, for listings; kept for the request."""
    if not settings.AUTH_ENABLED:
        return EVERYTHING
    found = principal.memo.get("visible") if principal.kind is not Kind.ANONYMOUS else None
    if found is not None:
        return found
    compiled = rules()
    parts: list[Part] = []
    if compiled.anonymous_anywhere:
        parts.append(Part(_ladder(compiled, lambda entry: entry.anonymous is not None, False)))
    kind = principal.kind
    own_limit = any_of([glob.regex for glob in _globs(principal.repositories)]) \
        if principal.repositories is not None else None
    if kind is Kind.ROBOT:
        if principal.role is not None and own_limit is not None:
            parts.append(Part(None, own_limit))
    elif kind in (Kind.USER, Kind.TOKEN) and principal.role is not None:
        if not compiled.configured:
            parts.append(Part(None, own_limit))
        else:
            groups = groups_of(principal)
            if compiled.is_admin(principal.name, groups):
                parts.append(Part(None, own_limit))
            else:
                parts.append(Part(_ladder(compiled, lambda entry: entry.role is not None and entry.names(
                    principal.name, groups), compiled.default_role is not None), own_limit))
    result = _simplified(parts)
    if kind is not Kind.ANONYMOUS:
        principal.memo["visible"] = result
    return result


def _simplified(parts: list[Part]) -> Visible:
    if any(part.ladder is None and part.within is None for part in parts):
        return EVERYTHING
    return Visible(tuple(parts)) if parts else NOTHING
