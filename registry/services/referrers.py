"""The referrers API: manifests in a repository whose ``subject`` is a given digest, a page at a time.

A subject may gather any number of referrers, each with annotations up to the manifest size limit,
so a listing is bounded twice: at most ``[registry] referrers_per_page`` descriptors, and at most
``referrers_page_annotation_bytes`` of annotations (a page then ends early; the spec lets a registry
page with ``Link: ...; rel="next"``). A referrer whose annotations alone are over
``referrer_annotation_bytes`` is listed without them (its own manifest still has them). Annotations
are measured in the database and loaded only for what a page carries, so the memory of a listing
does not depend on what is stored.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from registry import queries, visibility
from registry.media_types import OCI_INDEX
from registry.services.common import check_name, parse_digest

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


def referrer_rows(subject: str, repository: str, artifact_type: str | None = None, after: str | None = None,
                  limit: int | None = None, budget: int | None = None) -> tuple[list[Referrer], bool]:
    """Referrers of ``subject`` in creation order after the one whose digest is ``after``; also
    whether more follow. Shared by the API and the UI."""
    limit = settings.REGISTRY_REFERRERS_PER_PAGE if limit is None else limit
    budget = settings.REGISTRY_REFERRERS_PAGE_ANNOTATION_BYTES if budget is None else budget
    most = settings.REGISTRY_REFERRER_ANNOTATION_BYTES
    rows = [] if visibility.hidden(repository) else queries.referrer_rows(subject, repository, artifact_type, after,
                                                                             limit + 1)
    more = len(rows) > limit
    carried: list[queries.ReferrerRow] = []
    spent = 0
    for row in rows[:limit]:
        if row.annotations_size <= most:
            if spent + row.annotations_size > budget and carried:
                more = True
                break
            spent += row.annotations_size
        carried.append(row)
    notes = queries.annotations_of([row.id for row in carried if row.annotations_size <= most])
    return [Referrer(row.digest, row.media_type, row.artifact_type, row.size, notes.get(row.id), row.created_at)
            for row in carried], more


def referrers(name: str, digest_text: str, artifact_type: str | None = None,
              last: str | None = None) -> ReferrersPage:
    """A page of the OCI image index of the referrers; empty (never an error) for an unknown digest
    or name."""
    check_name(name)
    digest = parse_digest(digest_text)
    after = str(parse_digest(last)) if last else None
    found, more = referrer_rows(str(digest), name, artifact_type=artifact_type, after=after)
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
