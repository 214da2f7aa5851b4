"""Password logins, slowed down after repeated failures for a user from one address.

After ``LIMIT`` failures within ``WINDOW`` for the same (username, address), further attempts are
refused with a retry delay until the oldest of those failures leaves the window. The failures are
rows in the database, so every gunicorn worker and every replica counts them together. A password
verified within the last minute (htpasswd's success cache) is accepted without a query, so a push
that sends Basic credentials on every request costs no database round trip for them.
"""
from __future__ import annotations

import math
from datetime import timedelta

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


def retry_after(username: str, address: str) -> int | None:
    """Seconds until another attempt is allowed, or None when it is allowed now."""
    now = timezone.now()
    recent = list(
        LoginFailure.objects.filter(**_key(username, address), failed_at__gt=now - WINDOW)
        .order_by("-failed_at").values_list("failed_at", flat=True)[:LIMIT]
    )
    if len(recent) < LIMIT:
        return None
    return max(1, math.ceil((recent[-1] + WINDOW - now).total_seconds()))


def record_failure(username: str, address: str) -> None:
    now = timezone.now()
    LoginFailure.objects.filter(failed_at__lte=now - WINDOW).delete()
    LoginFailure.objects.create(**_key(username, address), failed_at=now)


def verify_password(username: str, password: str, address: str) -> bool:
    """Check an htpasswd user's password; raises Throttled instead while the pair is locked out."""
    if htpasswd.is_cached(username, password):
        return True
    wait = retry_after(username, address)
    if wait is not None:
        raise Throttled(wait)
    if htpasswd.check_password(username, password):
        LoginFailure.objects.filter(**_key(username, address)).delete()
        return True
    record_failure(username, address)
    return False
