"""Which manifests of a repository nothing keeps, a page at a time, in bounded memory.

A manifest is kept when it is a root, when a kept index lists it, or when the manifest it names as
its subject is kept (a signature or an SBOM stays with its image). What makes a root is the
caller's (``Roots``):

- the collector's ``--delete-untagged``: a tag, or a push within the grace period;
- a ``[[retention]]`` rule (registry.retention.executor): for a manifest that is no referrer, a tag,
  a push within ``untagged_after_hours`` or a pull within ``pulled_within_days``; a referrer
  follows its subject and is a root only through an immutable tag.

The database hands out candidates (what it can tell is no root) a page at a time, in push order;
each is decided by walking up from it, to the indexes listing it and to its subject, until a root
or nothing is left. The work and the memory follow the page and its ancestors, not the repository:
loading a repository of a million manifests to walk it down from its tags took gigabytes.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator

from registry import queries
from registry.queries.graph import GraphNode

PAGE = 200
NEVER = datetime(9999, 1, 1, tzinfo=timezone.utc)  # "pulled before this": any pull, or none


@dataclass(frozen=True)
class Roots:
    pushed_after: datetime  # a manifest pushed at or after this is a root
    pulled_after: datetime | None = None  # ... or pulled at or after this
    referrers_follow: bool = False  # a referrer is a root only through an immutable tag
    immutable: Callable[[str], object] | None = None  # true for the tag names that keep what they tag
    without_removed: bool = False  # the tags a retention plan removes count as gone (registry.retention)

    def hold(self, node: GraphNode, tags: Iterable[str] = ()) -> bool:
        """Whether ``node`` (with its tags' names, needed for a tagged referrer) is a root."""
        if self.referrers_follow and node.referrer:
            return self.immutable is not None and any(self.immutable(tag) for tag in tags)
        if node.tagged or node.pushed_at >= self.pushed_after:
            return True
        return self.pulled_after is not None and node.last_pulled_at is not None \
            and node.last_pulled_at >= self.pulled_after

    @property
    def names_tags(self) -> bool:
        return self.referrers_follow and self.immutable is not None


def untagged_roots(cutoff: datetime) -> Roots:
    """The collector's ``--delete-untagged``: what a tag reaches, and what is younger than ``cutoff``."""
    return Roots(pushed_after=cutoff)


def pages(repository_id: int, roots: Roots) -> Iterator[list[GraphNode]]:
    """The repository's candidates a page at a time, in push order (each page read afresh after
    the one before: a caller may delete a page before asking for the next)."""
    after = None
    while page := candidates(repository_id, roots, after):
        after = page[-1]
        yield page


def candidates(repository_id: int, roots: Roots, after: GraphNode | None = None,
               limit: int = PAGE) -> list[GraphNode]:
    """A page of candidates, after ``after`` (the last node of the page before) in push order."""
    pulled_before = roots.pulled_after or NEVER
    return queries.candidate_page(repository_id, after, limit, roots.pushed_after, pulled_before,
                                  roots.referrers_follow, roots.without_removed)


def unkept(repository_id: int, page: list[GraphNode], roots: Roots) -> list[GraphNode]:
    """The manifests of ``page`` that nothing keeps."""
    nodes = {node.id: node for node in page}
    ancestors: dict[int, set[int]] = defaultdict(set)
    kept = _roots_among(page, roots)
    frontier = [node for node in page if node.id not in kept]
    while frontier:
        found = _ancestors(repository_id, frontier, ancestors, roots.without_removed)
        fresh = [node for node in found if node.id not in nodes]
        nodes.update((node.id, node) for node in fresh)
        kept |= _roots_among(fresh, roots)
        frontier = [node for node in fresh if node.id not in kept]
    changed = True
    while changed:  # kept when one of its ancestors is: the walked graph is small
        changed = False
        for node_id, above in ancestors.items():
            if node_id not in kept and above & kept:
                kept.add(node_id)
                changed = True
    return [node for node in page if node.id not in kept]


def _roots_among(nodes: list[GraphNode], roots: Roots) -> set[int]:
    named = [node.id for node in nodes if node.tagged and node.referrer] if roots.names_tags else []
    tags = queries.tag_names_of(named) if named else {}
    return {node.id for node in nodes if roots.hold(node, tags.get(node.id, ()))}


def _ancestors(repository_id: int, nodes: list[GraphNode], ancestors: dict[int, set[int]],
               without_removed: bool) -> list[GraphNode]:
    """The indexes listing ``nodes`` and the subjects they name, recorded in ``ancestors``."""
    by_digest = {node.digest: node.id for node in nodes}
    found: list[GraphNode] = []
    for child, parent in queries.index_parents(repository_id, list(by_digest), without_removed):
        ancestors[by_digest[child]].add(parent.id)
        found.append(parent)
    naming: dict[str, list[int]] = defaultdict(list)
    for node in nodes:
        if node.referrer:
            naming[node.subject].append(node.id)
    for subject in queries.graph_nodes(repository_id, list(naming), without_removed) if naming else []:
        for node_id in naming[subject.digest]:
            ancestors[node_id].add(subject.id)
        found.append(subject)
    return list({node.id: node for node in found}.values())


def unkept_all(repository_id: int, roots: Roots) -> dict[int, str]:
    """Every manifest of the repository nothing keeps (id -> digest), for callers that need the
    whole set; its size is what goes, not the repository's."""
    return {node.id: node.digest for page in pages(repository_id, roots)
            for node in unkept(repository_id, page, roots)}
