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

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable

from django.db import transaction
from django.utils import timezone

from notifications import context, outbox
from registry import queries as q
from registry.policies.rules import ImmutableRule, RetentionRule, current
from registry.retention import planner
from registry.services import reachability, sweep

Report = Callable[[str], None]


def _silent(_line: str) -> None:
    return None


@dataclass
class Outcome:
    repositories: int = 0
    tags: int = 0
    manifests: int = 0  # the next collection removes them
    waiting: int = 0  # left untagged, kept for their age: --delete-untagged removes them
    kept: int = 0  # left untagged, kept by the rule's pulled_within_days

    def summary(self, dry_run: bool) -> str:
        """Says what the next collection removes only when it removes something."""
        verb = "would remove" if dry_run else "removed"
        parts = [f"retention: {verb} {_count(self.tags, 'tag')} in {_count(self.repositories, 'repository')}"]
        if self.manifests:
            parts.append(f"the next garbage collection removes {_count(self.manifests, 'manifest')}, then the blobs "
                         "only they use that are older than its grace period")
        if self.waiting:
            parts.append(f"{_count(self.waiting, 'manifest')} whose tags go {_stay(self.waiting)} until their rule's "
                         "untagged_after_hours has passed since the push, or garbagecollect --delete-untagged "
                         "removes them")
        if self.kept:
            parts.append(f"{_count(self.kept, 'manifest')} whose tags go {_stay(self.kept)}, pulled within "
                         "pulled_within_days")
        return "; ".join(parts)


def _stay(number: int) -> str:
    return "stays" if number == 1 else "stay"


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


def roots(name: str, now: datetime | None = None, at_most: timedelta | None = None) -> reachability.Roots | None:
    """What keeps the manifests of a repository a rule covers, for a collection; None when no
    rule covers it (planner.collectable's rule, decided a page at a time by services.reachability).
    ``at_most``: untagged manifests older than this go too, unless the rule keeps them by pulls
    (garbagecollect --delete-untagged, with its grace period)."""
    policies = current()
    rule = policies.retention_for(name)
    if rule is None:
        return None
    moment = now or timezone.now()
    immutable = policies.immutable_for(name)
    after = timedelta(hours=rule.untagged_after_hours)
    return reachability.Roots(
        pushed_after=moment - (after if at_most is None else min(after, at_most)),
        pulled_after=moment - timedelta(days=rule.pulled_within_days) if rule.pulled_within_days else None,
        referrers_follow=True,
        immutable=immutable.covers if immutable is not None else None,
    )


ACTOR = "retention"  # who the delete events of removed tags name


def run(dry_run: bool = False, report: Report = _silent, now: datetime | None = None) -> Outcome:
    if not current().retention:
        return Outcome()
    with context.acting_as(ACTOR):
        return _run(dry_run, report, now)


def _run(dry_run: bool, report: Report, now: datetime | None) -> Outcome:
    policies = current()
    outcome = Outcome()
    after = 0
    while page := q.repository_page(after, REPOSITORY_PAGE):
        after = page[-1].id
        for repository in page:
            rule = policies.retention_for(repository.name)
            if rule is not None:
                with q.plan_tables():
                    _Repository(repository, rule, policies.immutable_for(repository.name), now or timezone.now(),
                                report).apply(dry_run, outcome)
    return outcome


REPOSITORY_PAGE = 1000
PAGE = 500  # tags or manifests per statement


class _Repository:
    """One repository's plan, made and carried out a page at a time: the tags it removes and the
    manifests it dooms wait in registry.queries.retention's temporary tables, so that memory
    does not grow with the repository (planner.plan is the same plan over a snapshot in memory)."""

    def __init__(self, repository: q.NamedRepository, rule: RetentionRule, immutable: ImmutableRule | None,
                 now: datetime, report: Report) -> None:
        self.repository, self.rule, self.immutable, self.now, self.report = repository, rule, immutable, now, report
        self.name = repository.name

    def apply(self, dry_run: bool, outcome: Outcome) -> None:
        tags = self._plan_tags()
        doomed = self._doom(without_removed=True)
        if not tags and not doomed:
            return
        if tags:
            self._keep_all_the_same()
        outcome.repositories += 1
        outcome.tags += self._carry_out(dry_run)
        if not dry_run:  # what is collectable now: a tag moved or pulled since the plan keeps its image
            q.clear_doomed()
            self._doom(without_removed=False)
        outcome.manifests += self._report_manifests()
        self._report_kept(outcome)

    def _plan_tags(self) -> int:
        """Rank the counted tags newest first and record the ones the rule removes."""
        planned, rank, last = 0, 0, None
        while page := q.tags_newest_first(self.repository.id, last, PAGE):
            last = page[-1]
            removals = []
            for tag in page:
                if tag.referrer:
                    continue  # follows its subject (_doom)
                if planner.tag_verdict(_state(tag), rank, tag.last_pulled_at, self.rule, self.immutable,
                                       self.now) is not None:
                    removals.append(q.Removal(tag, rank))
                rank += 1
            q.add_removals(removals)
            planned += len(removals)
        return planned

    def _roots(self, without_removed: bool) -> reachability.Roots:
        kept_by = roots(self.name, self.now)
        assert kept_by is not None
        return dataclasses.replace(kept_by, without_removed=without_removed)

    def _doom(self, without_removed: bool) -> int:
        """Record the manifests nothing keeps (once the plan's tags are gone: ``without_removed``),
        and plan the removal of the tags of referrers among them."""
        kept_by, doomed = self._roots(without_removed), 0
        for page in reachability.pages(self.repository.id, kept_by):
            going = reachability.unkept(self.repository.id, page, kept_by)
            q.add_doomed([q.Doomed(n.id, n.digest, n.pushed_at, n.subject if n.referrer else "") for n in going])
            referrers = [n.id for n in going if n.referrer and n.tagged]
            if without_removed and referrers:
                q.add_removals([q.Removal(tag, None) for tag in q.tags_of_manifests(referrers)])
            doomed += len(going)
        return doomed

    def _keep_all_the_same(self) -> None:
        """Record the manifests only the removed tags reach that the next collection keeps all the
        same (planner's ``kept``): no tag reaches them once the plan's are gone, a tag did before,
        and they are not doomed: pulled (or reached by one pulled) or young (or reached by one)."""
        tagged = reachability.Roots(pushed_after=reachability.NEVER, referrers_follow=True,
                                    immutable=self.immutable.covers if self.immutable is not None else None,
                                    without_removed=True)
        by_pulls = dataclasses.replace(tagged, pulled_after=self._roots(True).pulled_after)
        young = self.now - timedelta(hours=self.rule.untagged_after_hours)
        for page in reachability.pages(self.repository.id, tagged):
            untagged = reachability.unkept(self.repository.id, page, tagged)
            doomed = q.doomed_among([n.id for n in untagged])
            alive = [n for n in untagged if n.id not in doomed]
            if not alive:
                continue
            before = q.graph_nodes(self.repository.id, [n.digest for n in alive])
            already = {n.id for n in reachability.unkept(self.repository.id, before,
                                                          dataclasses.replace(tagged, without_removed=False))}
            orphaned = [n for n in alive if n.id not in already]
            not_pulled = {n.id for n in reachability.unkept(self.repository.id, orphaned, by_pulls)}
            q.add_kept([q.Kept(n.id, n.digest, n.pushed_at, n.id not in not_pulled,
                               not n.referrer and n.pushed_at >= young) for n in orphaned])

    def _report_kept(self, outcome: Outcome) -> None:
        last = None
        while page := q.kept_by_push(last, PAGE):
            last = page[-1]
            for k in page:
                why = planner.kept_reason(self.rule, self.now, k.pushed_at, k.pulled, k.young)
                self.report(f"manifest {self.name}@{k.digest}: {why}")
            outcome.kept += sum(k.pulled for k in page)
            outcome.waiting += sum(not k.pulled for k in page)

    def _reason(self, removal: q.Removal) -> str:
        if removal.rank is None:
            return planner.referrer_tag_reason(self.rule, removal.tag.subject)
        why = planner.tag_verdict(_state(removal.tag), removal.rank, removal.tag.last_pulled_at, self.rule,
                                  self.immutable, self.now)
        return f"{self.rule.title}: {why}"

    def _carry_out(self, dry_run: bool) -> int:
        """Remove the planned tags in name order (unless a dry run) and report each; how many went."""
        count, after = 0, ""
        while page := q.removals_by_name(after, sweep.BATCH):
            after = page[-1].tag.name
            removals = [planner.TagRemoval(_state(r.tag), r.tag.last_pulled_at, self._reason(r)) for r in page]
            removed = {r.tag.id for r in removals} if dry_run else _remove_tags(self.name, removals)
            for removal in removals:
                if removal.tag.id in removed:
                    verb = "would remove" if dry_run else "removed"
                    self.report(f"{verb} tag {self.name}:{removal.tag.name}: {removal.reason}")
                else:
                    self.report(f"kept tag {self.name}:{removal.tag.name}: it was moved or pulled after it was planned")
            count += len(removed)
        return count

    def _report_manifests(self) -> int:
        count, last = 0, None
        while page := q.doomed_by_push(last, PAGE):
            last = page[-1]
            names = q.removed_names([d.id for d in page])
            parents: dict[str, list[q.GraphNode]] = {}
            for child, parent in q.index_parents(self.repository.id, [d.digest for d in page]):
                parents.setdefault(child, []).append(parent)
            doomed_parents = q.doomed_among([p.id for listed in parents.values() for p in listed])
            for d in page:
                listing = sorted(parents.get(d.digest, []), key=lambda p: p.id)
                only = listing[0].digest if listing and all(p.id in doomed_parents for p in listing) else None
                why = planner.manifest_reason(self.rule, self.now, d.pushed_at, d.referrer_of or None,
                                              names.get(d.id, []), only)
                self.report(f"the next collection removes manifest {self.name}@{d.digest}: {why}")
            count += len(page)
        return count


def _state(tag: q.TagLine) -> planner.TagState:
    return planner.TagState(tag.id, tag.name, tag.manifest_id, tag.pushed_at)


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
