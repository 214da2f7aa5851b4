"""Every database read the UI makes. Lists are paginated in the database and per-row figures are
computed for the rows of one page only, so a page costs the same few queries with 10 or 10,000
repositories. Manifest bodies are loaded only where a page needs them (one manifest, index rows).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Max, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce, Greatest

from ops.ui.manifests import summarize
from registry import queries as shared
from registry.digests import is_digest_like
from registry.media_types import IMAGE_CONFIG_TYPES, INDEX_TYPES
from registry.models import Blob, BlobLink, Manifest, ManifestReference, Tag
from registry.policies.immutable import immutable_tags
from registry.queries import byte_order, visible_names
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


@dataclass(frozen=True)
class RepositoryRow:
    name: str
    tags: int
    size: int
    last_push: datetime | None


@dataclass(frozen=True)
class RepositoryInfo:
    id: int
    name: str
    created_at: datetime
    tags: int
    manifests: int
    size: int
    last_push: datetime | None


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
    """Totals and the latest pushes, of the repositories ``visible`` holds (those the viewer may read)."""
    within = visible_names(visible, "repository__name")
    tags = Tag.objects.all() if within is None else Tag.objects.filter(within)
    recent = (
        tags.order_by("-updated_at", "-id")
        .values_list("repository__name", "name", "manifest__digest", "manifest__media_type", "updated_at")
    )
    if within is None:
        blobs = shared.blob_totals()
        count, size = blobs.blobs, blobs.size
    else:
        linked = Blob.objects.filter(id__in=BlobLink.objects.filter(within).values("blob_id"))
        totals = linked.aggregate(count=Count("id"), size=Sum("size"))
        count, size = totals["count"], totals["size"] or 0
    repositories = shared.with_content()
    return Overview(
        repositories=(repositories if within is None else repositories.filter(visible_names(visible))).count(),
        tags=tags.count(),
        manifests=(Manifest.objects.all() if within is None else Manifest.objects.filter(within)).count(),
        blobs=count,
        stored_bytes=size,
        recent=[RecentTag(*row) for row in recent[:RECENT_TAGS]],
    )


def _last_push() -> Any:
    """The later of the newest manifest and the newest tag move: both are pushes."""
    newest_manifest = Subquery(
        Manifest.objects.filter(repository=OuterRef("pk")).order_by("-created_at").values("created_at")[:1]
    )
    newest_tag = Subquery(
        Tag.objects.filter(repository=OuterRef("pk")).order_by("-updated_at").values("updated_at")[:1]
    )
    return Greatest(Coalesce(newest_tag, newest_manifest), newest_manifest)


def repositories(search: str, page_number: Any, sort: str = "name",
                 visible: Visible = EVERYTHING) -> tuple[Page, list[RepositoryRow]]:
    query = shared.with_content()
    condition = visible_names(visible)
    if condition is not None:
        query = query.filter(condition)
    if search:
        query = query.filter(name__icontains=search)
    if sort == "recent":
        query = query.annotate(last=_last_push()).order_by(F("last").desc(nulls_last=True), "name")
    else:
        query = query.alias(key=byte_order("name")).order_by("key")
    page = Paginator(query.values_list("id", "name"), PAGE_SIZE).get_page(page_number)
    ids = [row[0] for row in page.object_list]
    stats = _repository_stats(ids)
    rows = [RepositoryRow(name, *stats.get(pk, (0, 0, None))) for pk, name in page.object_list]
    return page, rows


def _repository_stats(ids: list[int]) -> dict[int, tuple[int, int, datetime | None]]:
    """(tag count, linked blob bytes, last push) for each repository id."""
    if not ids:
        return {}
    tags = {
        r["repository_id"]: (r["n"], r["last"])
        for r in Tag.objects.filter(repository_id__in=ids).values("repository_id")
        .annotate(n=Count("id"), last=Max("updated_at")).order_by()
    }
    pushed = dict(
        Manifest.objects.filter(repository_id__in=ids).values("repository_id")
        .annotate(last=Max("created_at")).order_by().values_list("repository_id", "last")
    )
    sizes = dict(
        BlobLink.objects.filter(repository_id__in=ids).values("repository_id")
        .annotate(total=Sum("blob__size")).order_by().values_list("repository_id", "total")
    )
    stats = {}
    for pk in ids:
        count, tag_moved = tags.get(pk, (0, None))
        moments = [m for m in (tag_moved, pushed.get(pk)) if m is not None]
        stats[pk] = (count, sizes.get(pk) or 0, max(moments) if moments else None)
    return stats


def repository(name: str) -> RepositoryInfo:
    repo = get_repository(name)
    count, size, last = _repository_stats([repo.id])[repo.id]
    manifests = Manifest.objects.filter(repository_id=repo.id).count()
    return RepositoryInfo(repo.id, repo.name, repo.created_at, count, manifests, size, last)


def tags(repo: RepositoryInfo, page_number: Any, sort: str = "recent") -> tuple[Page, list[TagRow]]:
    query = Tag.objects.filter(repository_id=repo.id)
    if sort == "name":
        query = query.alias(key=byte_order("name")).order_by("key")
    else:
        query = query.order_by("-updated_at", "-id")
    columns = ("name", "updated_at", "manifest_id", "manifest__digest", "manifest__media_type",
               "manifest__artifact_type", "manifest__size", "manifest__last_pulled_at")
    page = Paginator(query.values_list(*columns), PAGE_SIZE).get_page(page_number)
    manifest_ids = {row[2] for row in page.object_list}
    sizes = content_sizes(repo.id, manifest_ids)
    platforms = _platforms(manifest_ids)
    fixed = immutable_tags(repo.name, [row[0] for row in page.object_list])
    rows = [
        TagRow(name, digest, media_type, artifact_type(kind), sizes.get(mid, size), platforms.get(mid, []),
               pushed, pulled, name in fixed)
        for name, pushed, mid, digest, media_type, kind, size, pulled in page.object_list
    ]
    return page, rows


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


def untagged(repo: RepositoryInfo) -> tuple[int, list[UntaggedRow]]:
    """Manifests no tag points to (index children, referrers, images whose tag moved on)."""
    query = Manifest.objects.filter(repository_id=repo.id, tags__isnull=True)
    total = query.count()
    rows = list(
        query.order_by("-created_at", "-id").values_list(
            "id", "digest", "media_type", "artifact_type", "subject_digest", "size", "created_at", "last_pulled_at"
        )[:UNTAGGED_LIMIT]
    )
    digests = [row[1] for row in rows]
    children = set(
        ManifestReference.objects.filter(
            manifest__repository_id=repo.id, kind=ManifestReference.MANIFEST, digest__in=digests
        ).values_list("digest", flat=True)
    ) if digests else set()
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
    """Digests of the indexes in this repository that list this manifest."""
    return list(
        ManifestReference.objects.filter(
            manifest__repository_id=info.repository_id, kind=ManifestReference.MANIFEST, digest=info.digest
        ).values_list("manifest__digest", flat=True)[:50]
    )


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
