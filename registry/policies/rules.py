"""The governance rules, typed, and which rule of a kind applies to a repository.

Rules of each kind are tried in the order of the configuration file and the first whose
``repositories`` glob matches the repository's name applies; the others do not. Parsing is pure
Python: ``regsite.policy_config`` validates the configuration with the same functions before Django
starts, so a rule the server accepts is exactly a rule the services can apply.

No rule applies under the prefix of a pull-through cache (``[[proxy]]``, registry.proxy): what it
holds is a copy of its upstream, whose tags move when the upstream's do, whose untagged manifests
(images pulled by digest) are in use, and whose bytes are the upstream's. Its own
``evict_after_days`` governs it; a glob such as ``**`` covers every other repository.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from registry.policies.globs import glob_regex, parse_size

MAX_NAME = 200


class RuleError(ValueError):
    """A rule's ``key`` is invalid; the message says why."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Rule:
    kind: str
    index: int  # from 0, in the order of the file
    name: str  # the rule's ``name``, else its glob: what metrics and messages call it
    repositories: str
    regex: str  # the glob as an anchored regular expression
    _compiled: re.Pattern[str] = field(repr=False, compare=False)

    @property
    def title(self) -> str:
        """How the configuration names the entry: ``[[quota]] #1 "team/*"``."""
        return f'[[{self.kind}]] #{self.index + 1} "{self.name}"'

    def matches(self, repository: str) -> bool:
        return self._compiled.match(repository) is not None


@dataclass(frozen=True)
class RetentionRule(Rule):
    keep_last: int = 0  # 0: no count limit
    keep_tags: tuple[str, ...] = ()
    pulled_within_days: int = 0  # 0: pulls do not decide
    untagged_after_hours: int = 24
    _keep: tuple[re.Pattern[str], ...] = field(default=(), repr=False, compare=False)

    @property
    def removes_tags(self) -> bool:
        return self.keep_last > 0 or self.pulled_within_days > 0

    def kept_by_pattern(self, tag: str) -> str | None:
        """The first keep_tags pattern that ``tag`` matches."""
        return next((p.pattern for p in self._keep if p.search(tag)), None)


@dataclass(frozen=True)
class ImmutableRule(Rule):
    tags: tuple[str, ...] = ()
    _tags: tuple[re.Pattern[str], ...] = field(default=(), repr=False, compare=False)

    def covers(self, tag: str) -> str | None:
        """The first pattern of this rule that makes ``tag`` immutable."""
        return next((p.pattern for p in self._tags if p.search(tag)), None)


@dataclass(frozen=True)
class QuotaRule(Rule):
    max_bytes: int = 0
    max_text: str = ""


def _base(kind: str, index: int, entry: Mapping[str, Any]) -> dict[str, Any]:
    glob = entry.get("repositories", "")
    try:
        regex = glob_regex(glob)
    except ValueError as exc:
        raise RuleError("repositories", f"invalid glob {glob!r}: {exc}") from None
    name = entry.get("name") or glob
    if len(name) > MAX_NAME or any(ord(c) < 32 for c in name):
        raise RuleError("name", f"at most {MAX_NAME} printable characters, got {name[:40]!r}...")
    return {"kind": kind, "index": index, "name": name, "repositories": glob, "regex": regex,
            "_compiled": re.compile(regex)}


def _regexes(key: str, patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise RuleError(key, f"invalid regular expression {pattern!r}: {exc}") from None
    return tuple(compiled)


def _count(entry: Mapping[str, Any], key: str, default: int, minimum: int = 0) -> int:
    value = entry.get(key, default)
    if value < minimum:
        raise RuleError(key, f"must be at least {minimum}, got {value}" if minimum else
                        f"must not be negative, got {value}")
    return value


def retention_rule(index: int, entry: Mapping[str, Any]) -> RetentionRule:
    keep_tags = tuple(entry.get("keep_tags", ()))
    # 0 is allowed: untagged manifests then go at the next collection, like --delete-untagged with
    # --grace-hours 0 (an index being pushed at that moment may lose a platform image it lists).
    hours = _count(entry, "untagged_after_hours", 24)
    return RetentionRule(**_base("retention", index, entry), keep_last=_count(entry, "keep_last", 0),
                         keep_tags=keep_tags, pulled_within_days=_count(entry, "pulled_within_days", 0),
                         untagged_after_hours=hours, _keep=_regexes("keep_tags", keep_tags))


def immutable_rule(index: int, entry: Mapping[str, Any]) -> ImmutableRule:
    tags = tuple(entry.get("tags", ()))
    if not tags:
        raise RuleError("tags", "at least one regular expression of the tags to protect")
    return ImmutableRule(**_base("immutable", index, entry), tags=tags, _tags=_regexes("tags", tags))


def quota_rule(index: int, entry: Mapping[str, Any]) -> QuotaRule:
    text = entry.get("max_bytes", "")
    try:
        limit = parse_size(text)
    except ValueError as exc:
        raise RuleError("max_bytes", str(exc)) from None
    return QuotaRule(**_base("quota", index, entry), max_bytes=limit, max_text=text)


BUILDERS = {"retention": retention_rule, "immutable": immutable_rule, "quota": quota_rule}


def exempt_regex(prefixes: Sequence[str]) -> str | None:
    """The repositories under any of ``prefixes`` (pull-through caches), as an anchored regular
    expression; None without prefixes."""
    if not prefixes:
        return None
    if "" in prefixes:  # a root mirror: the whole registry
        return "^"
    # Only "." of a repository name's characters is special, here as in glob_regex; plain groups
    # read the same in Python (SQLite) and PostgreSQL.
    return "^(" + "|".join(prefix.replace(".", r"\.") for prefix in prefixes) + ")(/.*)?$"


@dataclass(frozen=True)
class Policies:
    retention: tuple[RetentionRule, ...] = ()
    immutable: tuple[ImmutableRule, ...] = ()
    quotas: tuple[QuotaRule, ...] = ()
    exempt: tuple[str, ...] = ()  # prefixes of pull-through caches, where no rule applies

    @classmethod
    def from_config(cls, retention: Sequence[Mapping[str, Any]], immutable: Sequence[Mapping[str, Any]],
                    quotas: Sequence[Mapping[str, Any]], exempt: Sequence[str] = ()) -> Policies:
        return cls(tuple(retention_rule(i, e) for i, e in enumerate(retention)),
                   tuple(immutable_rule(i, e) for i, e in enumerate(immutable)),
                   tuple(quota_rule(i, e) for i, e in enumerate(quotas)), tuple(exempt))

    def exempted(self, repository: str) -> bool:
        return any(not prefix or repository == prefix or repository.startswith(prefix + "/") for prefix in self.exempt)

    @property
    def exempt_regex(self) -> str | None:
        return exempt_regex(self.exempt)

    def retention_for(self, repository: str) -> RetentionRule | None:
        if self.exempted(repository):
            return None
        return next((rule for rule in self.retention if rule.matches(repository)), None)

    def immutable_for(self, repository: str) -> ImmutableRule | None:
        if self.exempted(repository):
            return None
        return next((rule for rule in self.immutable if rule.matches(repository)), None)

    def quota_for(self, repository: str) -> QuotaRule | None:
        if self.exempted(repository):
            return None
        return next((rule for rule in self.quotas if rule.matches(repository)), None)

    def quota_named(self, name: str) -> QuotaRule | None:
        return next((rule for rule in self.quotas if rule.name == name), None)

    @property
    def quota_scope(self) -> str:
        """Which repositories each quota holds depends on every quota glob and their order: a usage
        figure counted under another scope is counted again."""
        spec = json.dumps([[rule.name, rule.repositories] for rule in self.quotas]
                          + ([["exempt", *self.exempt]] if self.exempt else []))
        return hashlib.sha256(spec.encode()).hexdigest()[:32]


_cache: tuple[tuple[Any, Any, Any, Any], Policies] | None = None


def current() -> Policies:
    """The rules of the running configuration (settings.REGISTRY_RETENTION, _IMMUTABLE, _QUOTAS, and
    the prefixes of REGISTRY_PROXIES they leave alone), parsed once per configuration object (the
    cache holds the lists, so identity is enough)."""
    global _cache
    from django.conf import settings

    lists = (settings.REGISTRY_RETENTION, settings.REGISTRY_IMMUTABLE, settings.REGISTRY_QUOTAS,
             settings.REGISTRY_PROXIES)
    cached = _cache
    if cached is not None and all(a is b for a, b in zip(cached[0], lists, strict=True)):
        return cached[1]
    policies = Policies.from_config(*lists[:3], exempt=[entry["prefix"] for entry in lists[3]])
    _cache = (lists, policies)
    return policies
