"""The referrers API: manifests in a repository whose ``subject`` is a given digest, a page at a time.

A subject may gather any number of referrers, each with annotations up to the manifest size limit,
so a listing is bounded twice: at most PAGE_SIZE descriptors, and at most PAGE_BYTES of annotations
(a page then ends early; the spec lets a registry page with ``Link: ...; rel="next"``). A
referrer whose annotations alone are over DESCRIPTOR_ANNOTATIONS is listed without them (its own
manifest still has them). Annotations are measured in the database and loaded only for what a page
carries, so the memory of a listing does not depend on what is stored.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, TextField
from django.db.models.functions import Cast, Length

from registry.media_types import OCI_INDEX
from registry.models import Manifest
from registry.services.common import check_name, parse_digest

PAGE_SIZE = 100
PAGE_BYTES = 1024 * 1024
DESCRIPTOR_ANNOTATIONS = 64 * 1024


@dataclass(frozen=True)
class Referrer:
    digest: str
    media_type: str
    artifact_type: str
    size: int
    annotations: dict[str, str] | None  # None: left out, too large for a listing
    created_at: datetime


@dataclass(frozen=True)
class ReferrersPage:
    index: dict[str, Any]
    next_last: str | None  # the digest to continue after, when more follow


def referrer_rows(subject: str, repository_name: str | None = None, repository_id: int | None = None,
                  artifact_type: str | None = None, after: str | None = None,
                  limit: int | None = None, budget: int | None = None) -> tuple[list[Referrer], bool]:
    """Referrers of ``subject`` in creation order after the one whose digest is ``after``; also
    whether more follow. Shared by the API and the UI."""
    limit = PAGE_SIZE if limit is None else limit
    budget = PAGE_BYTES if budget is None else budget
    query = Manifest.objects.filter(subject_digest=subject)
    query = query.filter(repository_id=repository_id) if repository_id is not None else query.filter(
        repository__name=repository_name)
    if artifact_type:
        query = query.filter(artifact_type=artifact_type)
    if after:
        mark = query.filter(digest=after).values_list("created_at", "id").first()
        if mark is None:
            return [], False
        query = query.filter(Q(created_at__gt=mark[0]) | Q(created_at=mark[0], id__gt=mark[1]))
    rows = list(query.order_by("created_at", "id").annotate(notes_size=Length(Cast("annotations", TextField())))
                .values_list("id", "digest", "media_type", "artifact_type", "size", "created_at",
                             "notes_size")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    carried, spent = [], 0
    for row in rows:
        notes_size = row[6] or 0
        if notes_size <= DESCRIPTOR_ANNOTATIONS:
            if spent + notes_size > budget and carried:
                more = True
                break
            spent += notes_size
        carried.append(row)
    wanted = [row[0] for row in carried if (row[6] or 0) <= DESCRIPTOR_ANNOTATIONS]
    notes = dict(Manifest.objects.filter(id__in=wanted).values_list("id", "annotations")) if wanted else {}
    return [Referrer(digest, media_type, kind, size, notes.get(pk) if pk in notes else None, created)
            for pk, digest, media_type, kind, size, created, _ in carried], more


def referrers(name: str, digest_text: str, artifact_type: str | None = None,
              last: str | None = None) -> ReferrersPage:
    """A page of the OCI image index of the referrers; empty (never an error) for an unknown digest
    or name."""
    check_name(name)
    digest = parse_digest(digest_text)
    after = str(parse_digest(last)) if last else None
    found, more = referrer_rows(str(digest), repository_name=name, artifact_type=artifact_type, after=after)
    manifests = []
    for ref in found:
        descriptor: dict[str, Any] = {"mediaType": ref.media_type, "digest": ref.digest, "size": ref.size}
        if ref.artifact_type:
            descriptor["artifactType"] = ref.artifact_type
        if ref.annotations:
            descriptor["annotations"] = ref.annotations
        manifests.append(descriptor)
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    return ReferrersPage(index, found[-1].digest if more and found else None)
