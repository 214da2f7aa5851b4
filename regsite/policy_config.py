"""The governance tables of the configuration: ``[[retention]]``, ``[[immutable]]`` and ``[[quota]]``.

Their keys (with defaults) go into ``regsite.config.LISTS``; each list is checked by building its
rules with ``registry.policies.rules``, the code that applies them, so an invalid glob, regular
expression, size or count stops start-up with one line naming the entry and the key. No rule applies
under a pull-through cache's prefix (``[[proxy]]``): one whose glob lies wholly inside such a prefix
would do nothing, and is refused the same way.
"""
from __future__ import annotations

from typing import Any, Callable

from registry.policies.rules import BUILDERS, RuleError
from regsite.config import ConfigError, Required, entry_name

SCHEMAS: dict[str, dict[str, Any]] = {
    "retention": {
        "name": "",
        "repositories": Required(str),
        "keep_last": 0,
        "keep_tags": [],
        "pulled_within_days": 0,
        "untagged_after_hours": 24,
    },
    "immutable": {
        "name": "",
        "repositories": Required(str),
        "tags": Required(list),
    },
    "quota": {
        "name": "",
        "repositories": Required(str),
        "max_bytes": Required(str),
    },
}


def _validator(kind: str) -> Callable[[list[dict[str, Any]]], None]:
    build = BUILDERS[kind]

    def check(entries: list[dict[str, Any]]) -> None:
        seen: dict[str, int] = {}
        for index, entry in enumerate(entries):
            where = entry_name(kind, index, entry)
            try:
                rule = build(index, entry)
            except RuleError as exc:
                raise ConfigError(f"{where} {exc.key}: {exc}") from None
            if rule.name in seen:
                # Metrics, messages and quota usage are keyed by the name.
                raise ConfigError(f"{where} name: {rule.name!r} already names [[{kind}]] #{seen[rule.name] + 1}; "
                                  "give each rule its own name (or glob)")
            seen[rule.name] = index

    return check


def _literal_head(glob: str) -> str:
    """What every name the glob matches starts with: the glob up to its first wildcard."""
    return next((glob[:i] for i, c in enumerate(glob) if c in "*?["), glob)


def check_outside_caches(cfg: dict[str, Any]) -> None:
    """A rule whose repositories all lie under a [[proxy]] prefix would never apply (rules.py); beside
    a root mirror (prefix = "") no rule can apply anywhere."""
    for kind in SCHEMAS:
        for index, entry in enumerate(cfg[kind]):
            glob = entry["repositories"]
            head = _literal_head(glob)
            for proxy in cfg.get("proxy", []):
                prefix = proxy["prefix"]
                if not prefix:
                    raise ConfigError(
                        f"{entry_name(kind, index, entry)} repositories: with a root mirror ([[proxy]] prefix = "
                        '"") the whole registry is a read-only pull-through cache, where no retention, immutable '
                        "or quota rule applies: remove the rule (evict_after_days governs the cache)")
                if glob == prefix or head.startswith(prefix + "/"):
                    raise ConfigError(
                        f"{entry_name(kind, index, entry)} repositories: {glob!r} lies within the pull-through "
                        f"cache {prefix!r} ([[proxy]]), where no retention, immutable or quota rule applies: "
                        "its evict_after_days governs it")


def register(lists: dict[str, dict[str, Any]], validators: dict[str, Callable[[list[dict[str, Any]]], None]],
             cross_checks: list[Callable[[dict[str, Any]], None]]) -> None:
    for kind, schema in SCHEMAS.items():
        lists[kind] = schema
        validators[kind] = _validator(kind)
    cross_checks.append(check_outside_caches)
