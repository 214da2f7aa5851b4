"""The ``[[access]]`` rules and the ``[auth]`` keys around them, compiled once (pure, no Django).

Which entries govern a repository: those with a ``repositories`` glob that matches its name and is
the most specific, that is has the most literal characters (zot picks the longest matching pattern
the same way), so ``team-a/secret/*`` narrows ``team-a/*``. Several entries may govern together (the
same glob, or globs as specific): a principal's role there is the highest of those naming the user or
one of their groups. With no entry matching, ``default_role`` applies. ``admins`` are admin
everywhere. ``regsite.access_config`` checks the configuration with these very functions, so a rule
the server accepts is exactly a rule the decision (tokens.authz) applies.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from registry.policies.globs import glob_regex
from tokens.access import Role

NO_ROLE = "none"  # default_role's word for "no access"
DEFAULT_ROLES = (Role.ADMIN.value, Role.WRITE.value, Role.READ.value, NO_ROLE)
ANONYMOUS_ROLES = (Role.READ.value,)
GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_WILDCARDS = frozenset("*?[]!")
_GOVERNING_CACHE = 4096


class RuleError(ValueError):
    """One mistake in one key of an entry (or of ``[auth]``); the message says why."""

    def __init__(self, where: str, key: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.key = key

    @property
    def line(self) -> str:
        return f"{self.where} {self.key}: {self}"


def specificity(glob: str) -> int:
    """The literal characters of a glob: what makes one glob more specific than another."""
    literal, i = 0, 0
    while i < len(glob):
        if glob[i] == "[":
            i = glob.find("]", i + 1) + 1 or len(glob)
            continue
        literal += glob[i] not in _WILDCARDS
        i += 1
    return literal


@dataclass(frozen=True)
class Glob:
    text: str
    regex: str
    specificity: int
    _compiled: re.Pattern[str] = field(repr=False, compare=False)

    @classmethod
    def of(cls, text: str) -> Glob:
        regex = glob_regex(text)  # ValueError naming the problem
        return cls(text, regex, specificity(text), re.compile(regex))

    def matches(self, name: str) -> bool:
        return self._compiled.match(name) is not None


@dataclass(frozen=True)
class AccessEntry:
    index: int  # from 0, in the order of the file
    globs: tuple[Glob, ...]
    users: frozenset[str]
    groups: frozenset[str]
    role: Role | None
    anonymous: Role | None

    @property
    def title(self) -> str:
        return entry_title(self.index, [glob.text for glob in self.globs])

    def names(self, user: str, groups: frozenset[str]) -> bool:
        return user in self.users or not self.groups.isdisjoint(groups)


def entry_title(index: int, globs: Sequence[Any]) -> str:
    """How messages and errors name an entry: ``[[access]] #2 "team-a/*"``."""
    shown = ", ".join(str(glob) for glob in globs[:3]) + (", ..." if len(globs) > 3 else "")
    return f'[[access]] #{index + 1} "{shown}"' if shown else f"[[access]] #{index + 1}"


@dataclass(frozen=True)
class Governing:
    """The entries that govern one repository, and the glob that makes them govern it; no entries
    (glob None) when none matches."""

    glob: str | None
    entries: tuple[AccessEntry, ...] = ()
    anonymous: Role | None = field(init=False, compare=False)  # the highest ``anonymous`` of the entries

    def __post_init__(self) -> None:
        roles = [entry.anonymous for entry in self.entries if entry.anonymous is not None]
        object.__setattr__(self, "anonymous", max(roles, key=lambda role: role.rank) if roles else None)

    def role_of(self, user: str, groups: frozenset[str]) -> Role | None:
        best: Role | None = None
        for entry in self.entries:  # asked on every request: a loop, no key function
            role = entry.role
            if role is not None and (best is None or role.rank > best.rank) and (
                    user in entry.users or not entry.groups.isdisjoint(groups)):
                best = role
        return best


NOTHING = Governing(None)


class AccessRules:
    """The compiled ``[[access]]`` entries with ``[auth] default_role`` and ``admins``."""

    def __init__(self, entries: Sequence[AccessEntry], default_role: Role | None,
                 admin_users: frozenset[str] = frozenset(), admin_groups: frozenset[str] = frozenset()) -> None:
        self.entries = tuple(entries)
        self.default_role = default_role
        self.admin_users = admin_users
        self.admin_groups = admin_groups
        # Every glob once, most specific first, with the entries that carry it.
        by_glob: dict[str, tuple[Glob, list[AccessEntry]]] = {}
        for entry in self.entries:
            for glob in entry.globs:
                by_glob.setdefault(glob.text, (glob, []))[1].append(entry)
        self.globs: tuple[tuple[Glob, tuple[AccessEntry, ...]], ...] = tuple(
            (glob, tuple(carried)) for glob, carried in
            sorted(by_glob.values(), key=lambda item: -item[0].specificity))
        self.anonymous_anywhere = any(entry.anonymous is not None for entry in self.entries)
        self._governing: dict[str, Governing] = {}

    @property
    def configured(self) -> bool:
        """Whether anything differs from the seed's behaviour (every user an admin everywhere)."""
        return bool(self.entries or self.admin_users or self.admin_groups) or self.default_role is not Role.ADMIN

    def is_admin(self, user: str, groups: frozenset[str]) -> bool:
        return user in self.admin_users or not self.admin_groups.isdisjoint(groups)

    def governing(self, repository: str) -> Governing:
        found = self._governing.get(repository)
        if found is None:
            found = self._match(repository)
            if len(self._governing) >= _GOVERNING_CACHE:
                self._governing.clear()
            self._governing[repository] = found
        return found

    def _match(self, repository: str) -> Governing:
        best: int | None = None
        globs: list[str] = []
        entries: list[AccessEntry] = []
        for glob, carried in self.globs:
            if best is not None and glob.specificity < best:
                break
            if glob.matches(repository):
                best = glob.specificity
                globs.append(glob.text)
                entries.extend(entry for entry in carried if entry not in entries)
        if not globs:
            return NOTHING
        return Governing(" | ".join(globs), tuple(entries))

    def levels(self) -> list[list[tuple[Glob, tuple[AccessEntry, ...]]]]:
        """The globs grouped by specificity, most specific first: the first level with a glob that
        matches a name governs it (what listings turn into one SQL expression)."""
        grouped: list[list[tuple[Glob, tuple[AccessEntry, ...]]]] = []
        for glob, carried in self.globs:
            if grouped and grouped[-1][0][0].specificity == glob.specificity:
                grouped[-1].append((glob, carried))
            else:
                grouped.append([(glob, carried)])
        return grouped


# -- building, with every mistake named -------------------------------------------------------------

def _strings(where: str, key: str, value: Any, errors: list[RuleError]) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        errors.append(RuleError(where, key, f"expected a list of strings, got {value!r}"))
        return []
    return value


def _role(where: str, key: str, value: Any, allowed: Sequence[str], errors: list[RuleError]) -> Role | None:
    if value in ("", None):
        return None
    if value not in allowed:
        errors.append(RuleError(where, key, f"unknown role {value!r}: expected one of {', '.join(allowed)}"))
        return None
    return Role(value)


def build_entry(index: int, raw: Mapping[str, Any], errors: list[RuleError]) -> AccessEntry | None:
    """The entry, or None with its mistakes added to ``errors`` (all of them, one per key)."""
    given = _strings("", "repositories", raw.get("repositories", []), [])
    where = entry_title(index, given)
    before = len(errors)
    patterns = _strings(where, "repositories", raw.get("repositories", []), errors)
    if isinstance(raw.get("repositories"), list) and not patterns:
        errors.append(RuleError(where, "repositories", "empty: name at least one glob such as \"team-a/*\""))
    globs = []
    for text in patterns:
        try:
            globs.append(Glob.of(text))
        except ValueError as exc:
            errors.append(RuleError(where, "repositories", f"invalid glob {text!r}: {exc}"))
    users = _strings(where, "users", raw.get("users", []), errors)
    for user in users:
        if not user.strip() or user.startswith("@") or any(c in user for c in ": \t"):
            errors.append(RuleError(where, "users", f"{user!r} is not a username (groups go in groups, "
                                                    "without @)"))
    groups = _strings(where, "groups", raw.get("groups", []), errors)
    for group in groups:
        if not GROUP_NAME.fullmatch(group):
            errors.append(RuleError(where, "groups", f"{group!r} is not a group name (letters, digits, . _ -)"))
    role = _role(where, "role", raw.get("role", ""), [r.value for r in Role], errors)
    anonymous = _role(where, "anonymous", raw.get("anonymous", ""), ANONYMOUS_ROLES, errors)
    if raw.get("role") and not (users or groups):
        errors.append(RuleError(where, "role", "names no user or group: add users or groups"))
    if (users or groups) and not raw.get("role"):
        errors.append(RuleError(where, "role", "required when users or groups are named: read, write or admin"))
    if len(errors) > before:
        return None
    return AccessEntry(index, tuple(globs), frozenset(users), frozenset(groups), role, anonymous)


def build(entries: Sequence[Mapping[str, Any]], default_role: str, admins: Iterable[str]) -> AccessRules:
    """The compiled rules; RulesInvalid listing every mistake."""
    errors: list[RuleError] = []
    built = [build_entry(index, raw, errors) for index, raw in enumerate(entries)]
    if default_role not in DEFAULT_ROLES:
        errors.append(RuleError("[auth]", "default_role",
                                f"unknown role {default_role!r}: expected one of {', '.join(DEFAULT_ROLES)}"))
    admin_users, admin_groups = set(), set()
    for admin in admins:
        if admin.startswith("@"):
            if not GROUP_NAME.fullmatch(admin[1:]):
                errors.append(RuleError("[auth]", "admins", f"{admin!r} is not @ and a group name"))
            admin_groups.add(admin[1:])
        elif not admin.strip() or any(c in admin for c in ": \t"):
            errors.append(RuleError("[auth]", "admins", f"{admin!r} is not a username or @group"))
        else:
            admin_users.add(admin)
    if errors:
        raise RulesInvalid(errors)
    role = None if default_role == NO_ROLE else Role(default_role)
    return AccessRules([entry for entry in built if entry is not None], role, frozenset(admin_users),
                       frozenset(admin_groups))


class RulesInvalid(ValueError):
    def __init__(self, errors: list[RuleError]) -> None:
        super().__init__("\n".join(error.line for error in errors))
        self.errors = errors


def named_groups(rules: AccessRules) -> dict[str, list[str]]:
    """group -> the entries (or ``[auth] admins``) naming it, for warnings about undefined groups."""
    named: dict[str, list[str]] = {}
    for entry in rules.entries:
        for group in sorted(entry.groups):
            named.setdefault(group, []).append(entry.title)
    for group in sorted(rules.admin_groups):
        named.setdefault(group, []).append("[auth] admins")
    return named
