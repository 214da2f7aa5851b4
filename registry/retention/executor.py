"""Apply the ``[[retention]]`` rules: for each repository a rule covers, plan (retention.planner),
remove the tags the plan names, and report every removal with its rule and clause.

Retention removes tags only. The manifests that are then left to go, and the blobs only they use,
are removed by the garbage collector (services.gc asks ``roots``), with its usual re-checks
under the digest locks. A tag is removed only if it is as it was planned, checked under its row
lock: moved by a push, or its image pulled, since the plan, it stays.

A tag removed by a rule is a delete its users see (a ``docker pull`` of it fails from then on), so
each removal writes a ``delete`` event for [[notifications]] in its transaction, by the actor
"retention", as a tag DELETE does; the collector's removals that follow write none, as in CNCF
distribution.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable

from django.db import transaction
from django.utils import timezone

from notifications import context, outbox
from registry import queries as q
from registry.policies.rules import current
from registry.retention import planner
from registry.services import reachability, sweep

Report = Callable[[str], None]


def _silent(_line: str) -> None:
    return None


@dataclass
class Outcome:
    repositories: int = 0
    tags: int = 0
    manifests: int = 0

    def summary(self, dry_run: bool) -> str:
        verb = "would remove" if dry_run else "removed"
        return (f"retention: {verb} {_count(self.tags, 'tag')} in {_count(self.repositories, 'repository')}; "
                f"the next garbage collection removes {_count(self.manifests, 'manifest')}, then the blobs "
                "only they use")


def _count(number: int, noun: str) -> str:
    if number == 1:
        return f"1 {noun}"
    return f"{number} {noun[:-1] + 'ies' if noun.endswith('y') else noun + 's'}"


def snapshot(repository_id: int, name: str) -> planner.Snapshot:
    children: dict[int, list[str]] = {}
    for index_id, child in q.index_children(repository_id):
        children.setdefault(index_id, []).append(child)
    return planner.Snapshot(
        name,
        tuple(planner.TagState(*row) for row in q.tag_rows(repository_id)),
        tuple(planner.ManifestState(*node) for node in q.manifest_nodes(repository_id)),
        {index_id: tuple(digests) for index_id, digests in children.items()},
    )


def roots(name: str, now: datetime | None = None) -> reachability.Roots | None:
    """What keeps the manifests of a repository a rule covers, for a collection; None when no
    rule covers it (planner.collectable's rule, decided a page at a time by services.reachability)."""
    policies = current()
    rule = policies.retention_for(name)
    if rule is None:
        return None
    moment = now or timezone.now()
    immutable = policies.immutable_for(name)
    return reachability.Roots(
        pushed_after=moment - timedelta(hours=rule.untagged_after_hours),
        pulled_after=moment - timedelta(days=rule.pulled_within_days) if rule.pulled_within_days else None,
        referrers_follow=True,
        immutable=immutable.covers if immutable is not None else None,
    )


def collectable(repository_id: int, name: str, now: datetime | None = None) -> dict[int, str] | None:
    """The manifests a collection may remove from a repository a rule covers (id -> digest); None
    when no rule covers it."""
    kept_by = roots(name, now)
    return None if kept_by is None else reachability.unkept_all(repository_id, kept_by)


ACTOR = "retention"  # who the delete events of removed tags name


def run(dry_run: bool = False, report: Report = _silent, now: datetime | None = None) -> Outcome:
    if not current().retention:
        return Outcome()
    with context.acting_as(ACTOR):
        return _run(dry_run, report, now)


def _run(dry_run: bool, report: Report, now: datetime | None) -> Outcome:
    policies = current()
    outcome = Outcome()
    for repository in q.all_repositories():
        repository_id, name = repository.id, repository.name
        rule = policies.retention_for(name)
        if rule is None:
            continue
        moment = now or timezone.now()
        plan = planner.plan(snapshot(repository_id, name), rule, policies.immutable_for(name), moment)
        if not plan.tags and not plan.manifests:
            continue
        outcome.repositories += 1
        removed = {r.tag.id for r in plan.tags} if dry_run else _remove_tags(name, plan.tags)
        for removal in plan.tags:
            if removal.tag.id in removed:
                verb = "would remove" if dry_run else "removed"
                report(f"{verb} tag {name}:{removal.tag.name}: {removal.reason}")
            else:
                report(f"kept tag {name}:{removal.tag.name}: it was moved or pulled after it was planned")
        outcome.tags += len(removed)
        going = {m.manifest.id for m in plan.manifests}
        if not dry_run and plan.tags:
            going &= set(collectable(repository_id, name, moment) or {})
        for doomed in plan.manifests:
            if doomed.manifest.id in going:
                report(f"the next collection removes manifest {name}@{doomed.manifest.digest}: {doomed.reason}")
        outcome.manifests += len(going)
    return outcome


def _remove_tags(name: str, removals: list[planner.TagRemoval]) -> set[int]:
    removed: set[int] = set()
    for chunk in sweep.chunks(removals):
        planned = {r.tag.id: (r.tag.manifest_id, r.tag.pushed_at, r.last_pulled_at) for r in chunk}
        names = {r.tag.id: r.tag.name for r in chunk}
        with transaction.atomic():
            still = {tag_id for tag_id, *state in q.tags_for_removal(list(planned)) if tuple(state) == planned[tag_id]}
            # In the plan's order, not the database's (PostgreSQL returns rows in any order), so
            # that the delete events of one run arrive in the order the plan lists them.
            unchanged = [r.tag.id for r in chunk if r.tag.id in still]
            q.delete_tags_by_id(unchanged)
            outbox.tags_deleted(name, [names[tag_id] for tag_id in unchanged])
        removed.update(unchanged)
    return removed
