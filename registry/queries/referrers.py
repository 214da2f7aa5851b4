"""Referrers: manifests whose subject is a given digest, read a page at a time, with the size of
their annotations measured in the database so that only what a page carries is loaded."""
from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Q, TextField
from django.db.models.functions import Cast, Length

from registry.models import Manifest


class ReferrerRow(NamedTuple):
    id: int
    digest: str
    media_type: str
    artifact_type: str
    size: int
    created_at: datetime
    annotations_size: int  # characters of its annotations as JSON


def referrer_rows(subject: str, repository: str, artifact_type: str | None, after: str | None,
                  limit: int) -> list[ReferrerRow]:
    """At most ``limit`` referrers of ``subject`` in the repository, in creation order, after the
    referrer whose digest is ``after`` (none when that is not one)."""
    query = Manifest.objects.filter(subject_digest=subject, repository__name=repository)
    if artifact_type:
        query = query.filter(artifact_type=artifact_type)
    if after:
        marks = list(query.filter(digest=after).values_list("created_at", "id")[:1])  # unordered: no sort
        if not marks:
            return []
        mark = marks[0]
        query = query.filter(Q(created_at__gt=mark[0]) | Q(created_at=mark[0], id__gt=mark[1]))
    rows = (query.order_by("created_at", "id").annotate(notes_size=Length(Cast("annotations", TextField())))
            .values_list("id", "digest", "media_type", "artifact_type", "size", "created_at", "notes_size"))
    return [ReferrerRow(*row[:6], row[6] or 0) for row in rows[:limit]]


def annotations_of(manifest_ids: list[int]) -> dict[int, dict[str, Any]]:
    if not manifest_ids:
        return {}
    return dict(Manifest.objects.filter(id__in=manifest_ids).values_list("id", "annotations"))
