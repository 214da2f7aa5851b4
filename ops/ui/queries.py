"""Every database read the UI makes. Lists are paginated in the database and per-row figures are
computed for the rows of one page only, so a page costs the same few queries with 10 or 10,000
repositories. Manifest bodies are loaded only where a page needs them (one manifest, index rows).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Callable, Iterable

from django.db import connection
from django.db.models import Max, OuterRef, Q, Subquery

from ops.ui import seek, tallies
from ops.ui.manifests import summarize
from registry import queries as shared
from registry.digests import is_digest_like
from registry.media_types import IMAGE_CONFIG_TYPES, INDEX_TYPES
from registry.models import Blob, Manifest, ManifestReference, Tag
from registry.names import is_valid_name, is_valid_tag
from registry.policies.immutable import immutable_tags
from registry.queries import byte_order, keyset, visible_names
from registry.services.common import check_tag, get_repository, parse_digest
from registry.services.exceptions import ManifestUnknown
from registry.services.referrers import referrer_rows
from registry.visibility import EVERYTHING, Visible

PAGE_SIZE = 50
RECENT_TAGS = 10
UNTAGGED_LIMIT = 100
REFERRERS_LIMIT = 200
# Index bodies are parsed for their platforms; a pathological index bigger than this is not.
MAX_INDEX_BODY = 256 * 1024


@dataclass(frozen=True)
class RecentTag:
    repository: str
    tag: str
    digest: str
    media_type: str
    pushed_at: datetime


@dataclass(frozen=True)
class Overview:
    repositories: int
    tags: int
    manifests: int
    blobs: int
    stored_bytes: int
    recent: list[RecentTag]
    counted_at: datetime | None = None  # the totals as counted then (ops.ui.tallies); None: now


@dataclass(frozen=True)
class RepositoryRow:
    name: str
    tags: int
    size: int
    last_push: datetime | None
    counted_at: datetime | None = None  # tags and size as counted then; None: now


@dataclass(frozen=True)
class RepositoryInfo:
    id: int
    name: str
    created_at: datetime
    tags: int
    manifests: int
    size: int
    last_push: datetime | None
    counted_at: datetime | None = None  # tags, manifests and size as counted then; None: now
    untagged: int | None = None  # as counted then, when counted_at is (None: not counted yet)


@dataclass(frozen=True)
class TagRow:
    name: str
    digest: str
    media_type: str
    artifact_type: str
    size: int | None  # None: an index none of whose platforms is stored here (a cache's, not pulled yet)
    platforms: list[str]
    pushed_at: datetime
    last_pulled: datetime | None = None
    immutable: bool = False


@dataclass(frozen=True)
class UntaggedRow:
    digest: str
    media_type: str
    artifact_type: str
    subject: str
    size: int
    created_at: datetime
    index_child: bool
    last_pulled: datetime | None = None


@dataclass(frozen=True)
class Referrer:
    digest: str
    media_type: str
    artifact_type: str
    size: int
    annotations: dict[str, str]
    created_at: datetime


@dataclass(frozen=True)
class ManifestInfo:
    repository: str
    repository_id: int
    digest: str
    media_type: str
    artifact_type: str
    subject: str
    size: int
    created_at: datetime
    body: bytes
    tags: list[str] = field(default_factory=list)
    last_pulled: datetime | None = None


def artifact_type(stored: str) -> str:
    """The stored artifact type, except an image's config type (what the referrers API reports)."""
    return "" if stored in IMAGE_CONFIG_TYPES else stored


def overview(visible: Visible = EVERYTHING) -> Overview:
    """Totals and the latest pushes, of the repositories ``visible`` holds (those the viewer may read).

    The totals are the registry's tally when the viewer sees everything; otherwise they are counted
    over the visible repositories alone (registry.queries.visible_totals: a look at every
    repository's name, then their own rows) and, in a big registry, tallied per set of visible
    names like the registry's, so a page reads the last count."""
    within = visible_names(visible)
    totals = _totals(visible, within)
    tags = Tag.objects.all()
    if within is not None:
        tags = tags.filter(repository_id__in=shared.with_content().filter(within).values("id"))
    recent = (  # tag_recent_idx, newest first
        tags.order_by("-updated_at", "-id")
        .values_list("repository__name", "name", "manifest__digest", "manifest__media_type", "updated_at")
    )
    data = totals.data
    return Overview(
        repositories=data["repositories"], tags=data["tags"], manifests=data["manifests"], blobs=data["blobs"],
        stored_bytes=data["bytes"], recent=[RecentTag(*row) for row in recent[:RECENT_TAGS]],
        counted_at=totals.counted_at,
    )


def _totals(visible: Visible, within: Q | None) -> tallies.Figures:
    """The totals of what ``visible`` (``within``, its condition) holds: the registry's tally when it
    is everything, else a tally of those repositories alone."""
    small = tallies.registry_is_small()
    if within is None:
        return tallies.figures("registry", shared.registry_totals, small)
    return tallies.figures(tallies.visible_key(visible), partial(shared.visible_totals, within), small)


SEARCH_COUNT = 10_000  # matches counted for a search, at most (each costs a look at a name)


def repositories(search: str, after: str = "", before: str = "", sort: str = "name", visible: Visible = EVERYTHING
                 ) -> tuple[keyset.Listing, list[RepositoryRow], datetime | None]:
    """The page of the ``visible`` repositories with content after (or before) a row's cursor
    (ops.ui.seek), their rows, and when the total was counted (None: now; a search counts its
    matches, up to SEARCH_COUNT + 1). Raises seek.BadCursor for a cursor this list never made."""
    query, counted_at = shared.with_content(), None
    within = visible_names(visible)
    if within is not None:
        query = query.filter(within)
    if search:
        query = query.filter(name__icontains=search)
        count = shared.repositories_matching(search, SEARCH_COUNT + 1, within)
    else:
        totals = _totals(visible, within)
        count, counted_at = totals.data["repositories"], totals.counted_at
    if sort == "recent":  # repository_pushed_idx, newest first; then any never pushed
        segments = [keyset.Segment(query.filter(pushed_at__isnull=False).values_list("id", "name", "pushed_at", "id"),
                                 ("-pushed_at", "-id")),
                    keyset.Segment(query.filter(pushed_at__isnull=True).values_list("id", "name", "id"), ("-id",))]
        cursor = seek.cursor_from(after, before, _pushed_cursor)
    else:
        named = query.alias(key=byte_order("name")).values_list("id", "name")
        segments = [keyset.Segment(named, ("key",))]
        cursor = seek.cursor_from(after, before, _name_cursor(is_valid_name))
    page = keyset.listing(segments, cursor, PAGE_SIZE, count, _encode)
    stats = _repository_stats([row[0] for row in page.rows])
    rows = [RepositoryRow(name, stats[pk]["tags"], stats[pk]["bytes"], stats[pk]["pushed"], stats[pk]["counted_at"])
            for pk, name, *_key in page.rows]
    return page, rows, counted_at


NEVER = "none"  # the cursor's moment of a repository never pushed (sorted after the others)


def _encode(segment: int, key: tuple[Any, ...]) -> str:
    """A row's cursor: a name as itself; a moment and an id as "<microseconds>.<id>"."""
    if len(key) == 1 and isinstance(key[0], str):
        return key[0]
    if segment == 1:
        return f"{NEVER}.{key[0]}"
    return f"{seek.moment_text(key[0])}.{key[1]}"


def _pushed_cursor(text: str) -> tuple[int, tuple[Any, ...]]:
    moment, _, pk = text.partition(".")
    return (1, (seek.number_of(pk),)) if moment == NEVER else _moment_cursor(text)


def _name_cursor(valid: Callable[[str], bool]) -> Callable[[str], tuple[int, tuple[Any, ...]]]:
    def parse(text: str) -> tuple[int, tuple[Any, ...]]:
        if not valid(text):
            raise seek.BadCursor(text)
        return 0, (text,)
    return parse


def _repository_stats(ids: list[int]) -> dict[int, dict[str, Any]]:
    """Tags, manifests, linked blob bytes and last push of each repository: counted for the page,
    or, for a repository too big to count on every view, as last counted (its ``counted_at``)."""
    stats = shared.repository_figures(ids)
    for pk, figures in stats.items():
        figures["counted_at"] = None
        if figures["big"]:
            found = tallies.figures(f"repository:{pk}", partial(shared.repository_totals, pk), cheap=False)
            figures |= {**found.data, "counted_at": found.counted_at}
    return stats


def repository(name: str) -> RepositoryInfo:
    repo = get_repository(name)
    stats = _repository_stats([repo.id])[repo.id]
    return RepositoryInfo(repo.id, repo.name, repo.created_at, stats["tags"], stats["manifests"], stats["bytes"],
                          stats["pushed"], stats["counted_at"], stats.get("untagged"))


def tags(repo: RepositoryInfo, after: str = "", before: str = "", sort: str = "recent"
         ) -> tuple[keyset.Listing, list[TagRow]]:
    """The page of the repository's tags after (or before) a row's cursor (ops.ui.seek), newest
    first or by name. Raises seek.BadCursor for a cursor this list never made."""
    columns = ("name", "updated_at", "manifest_id", "manifest__digest", "manifest__media_type",
               "manifest__artifact_type", "manifest__size", "manifest__last_pulled_at")
    # The page's rows in one statement, the index read from the cursor on and a manifest joined to
    # each of its rows (with OFFSET, the ids came first: the join then ran for every row skipped).
    segment: keyset.Segment
    if sort == "name":  # uniq_tag (SQLite), tag_name_bytes (PostgreSQL)
        named = Tag.objects.filter(repository_id=repo.id).alias(key=byte_order("name")).values_list(*columns, "name")
        segment = keyset.Segment(named, ("key",))
        cursor = seek.cursor_from(after, before, _name_cursor(is_valid_tag))
    else:
        segment = _recent_tags(repo.id, columns)
        cursor = seek.cursor_from(after, before, _moment_cursor)
    page = keyset.listing([segment], cursor, PAGE_SIZE, repo.tags, _encode)
    listed = [row[:len(columns)] for row in page.rows]
    manifest_ids = {row[2] for row in listed}
    sizes = content_sizes(repo.id, manifest_ids)
    platforms = _platforms(manifest_ids)
    fixed = immutable_tags(repo.name, [row[0] for row in listed])
    rows = [
        TagRow(name, digest, media_type, artifact_type(kind), sizes.get(mid, size), platforms.get(mid, []),
               pushed, pulled, name in fixed)
        for name, pushed, mid, digest, media_type, kind, size, pulled in listed
    ]
    return page, rows


def _recent_tags(repository_id: int, columns: tuple[str, ...]) -> keyset.Segment:
    """A repository's tags newest first, read from tag_pushed_idx (repository, updated_at, id)."""
    tags = Tag.objects.values_list(*columns, "updated_at", "id")
    if connection.vendor == "postgresql":
        # The repository as a range, in the order, and in the cursor's comparison: only
        # tag_pushed_idx then gives the rows. With "repository_id = n" PostgreSQL drops that key
        # and may read tag_recent_idx, the newest tags of every repository, filtering out the
        # others' (issue 25: all 100,000 of them).
        return keyset.Segment(tags.filter(repository_id__gte=repository_id, repository_id__lte=repository_id),
                            ("-repository_id", "-updated_at", "-id"), fixed=(repository_id,))
    # SQLite starts at the cursor only from an equality on the repository and (updated_at, id);
    # from a range of repositories it reads them from the first.
    return keyset.Segment(tags.filter(repository_id=repository_id), ("-updated_at", "-id"))


def _moment_cursor(text: str) -> tuple[int, tuple[Any, ...]]:
    moment, _, pk = text.partition(".")
    return 0, (seek.moment_of(moment), seek.number_of(pk))


def _references(manifest_ids: Iterable[int]) -> tuple[dict[int, set[str]], dict[int, set[str]]]:
    """The blob digests and the child-manifest digests that each manifest references."""
    blobs: dict[int, set[str]] = defaultdict(set)
    children: dict[int, set[str]] = defaultdict(set)
    rows = ManifestReference.objects.filter(manifest_id__in=list(manifest_ids))
    for pk, digest, kind in rows.values_list("manifest_id", "digest", "kind"):
        (blobs if kind == ManifestReference.BLOB else children)[pk].add(digest)
    return blobs, children


def content_sizes(repository_id: int, manifest_ids: Iterable[int]) -> dict[int, int | None]:
    """Bytes of the distinct blobs each manifest pulls in; for an index, through its children, and
    None when none of them is stored here (a pull-through cache fetches them when first pulled)."""
    ids = list(manifest_ids)
    if not ids:
        return {}
    blobs, children = _references(ids)
    wanted_children = set().union(*children.values())
    child_ids = dict(
        Manifest.objects.filter(repository_id=repository_id, digest__in=wanted_children)
        .values_list("digest", "id")
    ) if wanted_children else {}
    child_blobs = _references(child_ids.values())[0] if child_ids else {}
    owned = {
        pk: blobs[pk].union(*(child_blobs.get(child_ids[d], set()) for d in children[pk] if d in child_ids))
        for pk in ids
    }
    wanted = set().union(*owned.values())
    sizes = dict(Blob.objects.filter(digest__in=wanted).values_list("digest", "size")) if wanted else {}
    return {pk: None if children[pk] and not any(d in child_ids for d in children[pk])
            else sum(sizes.get(d, 0) for d in digests) for pk, digests in owned.items()}


def _platforms(manifest_ids: Iterable[int]) -> dict[int, list[str]]:
    """Platforms of the indexes among ``manifest_ids``, from their (small) bodies."""
    rows = Manifest.objects.filter(
        id__in=list(manifest_ids), media_type__in=sorted(INDEX_TYPES), size__lte=MAX_INDEX_BODY
    ).values_list("id", "media_type", "body")
    return {pk: summarize(bytes(body), media_type).platforms for pk, media_type, body in rows}


UNTAGGED_SCAN = 5_000  # a repository's newest manifests the untagged list looks among


def untagged(repo: RepositoryInfo) -> tuple[int | None, list[UntaggedRow]]:
    """Manifests no tag points to (index children, referrers, images whose tag moved on): how many
    there are (as last counted for a big repository, whose count is a look at every manifest: None
    when never counted), and the newest UNTAGGED_LIMIT of them among the repository's
    UNTAGGED_SCAN newest manifests."""
    total = repo.untagged if repo.counted_at is not None else shared.untagged_count(repo.id)
    newest = Manifest.objects.filter(repository_id=repo.id).order_by("-created_at", "-id")  # manifest_pushed_idx
    # A tag looked up for each manifest of the window: as NOT EXISTS, PostgreSQL hashed every tag of
    # the registry to join them.
    tag = Subquery(Tag.objects.filter(manifest_id=OuterRef("pk")).values("id")[:1])
    query = newest.alias(tag=tag).filter(tag__isnull=True)
    # The window as a range of manifest_pushed_idx from its oldest manifest: as "id IN (the newest
    # UNTAGGED_SCAN)", PostgreSQL read every manifest of the registry to join them (240 ms at 100k).
    oldest = newest.values_list("created_at", "id")[UNTAGGED_SCAN - 1:UNTAGGED_SCAN]
    for created, pk in oldest:
        query = query.filter(Q(created_at__gt=created) | Q(created_at=created, id__gte=pk), created_at__gte=created)
    rows = list(
        query.values_list(
            "id", "digest", "media_type", "artifact_type", "subject_digest", "size", "created_at", "last_pulled_at"
        )[:UNTAGGED_LIMIT]
    )
    children = {child for child, _parent in shared.index_parents(repo.id, [row[1] for row in rows])}
    sizes = content_sizes(repo.id, [row[0] for row in rows])
    return total, [
        UntaggedRow(digest, media_type, artifact_type(kind), subject, sizes.get(pk) or size, created,
                    digest in children, pulled)
        for pk, digest, media_type, kind, subject, size, created, pulled in rows
    ]


def manifest(name: str, reference: str) -> ManifestInfo:
    repo = get_repository(name)
    if is_digest_like(reference):
        row = shared.manifest_by_digest(repo.name, str(parse_digest(reference)))
    else:
        check_tag(reference)
        row = shared.manifest_by_tag(repo.name, reference)
    if row is None:
        raise ManifestUnknown(f"manifest {reference!r} unknown to repository {name!r}")
    details = shared.manifest_details(row.id)
    return ManifestInfo(repo.name, repo.id, row.digest, row.media_type, artifact_type(details.artifact_type),
                        details.subject_digest, row.size, details.created_at, row.body or b"", shared.tags_of(row.id),
                        details.last_pulled_at)


def referrers(info: ManifestInfo) -> list[Referrer]:
    # The API's bounded query: annotations too large for a listing are left out, never loaded.
    rows, _more = referrer_rows(info.digest, info.repository, limit=REFERRERS_LIMIT)
    return [Referrer(r.digest, r.media_type, artifact_type(r.artifact_type), r.size, r.annotations or {},
                     r.created_at) for r in rows]


def parents(info: ManifestInfo) -> list[str]:
    """Digests of the indexes in this repository that list this manifest (at most 50), found from
    the manifest's digest: from the repository's manifests, SQLite read all of a big one's when
    most repositories are tiny (issue 25: 485 ms a page at a million)."""
    return sorted(node.digest for _child, node in shared.index_parents(info.repository_id, [info.digest]))[:50]


def last_pulled(repository_id: int) -> datetime | None:
    """When a client last pulled any manifest of the repository (recorded at most once a minute)."""
    return Manifest.objects.filter(repository_id=repository_id).aggregate(last=Max("last_pulled_at"))["last"]


def present(repository_id: int, digests: Iterable[str]) -> dict[str, int | None]:
    """The content size of each of ``digests`` stored in the repository (the others are absent)."""
    wanted = [d for d in digests if d]
    if not wanted:
        return {}
    ids = dict(
        Manifest.objects.filter(repository_id=repository_id, digest__in=wanted).values_list("id", "digest")
    )
    sizes = content_sizes(repository_id, ids)
    return {digest: sizes.get(pk, 0) for pk, digest in ids.items()}
