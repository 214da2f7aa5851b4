"""The retention planner: from one repository's tags and manifests, which tags a ``[[retention]]``
rule removes and which manifests the next garbage collection then removes, each with its reason.
Pure: no database, no clock (``now`` is given), so every decision can be tested on its own.

Tags. A tag on a referrer (a manifest whose subject is in the repository: a signature, an SBOM)
follows its subject and is not counted. Every other tag is kept when any clause keeps it: it is
immutable, it matches a ``keep_tags`` expression, it is one of the ``keep_last`` most recently
pushed, or it was pushed or pulled within ``pulled_within_days``. A rule with neither
``keep_last`` nor ``pulled_within_days`` removes no tag.

Manifests. What stays is what the kept tags reach, together with every manifest pushed within
``untagged_after_hours`` (it may belong to a push under way) or pulled within
``pulled_within_days`` (a deployment pinned by digest), and what those reach: the children of an
index, and the referrers of a manifest. Everything else goes: a manifest is never removed while a
kept index lists it, a kept manifest's referrers are never removed, and a removed manifest's
referrers go with it, whatever their age.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterable

from registry.policies.rules import ImmutableRule, RetentionRule


@dataclass(frozen=True)
class TagState:
    id: int
    name: str
    manifest_id: int
    pushed_at: datetime


@dataclass(frozen=True)
class ManifestState:
    id: int
    digest: str
    subject: str  # the subject's digest, or ""
    pushed_at: datetime
    last_pulled_at: datetime | None


@dataclass(frozen=True)
class Snapshot:
    repository: str
    tags: tuple[TagState, ...]
    manifests: tuple[ManifestState, ...]
    children: dict[int, tuple[str, ...]] = field(default_factory=dict)  # index id -> child digests


@dataclass(frozen=True)
class TagRemoval:
    tag: TagState
    last_pulled_at: datetime | None  # of its manifest when planned: a pull since keeps the tag
    reason: str


@dataclass(frozen=True)
class ManifestRemoval:
    manifest: ManifestState
    reason: str


@dataclass(frozen=True)
class ManifestKept:
    """A manifest the removed tags reached that the next collection keeps all the same."""

    manifest: ManifestState
    reason: str
    waiting: bool  # kept only for its age: --delete-untagged removes it (else the rule keeps it)


@dataclass
class Plan:
    rule: RetentionRule
    tags: list[TagRemoval] = field(default_factory=list)
    manifests: list[ManifestRemoval] = field(default_factory=list)
    kept: list[ManifestKept] = field(default_factory=list)


def _age(now: datetime, moment: datetime) -> str:
    seconds = max((now - moment).total_seconds(), 0)
    if seconds < 2 * 3600:
        return f"{int(seconds // 60)} minutes"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} hours"
    return f"{int(seconds // 86400)} days"


class _Repository:
    """Indexes over a snapshot: manifests by id and digest, referrers by subject."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.by_id = {m.id: m for m in snapshot.manifests}
        self.by_digest = {m.digest: m for m in snapshot.manifests}
        self.referrers: dict[str, list[int]] = defaultdict(list)
        for m in snapshot.manifests:
            if m.subject and m.subject != m.digest:
                self.referrers[m.subject].append(m.id)

    def is_referrer(self, manifest_id: int) -> bool:
        """A manifest whose subject is in the repository: it follows that subject."""
        subject = self.by_id[manifest_id].subject
        return bool(subject) and subject in self.by_digest and subject != self.by_id[manifest_id].digest

    def reach(self, roots: Iterable[int]) -> set[int]:
        reached: set[int] = set()
        pending = list(roots)
        while pending:
            mid = pending.pop()
            if mid in reached or mid not in self.by_id:
                continue
            reached.add(mid)
            pending.extend(self.by_digest[d].id for d in self.snapshot.children.get(mid, ()) if d in self.by_digest)
            pending.extend(self.referrers.get(self.by_id[mid].digest, ()))
        return reached


def _pulled_cutoff(rule: RetentionRule, now: datetime) -> datetime | None:
    return now - timedelta(days=rule.pulled_within_days) if rule.pulled_within_days else None


def _untagged_after(rule: RetentionRule, at_most: timedelta | None) -> timedelta:
    """How long an untagged manifest stays: the rule's untagged_after_hours, or less when the
    collection is told to remove untagged manifests older than ``at_most`` (--delete-untagged)."""
    after = timedelta(hours=rule.untagged_after_hours)
    return after if at_most is None else min(after, at_most)


def _young(repo: _Repository, rule: RetentionRule, now: datetime, at_most: timedelta | None) -> set[int]:
    young = now - _untagged_after(rule, at_most)
    return {m.id for m in repo.snapshot.manifests if not repo.is_referrer(m.id) and m.pushed_at >= young}


def _pulled(repo: _Repository, rule: RetentionRule, now: datetime) -> set[int]:
    pulled = _pulled_cutoff(rule, now)
    return {m.id for m in repo.snapshot.manifests if not repo.is_referrer(m.id) and pulled is not None
            and m.last_pulled_at is not None and m.last_pulled_at >= pulled}


def _kept_manifests(repo: _Repository, root_tags: Iterable[TagState], rule: RetentionRule,
                    immutable: ImmutableRule | None, now: datetime, at_most: timedelta | None = None) -> set[int]:
    roots = {tag.manifest_id for tag in root_tags}
    roots |= {tag.manifest_id for tag in repo.snapshot.tags if immutable is not None and immutable.covers(tag.name)}
    return repo.reach(roots | _young(repo, rule, now, at_most) | _pulled(repo, rule, now))


def tag_verdict(tag: TagState, rank: int, last_pulled: datetime | None, rule: RetentionRule,
                immutable: ImmutableRule | None, now: datetime) -> str | None:
    """None when a clause keeps the tag (``rank``: its place among the counted tags, newest push
    first; ``last_pulled``: its manifest's last pull), else why it goes: every clause that did not
    keep it."""
    if immutable is not None and immutable.covers(tag.name):
        return None
    if not rule.removes_tags or rule.kept_by_pattern(tag.name):
        return None
    missed = []
    if rule.keep_last:
        if rank < rule.keep_last:
            return None
        missed.append(f"not among the {rule.keep_last} most recently pushed tags (keep_last = {rule.keep_last}; "
                      f"it is #{rank + 1})")
    pulled = _pulled_cutoff(rule, now)
    if pulled is not None:
        if tag.pushed_at >= pulled or (last_pulled is not None and last_pulled >= pulled):
            return None
        seen = f"last pulled {_age(now, last_pulled)} ago" if last_pulled is not None else "never pulled"
        missed.append(f"neither pushed nor pulled within {rule.pulled_within_days} days (pulled_within_days = "
                      f"{rule.pulled_within_days}; pushed {_age(now, tag.pushed_at)} ago, {seen})")
    return "; ".join(missed)


def referrer_tag_reason(rule: RetentionRule, subject: str) -> str:
    return f"{rule.title}: on a referrer of {subject}, which goes"


def manifest_reason(rule: RetentionRule, now: datetime, pushed_at: datetime, referrer_of: str | None,
                    removed_tags: list[str], doomed_index: str | None) -> str:
    """Why a manifest goes: it is a referrer of ``referrer_of``, its tags ``removed_tags`` go, the
    only indexes listing it go (``doomed_index`` names one), or it is untagged and old."""
    if referrer_of:
        why = f"a referrer of {referrer_of}, which goes"
    elif removed_tags:
        why = f"its tags go ({', '.join(sorted(removed_tags))}), pushed {_age(now, pushed_at)} ago"
    elif doomed_index:
        why = f"listed only by index {doomed_index}, which goes"
    else:
        why = (f"untagged, pushed {_age(now, pushed_at)} ago (untagged_after_hours = "
               f"{rule.untagged_after_hours})")
    return f"{rule.title}: {why}"


def plan(snapshot: Snapshot, rule: RetentionRule, immutable: ImmutableRule | None, now: datetime) -> Plan:
    """The tags the rule removes now, and the manifests the next collection removes after that."""
    repo = _Repository(snapshot)
    result = Plan(rule)
    counted = [t for t in snapshot.tags if t.manifest_id in repo.by_id and not repo.is_referrer(t.manifest_id)]
    counted.sort(key=lambda t: (t.pushed_at, t.id), reverse=True)
    kept: list[TagState] = []
    for rank, tag in enumerate(counted):
        last_pulled = repo.by_id[tag.manifest_id].last_pulled_at
        why = tag_verdict(tag, rank, last_pulled, rule, immutable, now)
        if why is None:
            kept.append(tag)
        else:
            result.tags.append(TagRemoval(tag, last_pulled, f"{rule.title}: {why}"))
    alive = _kept_manifests(repo, kept, rule, immutable, now)
    for tag in snapshot.tags:  # tags of referrers go with their subject
        if tag.manifest_id in repo.by_id and repo.is_referrer(tag.manifest_id) and tag.manifest_id not in alive:
            subject = repo.by_id[tag.manifest_id].subject
            result.tags.append(TagRemoval(tag, repo.by_id[tag.manifest_id].last_pulled_at,
                                          referrer_tag_reason(rule, subject)))
    result.tags.sort(key=lambda r: r.tag.name)
    removed_tags: dict[int, list[str]] = defaultdict(list)
    for removal in result.tags:
        removed_tags[removal.tag.manifest_id].append(removal.tag.name)
    doomed = [m for m in snapshot.manifests if m.id not in alive]
    doomed_ids = {m.id for m in doomed}
    parents: dict[str, list[str]] = defaultdict(list)
    for index_id, children in snapshot.children.items():
        for child in children:
            parents[child].append(repo.by_id[index_id].digest)
    for m in sorted(doomed, key=lambda m: (m.pushed_at, m.digest)):
        listing = [p for p in parents.get(m.digest, ()) if repo.by_digest[p].id in doomed_ids]
        only_doomed = listing[0] if listing and len(listing) == len(parents[m.digest]) else None
        why = manifest_reason(rule, now, m.pushed_at, m.subject if repo.is_referrer(m.id) else None,
                              removed_tags.get(m.id, []), only_doomed)
        result.manifests.append(ManifestRemoval(m, why))
    result.kept = _kept_all_the_same(repo, kept, removed_tags, alive, rule, immutable, now)
    return result


def _kept_all_the_same(repo: _Repository, kept_tags: list[TagState], removed_tags: dict[int, list[str]],
                       alive: set[int], rule: RetentionRule, immutable: ImmutableRule | None,
                       now: datetime) -> list[ManifestKept]:
    """The manifests only removed tags reached that the next collection keeps: pulled within
    pulled_within_days (or reached by one), or younger than untagged_after_hours."""
    immutable_roots = {t.manifest_id for t in repo.snapshot.tags if immutable is not None and immutable.covers(t.name)}
    still_tagged = repo.reach({t.manifest_id for t in kept_tags} | immutable_roots)
    orphaned = repo.reach(removed_tags.keys()) - still_tagged
    pulled = repo.reach(_pulled(repo, rule, now))
    young = _young(repo, rule, now, None)
    return [ManifestKept(m, kept_reason(rule, now, m.pushed_at, m.id in pulled, m.id in young),
                         waiting=m.id not in pulled)
            for m in sorted((repo.by_id[mid] for mid in orphaned & alive), key=lambda m: (m.pushed_at, m.digest))]


def kept_reason(rule: RetentionRule, now: datetime, pushed_at: datetime, pulled: bool, young: bool) -> str:
    """Why a manifest whose tags go stays all the same: it is ``pulled`` (or reached by a manifest
    pulled) within pulled_within_days, else it is ``young`` or reached by a manifest that is."""
    if pulled:
        return (f"{rule.title}: kept: pulled, or reached by a manifest pulled, within {rule.pulled_within_days} "
                f"days (pulled_within_days = {rule.pulled_within_days})")
    hours = f"untagged_after_hours = {rule.untagged_after_hours}"
    if young:
        after = timedelta(hours=rule.untagged_after_hours)
        until = (f"until {(pushed_at + after).isoformat(timespec='minutes').replace('+00:00', 'Z')} "
                 f"(pushed {_age(now, pushed_at)} ago; {hours})")
    else:
        until = f"while a manifest pushed within untagged_after_hours reaches it ({hours})"
    return (f"{rule.title}: stays untagged {until}; garbagecollect --delete-untagged removes it once it is older "
            "than the collection's grace period")


def collectable(snapshot: Snapshot, rule: RetentionRule, immutable: ImmutableRule | None,
                now: datetime, at_most: timedelta | None = None) -> dict[int, str]:
    """What a collection removes under the rule as things stand (no tag removed): id -> digest.
    ``at_most``: untagged manifests older than this go too (--delete-untagged: its grace period),
    unless the rule keeps them by pulls."""
    repo = _Repository(snapshot)
    roots = [t for t in snapshot.tags if t.manifest_id in repo.by_id and not repo.is_referrer(t.manifest_id)]
    alive = _kept_manifests(repo, roots, rule, immutable, now, at_most)
    return {m.id: m.digest for m in snapshot.manifests if m.id not in alive}
