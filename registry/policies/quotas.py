"""Quotas: the bytes of the distinct blobs linked in the repositories of a ``[[quota]]`` rule.

Usage is a row per rule (registry.models.QuotaUsage) changed only in the transactions that link or
unlink blobs, each holding that row's lock (``SELECT ... FOR UPDATE`` on PostgreSQL; on SQLite the
database's single write lock, which every write transaction takes at BEGIN). So two pushes into one
namespace, on any workers of any replicas, take turns at the moment that matters: one sees the
other's bytes before deciding, and the figure never drifts from what the links say.

- ``charge`` (blobs.link, for uploads and mounts): a blob none of the rule's repositories links yet
  adds its size, or is refused with QuotaExceeded when that would pass the limit.
- ``releasing`` (around every deletion of blob links: garbage collection, blob DELETE, deleterepo,
  scrub): a blob no longer linked anywhere in the rule's repositories gives its size back.
- A row counted under other rules (``scope``: the quota globs changed) is counted again from the
  links, under its lock, the first time it is used; ``reconcile`` (each collection) recounts all.

Locks are taken in one order everywhere: digest locks (services.digest_locks) first, then quota
rows by name, then link rows, so none of these transactions can deadlock another.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from django.db import transaction

from registry import queries as q
from registry.policies.globs import format_size
from registry.policies.rules import Policies, QuotaRule, current
from registry.services.exceptions import QuotaExceeded

log = logging.getLogger("registry.quotas")


def _figures(value: int) -> str:
    return f"{format_size(value)} ({value} bytes)"


def _count(rule: QuotaRule, policies: Policies) -> int:
    # Repositories an earlier rule holds are not this one's, nor are a pull-through cache's.
    earlier = [r.regex for r in policies.quotas[:rule.index]]
    exempt = policies.exempt_regex
    return q.usage_of(rule.regex, earlier + ([exempt] if exempt else []))


def _locked_usage(rule: QuotaRule, policies: Policies) -> int:
    """The rule's usage, its row locked until the transaction ends; counted again if stale."""
    row = q.lock_quota(rule.name)
    if row is None:
        q.create_quota(rule.name)
        row = q.lock_quota(rule.name)
        assert row is not None
    used, scope = row.used, row.scope
    if scope != policies.quota_scope:
        used = _count(rule, policies)
        q.set_quota(rule.name, used, policies.quota_scope)
    return used


def usage(rule: QuotaRule, policies: Policies | None = None) -> int:
    """The rule's usage as last committed (read without a lock)."""
    policies = policies or current()
    row = q.quota_rows().get(rule.name)
    if row is not None and row.scope == policies.quota_scope:
        return row.used
    return _count(rule, policies)


def usage_by_rule() -> dict[str, tuple[QuotaRule, int]]:
    policies = current()
    rows = q.quota_rows()
    out = {}
    for rule in policies.quotas:
        row = rows.get(rule.name)
        used = row.used if row is not None and row.scope == policies.quota_scope else _count(rule, policies)
        out[rule.name] = (rule, used)
    return out


def _counted(rule: QuotaRule, policies: Policies, digest: str) -> bool:
    return any(policies.quota_for(name) is rule for name in q.repositories_linking(digest))


def _limit(rule: QuotaRule) -> str:
    as_written = "" if rule.max_text.strip() == str(rule.max_bytes) else f" ({rule.max_text})"
    return f"{_figures(rule.max_bytes)}{as_written}"


def _refusal(rule: QuotaRule, repository: str, used: int, size: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"quota {rule.title} exceeded: a blob of {_figures(size)} would take {rule.repositories} to "
        f"{_figures(used + size)}, over its limit of {_limit(rule)}; {_figures(used)} are in use",
        {"quota": rule.name, "repository": repository, "limit": rule.max_bytes, "used": used, "size": size},
    )


def charge(repository: str, digest: str, size: int) -> None:
    """Account for linking blob ``digest`` into ``repository``; inside the linking transaction, after
    the digest's lock. Raises QuotaExceeded (the transaction must then roll back)."""
    policies = current()
    rule = policies.quota_for(repository)
    if rule is None:
        return
    used = _locked_usage(rule, policies)
    if _counted(rule, policies, digest):
        return  # already linked in this quota's repositories: it costs nothing more
    if used + size > rule.max_bytes:
        raise _refusal(rule, repository, used, size)
    q.add_quota(rule.name, size)


def precheck(repository: str, digest: str, size: int) -> None:
    """The same decision without the lock, before work that cannot be undone cheaply (copying an
    upload into place in an object store); ``charge`` decides for certain afterwards."""
    policies = current()
    rule = policies.quota_for(repository)
    if rule is None:
        return
    used = usage(rule, policies)
    if used + size > rule.max_bytes and not _counted(rule, policies, digest):
        raise _refusal(rule, repository, used, size)


def check_room(repository: str) -> None:
    """A new upload session into a namespace whose quota is used up is refused at once."""
    policies = current()
    rule = policies.quota_for(repository)
    if rule is None:
        return
    used = usage(rule, policies)
    if used >= rule.max_bytes:
        raise QuotaExceeded(
            f"quota {rule.title} is used up: {rule.repositories} holds {_figures(used)} of its limit of "
            f"{_limit(rule)}; delete images (garbage collection then frees their blobs) or raise max_bytes",
            {"quota": rule.name, "repository": repository, "limit": rule.max_bytes, "used": used, "size": 0},
        )


@contextmanager
def releasing(links: Callable[[], list[q.QuotaLink]]) -> Iterator[None]:
    """Around a deletion of blob links: give back the bytes of the blobs it leaves unlinked in a
    quota's repositories. ``links`` selects the links the deletion may remove (more is fine: a blob
    still linked gives nothing back); it is read before, to lock the quotas concerned, and again
    under their locks, where the links still there are this transaction's to delete and account."""
    policies = current()
    if not policies.quotas:
        yield
        return
    with transaction.atomic():
        rows = links()
        rules = {rule.name: rule for row in rows if (rule := policies.quota_for(row.repository))}
        for name in sorted(rules):
            _locked_usage(rules[name], policies)
        if rules:
            rows = links()
        yield
        for rule in rules.values():
            freed = {row.blob_id: row.size for row in rows if policies.quota_for(row.repository) is rule}
            still = {blob for blob, name in q.repositories_linking_blobs(list(freed))
                     if policies.quota_for(name) is rule}
            given_back = sum(size for blob, size in freed.items() if blob not in still)
            if given_back:
                q.add_quota(rule.name, -given_back)


def reconcile(report: Callable[[str], None] = lambda _line: None) -> int:
    """Count every quota again from the links, under its lock, and forget rows of rules that are
    gone; returns how many figures were wrong (each is logged: nothing should make them so)."""
    policies = current()
    wrong = 0
    for rule in sorted(policies.quotas, key=lambda r: r.name):
        with transaction.atomic():
            recorded = _locked_usage(rule, policies)
            actual = _count(rule, policies)
            if actual != recorded:
                wrong += 1
                log.warning("quota %s: usage recorded as %d bytes, counted %d; corrected",
                            rule.title, recorded, actual)
                q.set_quota(rule.name, actual, policies.quota_scope)
        report(f"quota {rule.title}: {_figures(actual)} used of {_figures(rule.max_bytes)}")
    q.delete_quota_rows_except(rule.name for rule in policies.quotas)
    return wrong
