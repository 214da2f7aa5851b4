"""Password logins, slowed down per client address, never locked per user.

A hard lockout per user after N failures is a lever for anyone to keep that user out (behind a
reverse proxy, every client has the proxy's address), including out of revoking a leaked token.
So failures are counted per client address, whatever usernames it tries (password spraying is
slowed as much as guessing one password): an address may fail ``[auth] login_failures`` times
freely; then it must wait 60 s after its last failure, twice as long after each further one, up
to ``[auth] login_backoff_max``. A right password from the address does not count, and resets
nothing, so that signing in to one's own account does not reset a guessing run. An address's failures are
forgotten after a day without one. An IPv6 client counts as its whole /64, which one host holds.

Failures against one user from many addresses (a guessing attack spread over addresses) cannot be
slowed without locking the user out, so they are noticed instead: logged, and counted in
``registry_auth_distributed_failures_total`` (tokens.login records it on the request).

The count lives in the database, so every worker and replica shares it, and a password check
takes a place before it runs (an atomic update of the address's row): an address may have as many
checks running as failures it has left, so 200 wrong guesses sent at once get exactly
``login_failures`` answers, the rest 429, while 200 right passwords sent at once all get in (the
ones beyond the allowance wait for running checks to end instead of being refused). The wait is
checked before the success cache: otherwise a waiting guesser would learn which guess was right
from the one answer that is not a 429.
"""
from __future__ import annotations

import ipaddress
import logging
import math
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from django.conf import settings
from django.utils import timezone

from tokens import directory, external, htpasswd, queries

log = logging.getLogger(__name__)

FIRST_WAIT = timedelta(seconds=60)
FORGET_AFTER = timedelta(days=1)
# A user failing from this many addresses within the window is under a spread-out attack.
SPREAD_ADDRESSES = 5
SPREAD_WINDOW = timedelta(minutes=10)
# How long a login waits for checks of its address already running (a bcrypt run takes up to a
# few hundred milliseconds), how often it looks, and when a place held by a dead process lapses.
QUEUE_WAIT = 10.0
QUEUE_POLL = 0.05
PENDING_LAPSE = timedelta(seconds=30)


NONE: frozenset[str] = frozenset()


class Throttled(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many failed logins; retry after {retry_after} seconds")
        self.retry_after = retry_after


@dataclass(frozen=True)
class Login:
    ok: bool
    distributed: bool = False  # a failure against a user failing from many addresses
    source: str = "htpasswd"  # which identity source checked the password: htpasswd or ldap
    groups: frozenset[str] = frozenset()  # the groups the source gave (the directory's)


@lru_cache(maxsize=4096)
def throttle_key(address: str) -> str:
    """What failures are counted by: the address, or an IPv6 address's /64."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if parsed.version == 6:
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def delay(failures: int) -> timedelta:
    """How long an address must wait after its last failure, having failed this many times."""
    free = settings.AUTH_LOGIN_FAILURES
    if failures < free:
        return timedelta(0)
    doublings = min(failures - free, 32)
    return min(FIRST_WAIT * 2 ** doublings, timedelta(seconds=settings.AUTH_LOGIN_BACKOFF_MAX))


def _forget_after() -> timedelta:
    return max(FORGET_AFTER, 2 * timedelta(seconds=settings.AUTH_LOGIN_BACKOFF_MAX))


def _wait(until: datetime, now: datetime) -> Throttled:
    return Throttled(max(1, math.ceil((until - now).total_seconds())))


def retry_after(address: str) -> int | None:
    """Seconds until the address may try a password again, or None when it may now."""
    now = timezone.now()
    until = queries.login_wait(throttle_key(address), now)
    return _wait(until, now).retry_after if until is not None else None


def verify_password(username: str, password: str, address: str) -> Login:
    """Check a user's password (htpasswd, else the LDAP directory) from a client address; raises
    Throttled while the address must wait, and directory.Unavailable when the directory cannot be
    asked (not counted as a failure)."""
    key, now = throttle_key(address), timezone.now()
    until = queries.login_wait(key, now)
    if until is not None:
        raise _wait(until, now)
    # A name in the htpasswd file is checked there alone: local accounts win (break-glass admins).
    in_directory = directory.configured() and username not in htpasswd.current_file().snapshot().users
    if in_directory:
        known = directory.cached(username, password)
        if known is not None and not external.disabled(username):  # no bind: a push's requests
            return Login(ok=True, source=directory.SOURCE, groups=known.groups)
    elif htpasswd.recently_verified(username, password):
        return Login(ok=True)  # no bcrypt run to reserve: the common case of a push's requests
    _reserve(key)
    try:
        if in_directory:
            found = directory.authenticate(username, password)
            # A user an admin disabled (manage.py disableuser) is refused like a wrong password.
            ok = found is not None and external.signed_in(username, directory.SOURCE, found.groups)
            login = Login(True, source=directory.SOURCE, groups=found.groups if found else NONE)
        else:
            ok, login = htpasswd.check_password(username, password), Login(ok=True)
    except BaseException:  # the check's place is given back without counting as a failure
        queries.finish_login_attempt(key, False, timezone.now(), delay, _forget_after())
        raise
    queries.finish_login_attempt(key, not ok, timezone.now(), delay, _forget_after())
    if ok:
        return login
    return Login(ok=False, distributed=_record_failure(username, key, now))


def _reserve(key: str) -> None:
    """Wait for a place among the address's running checks, briefly: concurrent logins from one
    address (a CI runner's parallel pushes) queue behind each other's bcrypt runs, and are refused
    only when the address must wait or the queue does not move."""
    deadline = time.monotonic() + QUEUE_WAIT
    while True:
        now = timezone.now()
        reservation = queries.reserve_login_attempt(key, now, settings.AUTH_LOGIN_FAILURES, _forget_after(),
                                                    PENDING_LAPSE)
        if reservation.allowed:
            return
        if reservation.until is not None:
            raise _wait(reservation.until, now)
        if time.monotonic() >= deadline:
            raise Throttled(1)
        time.sleep(QUEUE_POLL * (0.5 + random.random()))


def _record_failure(username: str, key: str, now: datetime) -> bool:
    """Keep the failure against the user; True when the user is failing from many addresses."""
    since = now - SPREAD_WINDOW
    queries.forget_user_failures(since)
    queries.forget_login_throttles(now - _forget_after())
    before = queries.addresses_failing_for(username, since, SPREAD_ADDRESSES)
    queries.record_user_failure(username, key, now)
    after = queries.addresses_failing_for(username, since, SPREAD_ADDRESSES)
    if before < SPREAD_ADDRESSES <= after:  # logged as the count reaches the threshold
        log.warning("failed logins for user %r from %d client addresses within %d minutes: a password "
                    "guessing attack spread over addresses? Each address is slowed down on its own; "
                    "the user is not locked out", username[:64], SPREAD_ADDRESSES,
                    SPREAD_WINDOW.seconds // 60)
    return after >= SPREAD_ADDRESSES
