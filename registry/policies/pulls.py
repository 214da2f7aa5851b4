"""When each manifest was last pulled: written at most once a minute per manifest.

A manifest GET (by tag or digest; HEAD is an existence check, not a pull) already reads the row, and
the database tells it in the same query whether a pull was recorded in the last minute
(``ManifestRow.pull_due`` of queries.manifest_by_tag and manifest_by_digest); only when none was is
the time written. A manifest pulled a thousand times a minute costs one write, and the conditional
UPDATE keeps two workers that both read "due" from writing twice. A write that cannot be made (the
database busy or read-only) never fails the pull.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.db import DatabaseError
from django.utils import timezone

from registry import queries

INTERVAL = timedelta(minutes=1)

log = logging.getLogger("registry.pulls")


def record(manifest_id: int, due: bool) -> None:
    """Note a pull of the manifest; ``due``: its row had no pull recorded in the last minute."""
    if not due:
        return
    now = timezone.now()
    try:
        queries.touch_pulled(manifest_id, now, now - INTERVAL)
    except DatabaseError as exc:
        log.debug("last pulled time of manifest %d not recorded: %s", manifest_id, exc)
