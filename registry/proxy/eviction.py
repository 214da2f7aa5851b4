"""Eviction of a pull-through cache's images not pulled for ``evict_after_days`` ([[proxy]]).

Garbage collection calls this first: the manifests it removes (with their tags) leave their blobs
unreferenced, and the collection's next steps remove those as they remove any other. A manifest
that an index kept here lists stays with it. Each removal re-checks, under the manifests' digest
locks, that nobody pulled it meanwhile; a pull that races it anyway fetches again from the upstream.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterator

from registry import queries
from registry.proxy.mirrors import configured
from registry.services import sweep


@dataclass(frozen=True)
class Stale:
    repository_id: int
    name: str
    manifests: dict[int, str]  # id -> digest
    cutoff: datetime
    days: int


def stale(now: datetime) -> Iterator[Stale]:
    """What each cache would evict now, repository by repository."""
    for mirror in configured():
        if mirror.evict_after is None:
            continue
        cutoff = now - mirror.evict_after
        for (repository_id, name), found in sorted(queries.stale_manifests(mirror.prefix, cutoff).items(),
                                                   key=lambda item: item[0][1]):
            kept_children = queries.listed_by_others(list(found), repository_id)
            doomed = {mid: digest for mid, digest in found.items() if digest not in kept_children}
            if doomed:
                yield Stale(repository_id, name, doomed, cutoff, mirror.evict_after.days)


def evict(found: Stale) -> dict[int, str]:
    """Remove what is still stale of ``found``; what was removed."""
    with sweep.locked(found.manifests.values()):
        still = queries.still_stale(found.repository_id, list(found.manifests), found.cutoff)
        gone = {mid: digest for mid, digest in found.manifests.items() if mid in still}
        for chunk in sweep.chunks(gone):
            queries.delete_manifests(chunk)
    return gone
