"""What the pages show of the governance rules: which rules apply to a repository, quota usage,
which tags are immutable. Rules come from the configuration; figures from the quota rows."""
from __future__ import annotations

from dataclasses import dataclass

from registry import queries
from registry.policies import quotas
from registry.policies.rules import ImmutableRule, QuotaRule, RetentionRule, current


@dataclass(frozen=True)
class QuotaFigures:
    rule: QuotaRule
    used: int

    @property
    def limit(self) -> int:
        return self.rule.max_bytes

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.used / self.limit)) if self.limit else 100

    @property
    def full(self) -> bool:
        return self.used >= self.limit


@dataclass(frozen=True)
class RepositoryRules:
    retention: RetentionRule | None
    retention_clauses: list[str]
    immutable: ImmutableRule | None
    quota: QuotaFigures | None
    immutable_count: int = 0  # tags of the repository the immutable rule covers

    @property
    def any(self) -> bool:
        return bool(self.retention or self.immutable or self.quota)


def retention_clauses(rule: RetentionRule) -> list[str]:
    clauses = []
    if rule.keep_last:
        clauses.append(f"keeps the {rule.keep_last} most recently pushed tags")
    if rule.keep_tags:
        clauses.append(f"keeps tags matching {', '.join(rule.keep_tags)}")
    if rule.pulled_within_days:
        clauses.append(f"keeps tags pushed or pulled within {rule.pulled_within_days} days")
    if not rule.removes_tags:
        clauses.append("removes no tags")
    clauses.append(f"untagged manifests go {rule.untagged_after_hours} hours after their push")
    return clauses


def for_repository(name: str) -> RepositoryRules:
    policies = current()
    retention = policies.retention_for(name)
    quota = policies.quota_for(name)
    immutable = policies.immutable_for(name)
    held = sum(1 for tag in queries.tag_names(name, None, None) if immutable.covers(tag)) if immutable else 0
    return RepositoryRules(
        retention, retention_clauses(retention) if retention else [], immutable,
        QuotaFigures(quota, quotas.usage(quota, policies)) if quota else None, held,
    )


def all_quotas() -> list[QuotaFigures]:
    return [QuotaFigures(rule, used) for rule, used in quotas.usage_by_rule().values()]

