"""Password logins, slowed down after repeated failures for a user from one address.

After ``LIMIT`` failures within ``WINDOW`` for the same (username, address), further attempts are
refused with a retry delay until the oldest of those failures leaves the window. The failures are
rows in the database, so every gunicorn worker and every replica counts them together. The lockout
is checked before the password, even one in htpasswd's success cache: answering the right password
during a lockout would tell a guesser which guess was right. That costs one indexed query per
password login; a successful one clears the user's failures.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta
from functools import lru_cache

from django.db import connection
from django.utils import timezone

from tokens import htpasswd
from tokens.models import LoginFailure

LIMIT = 10
WINDOW = timedelta(minutes=1)


class Throttled(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many failed logins; retry after {retry_after} seconds")
        self.retry_after = retry_after


def _key(username: str, address: str) -> dict[str, str]:
    return {"username": username[:255], "address": address[:64]}


def _recent_failures(username: str, address: str, now: datetime) -> list[datetime]:
    """The newest failures (at most LIMIT) of the pair within the window, newest first."""
    return list(
        LoginFailure.objects.filter(**_key(username, address), failed_at__gt=now - WINDOW)
        .order_by("-failed_at").values_list("failed_at", flat=True)[:LIMIT]
    )


@lru_cache(maxsize=1)
def _count_sql() -> str:
    # Built once: compiling the ORM query for every Basic-authenticated request was half of a
    # manifest GET's CPU. The index login_failure_key covers it.
    table = connection.ops.quote_name(LoginFailure._meta.db_table)
    return (f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE username = %s AND address = %s "
            f"AND failed_at > %s LIMIT {LIMIT}) AS recent")


def _recent_count(username: str, address: str, now: datetime) -> int:
    """How many of the pair's failures (at most LIMIT) are within the window."""
    key = _key(username, address)
    since = connection.ops.adapt_datetimefield_value(now - WINDOW)
    with connection.cursor() as cursor:
        cursor.execute(_count_sql(), [key["username"], key["address"], since])
        return cursor.fetchone()[0]


def _wait(recent: list[datetime], now: datetime) -> int | None:
    if len(recent) < LIMIT:
        return None
    return max(1, math.ceil((recent[-1] + WINDOW - now).total_seconds()))


def retry_after(username: str, address: str) -> int | None:
    """Seconds until another attempt is allowed, or None when it is allowed now."""
    now = timezone.now()
    return _wait(_recent_failures(username, address, now), now)


def record_failure(username: str, address: str) -> None:
    now = timezone.now()
    LoginFailure.objects.filter(failed_at__lte=now - WINDOW).delete()
    LoginFailure.objects.create(**_key(username, address), failed_at=now)


def verify_password(username: str, password: str, address: str) -> bool:
    """Check an htpasswd user's password; raises Throttled instead while the pair is locked out."""
    now = timezone.now()
    failures = _recent_count(username, address, now)
    if failures >= LIMIT:
        wait = _wait(_recent_failures(username, address, now), now)
        if wait is not None:
            raise Throttled(wait)
    if htpasswd.check_password(username, password):
        if failures:
            LoginFailure.objects.filter(**_key(username, address)).delete()
        return True
    record_failure(username, address)
    return False
