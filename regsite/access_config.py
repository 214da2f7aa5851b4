"""The ``[[access]]`` tables of the configuration, with ``[auth] default_role``, ``groups_file`` and
``admins`` (README: Access control).

Their keys (with defaults) go into ``regsite.config.LISTS``; the whole of them is checked by building
the rules with ``tokens.rules``, the code the decision applies, so an unknown role, an empty or
invalid ``repositories``, a role naming nobody stops start-up with one line per mistake naming the
entry and the key. Groups that rules name but the groups file does not define are warnings, not
errors (``undefined_groups``): the file is re-read while the server runs, and may gain them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from regsite.config import ConfigError, Required

SCHEMA: dict[str, Any] = {
    "repositories": Required(list),
    "users": [],
    "groups": [],
    "role": "",
    "anonymous": "",
}


def check(cfg: dict[str, Any]) -> None:
    from tokens.rules import RulesInvalid, build

    auth = cfg["auth"]
    try:
        build(cfg["access"], auth["default_role"], auth["admins"])
    except RulesInvalid as exc:
        raise ConfigError(str(exc)) from None


def undefined_groups(cfg: dict[str, Any]) -> list[str]:
    """Warnings for start-up: groups named by rules that no source defines (with the groups file
    the only source)."""
    from tokens import groups
    from tokens.rules import build

    rules = build(cfg["access"], cfg["auth"]["default_role"], cfg["auth"]["admins"])
    path = cfg["auth"]["groups_file"]
    if not path:
        return groups.undefined_group_warnings(rules, None, "")
    try:
        defined = set(groups.parse(Path(path).read_text(encoding="utf-8", errors="replace"), path))
    except OSError as exc:
        return [f"[auth] groups_file: cannot read {path} ({exc.strerror}): nobody is in any group until it can be"]
    return groups.undefined_group_warnings(rules, defined, path)


def register(lists: dict[str, dict[str, Any]], cross_checks: list[Callable[[dict[str, Any]], None]]) -> None:
    lists["access"] = SCHEMA
    cross_checks.append(check)
