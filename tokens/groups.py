"""Where a principal's groups come from: identity sources, asked in turn, each giving groups or nothing.

The one source today is ``[auth] groups_file``, in Apache's AuthGroupFile format (``team-a: alice
bob``, one group a line, ``#`` comments; a group named on several lines has all their members). It
is read again when it changes, looked at no more than once a second, so removing a user from a group
cuts their access (and their tokens') within a second or two, on every worker, with no restart.

Other sources (LDAP, OIDC: the next identity issue) plug in with ``register``: a source is a callable
from a username to the groups it knows for them, and returns an empty set for users it does not know
(as a Django auth backend returns None). The decision (tokens.authz) sees only the union, once per
request, and never where a group came from.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from regsite.watched import Stamp, WatchedFile

log = logging.getLogger(__name__)

GroupSource = Callable[[str], frozenset[str]]
STAT_SECONDS = 1.0  # the file is stat'ed at most this often per process
NONE: frozenset[str] = frozenset()


@dataclass(frozen=True)
class GroupsSnapshot:
    stamp: Stamp | None  # (mtime_ns, size, inode); None when unreadable
    members: dict[str, frozenset[str]] = field(default_factory=dict)  # group -> users
    of_user: dict[str, frozenset[str]] = field(default_factory=dict)  # user -> groups


def parse(text: str, path: str = "groups file") -> dict[str, frozenset[str]]:
    members: dict[str, set[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        group, sep, users = line.partition(":")
        group = group.strip()
        if not sep or not group or any(c.isspace() for c in group):
            log.warning("%s line %d is not \"group: user user ...\"; ignored", path, number)
            continue
        members.setdefault(group, set()).update(users.split())
    return {group: frozenset(users) for group, users in members.items()}


class GroupsFile:
    """One groups file, parsed again whenever its inode, size or modification time changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._watched = WatchedFile(path, self._read)

    def snapshot(self) -> GroupsSnapshot:
        return self._watched.get(STAT_SECONDS)

    def _read(self, stamp: Stamp | None) -> GroupsSnapshot:
        try:
            text = self.path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            # Failing closed: with the file unreadable nobody is in any group.
            log.error("groups file %s cannot be read (%s): nobody is in any group until it can",
                      self.path, exc.strerror)
            return GroupsSnapshot(stamp=stamp)
        members = parse(text, str(self.path))
        of_user: dict[str, set[str]] = {}
        for group, users in members.items():
            for user in users:
                of_user.setdefault(user, set()).add(group)
        snapshot = GroupsSnapshot(stamp, members, {user: frozenset(groups) for user, groups in of_user.items()})
        _warn_undefined(set(members), str(self.path))
        return snapshot

    def groups_of(self, user: str) -> frozenset[str]:
        return self.snapshot().of_user.get(user, NONE)


_current: list[GroupsFile | None] = []  # the configured file's watcher, once looked up
_registered: list[GroupSource] = []


def groups_file() -> GroupsFile | None:
    if not _current:  # every request with credentials asks: the setting is read once
        configured = str(settings.AUTH_GROUPS_FILE or "")
        _current[:] = [GroupsFile(Path(configured)) if configured else None]
    return _current[0]


@receiver(setting_changed)
def _forget_file(setting: str, **kwargs: object) -> None:
    if setting == "AUTH_GROUPS_FILE":
        _current.clear()


def register(source: GroupSource) -> None:
    """Add an identity source of groups (LDAP, OIDC); asked after the groups file."""
    if source not in _registered:
        _registered.append(source)


def unregister(source: GroupSource) -> None:
    if source in _registered:
        _registered.remove(source)


def groups_of(user: str) -> frozenset[str]:
    """Every group any source puts the user in."""
    found = groups_file()
    groups = found.snapshot().of_user.get(user, NONE) if found is not None else NONE
    for source in _registered:
        more = source(user)
        if more:
            groups = groups | more
    return groups


def only_source_is_the_file() -> bool:
    return not _registered


def _warn_undefined(defined: set[str], path: str) -> None:
    if not only_source_is_the_file():
        return
    from tokens import authz

    for line in undefined_group_warnings(authz.rules(), defined, path):
        log.warning("%s", line)


def undefined_group_warnings(rules: object, defined: set[str] | None, path: str) -> list[str]:
    """One line per group that rules name and the groups file (when it is the only source) does
    not define: nobody is in it, so whatever it grants, it grants no one."""
    from tokens.rules import AccessRules, named_groups

    assert isinstance(rules, AccessRules)
    lines = []
    for group, where in named_groups(rules).items():
        if defined is None:
            lines.append(f"{', '.join(where)} groups: group {group!r} is named but no [auth] groups_file is "
                         "configured: nobody is in it")
        elif group not in defined:
            lines.append(f"{', '.join(where)} groups: group {group!r} is not defined in {path}: nobody is in it")
    return lines
