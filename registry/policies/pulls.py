"""When each manifest was last pulled: written at most once a minute per manifest.

A manifest GET (by tag or digest; HEAD is an existence check, not a pull) already reads the row, so
it reads the recorded time with it and writes only when that is more than a minute old: a manifest
pulled a thousand times a minute costs one write, and the conditional UPDATE keeps two workers that
both saw an old time from writing twice. A write that cannot be made (the database busy or
read-only) never fails the pull.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone as dt_timezone

from django.db import DatabaseError
from django.utils import timezone

from registry import policy_queries as q

INTERVAL = timedelta(minutes=1)

log = logging.getLogger("registry.pulls")


def _aware(value: datetime | str | None) -> datetime | None:
    if value is None or isinstance(value, str):  # a driver that returns text: write again
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt_timezone.utc)


def record(manifest_id: int, last_pulled: datetime | str | None) -> None:
    """Note a pull of the manifest, given the last-pulled time its row held when it was read."""
    now = timezone.now()
    last = _aware(last_pulled)
    if last is not None and now - last < INTERVAL:
        return
    try:
        q.touch_pulled(manifest_id, now, now - INTERVAL)
    except DatabaseError as exc:
        log.debug("last pulled time of manifest %d not recorded: %s", manifest_id, exc)
