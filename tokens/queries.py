"""Every database statement of the tokens app, as named functions returning small typed rows.

The throttle and the token records read as domain code above these. Two statements are written by
hand: ``login_wait``, which runs before every password check (on every Basic-authenticated registry
request), and ``token``, which runs on every request with an API token when tokens are in the
database; compiling the ORM query cost more than running it (figures in the commits that wrote them).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cache
from typing import Any, Callable, Iterable

from django.db import connection, transaction
from django.db.models import Count

from tokens.models import LoginFailure, LoginThrottle, Robot, Token

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


# Failed logins per client address -------------------------------------------------------------

@cache
def _wait_sql() -> str:
    table = connection.ops.quote_name(LoginThrottle._meta.db_table)
    return f"SELECT next_attempt_at FROM {table} WHERE address = %s"


def login_wait(address: str, now: datetime) -> datetime | None:
    """Until when the address must wait before its next password check; None: it need not."""
    with connection.cursor() as cursor:
        cursor.execute(_wait_sql(), [address])
        row = cursor.fetchone()
    if row is None:
        return None
    until = row[0]
    if isinstance(until, str):  # SQLite hands back text from a raw cursor
        until = datetime.fromisoformat(until)
    if until.tzinfo is None:
        until = until.replace(tzinfo=timezone.utc)
    return until if until > now else None


Delay = Callable[[int], timedelta]  # failures so far -> how long the next attempt must wait


@dataclass(frozen=True)
class Reservation:
    """The answer to asking for a password check: ``allowed``; or else ``until`` when the address
    must wait, or neither when checks of the address already running hold its allowance."""

    allowed: bool
    until: datetime | None = None


BUSY = Reservation(False)


def _locked_throttle(address: str) -> LoginThrottle:
    # Insert-or-nothing, then lock: two first attempts from one address cannot both create it.
    LoginThrottle.objects.bulk_create(
        [LoginThrottle(address=address, failures=0, last_failure_at=EPOCH, next_attempt_at=EPOCH)],
        ignore_conflicts=True)
    return LoginThrottle.objects.select_for_update().get(address=address)


def reserve_login_attempt(address: str, now: datetime, free: int, forget: timedelta,
                          stale: timedelta) -> Reservation:
    """Take a place for a password check about to run, atomically. An address may have as many
    checks running as failures it has left before it must wait (one at a time once past them), so
    concurrent guesses never get more checks than the count allows, while concurrent right
    passwords only queue. Callers (threads, workers, replicas) serialise on the address's row."""
    with transaction.atomic():
        row = _locked_throttle(address)
        if row.next_attempt_at > now:
            return Reservation(False, row.next_attempt_at)
        failures = 0 if row.last_failure_at <= now - forget else row.failures
        # A check whose process died never gives its place back: places older than ``stale`` lapse.
        pending = row.pending if row.pending_since is not None and row.pending_since > now - stale else 0
        if pending >= max(free - failures, 1):
            return BUSY
        row.failures, row.pending, row.pending_since = failures, pending + 1, now
        row.save(update_fields=["failures", "pending", "pending_since"])
    return Reservation(True)


def finish_login_attempt(address: str, failed: bool, now: datetime, delay: Delay, forget: timedelta) -> None:
    """Give back the place of a check that ended; a failure counts, and sets the next wait."""
    with transaction.atomic():
        row = _locked_throttle(address)
        row.pending = max(0, row.pending - 1)
        if failed:
            row.failures = (0 if row.last_failure_at <= now - forget else row.failures) + 1
            row.last_failure_at = now
            row.next_attempt_at = now + delay(row.failures)
        row.save(update_fields=["pending", "failures", "last_failure_at", "next_attempt_at"])


def forget_login_throttles(before: datetime) -> int:
    """Delete the rows of addresses whose last failure is older than ``before``."""
    deleted, _ = LoginThrottle.objects.filter(last_failure_at__lt=before).delete()
    return deleted


# Failed logins per user ----------------------------------------------------------------------

def record_user_failure(username: str, address: str, now: datetime) -> None:
    LoginFailure.objects.create(username=username[:255], address=address[:64], failed_at=now)


def addresses_failing_for(username: str, since: datetime, at_most: int) -> int:
    """From how many addresses (counting up to ``at_most``) the user's logins failed since then."""
    addresses = (LoginFailure.objects.filter(username=username[:255], failed_at__gt=since)
                 .values_list("address", flat=True).distinct()[:at_most])
    return len(list(addresses))


def forget_user_failures(before: datetime) -> int:
    deleted, _ = LoginFailure.objects.filter(failed_at__lte=before).delete()
    return deleted


# API tokens (the database backend) -------------------------------------------------------------

@dataclass(frozen=True)
class TokenRow:
    digest: str
    owner: str
    role: str
    description: str
    created_at: datetime
    expires_at: datetime
    owner_stamp: str
    repositories: str = ""  # a JSON list of globs; empty: not limited


_TOKEN_FIELDS = ("digest", "owner", "role", "description", "created_at", "expires_at", "owner_stamp",
                 "repositories")


def _rows(values: Iterable[tuple[Any, ...]]) -> list[TokenRow]:
    return [TokenRow(*row) for row in values]


@cache
def _token_sql() -> str:
    table = connection.ops.quote_name(Token._meta.db_table)
    return f"SELECT {', '.join(_TOKEN_FIELDS)} FROM {table} WHERE digest = %s"


def _moment(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite hands back text from a raw cursor
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def token(digest: str) -> TokenRow | None:
    """The token's row: every request with an API token asks, so the statement is prebuilt (the
    ORM's compiling of it cost more than running it)."""
    with connection.cursor() as cursor:
        cursor.execute(_token_sql(), [digest])
        row = cursor.fetchone()
    if row is None:
        return None
    digest, owner, role, description, created_at, expires_at, owner_stamp, repositories = row
    return TokenRow(digest, owner, role, description, _moment(created_at), _moment(expires_at), owner_stamp,
                    repositories)


def save_token(row: TokenRow) -> None:
    Token.objects.update_or_create(digest=row.digest, defaults={
        "owner": row.owner, "role": row.role, "description": row.description,
        "created_at": row.created_at, "expires_at": row.expires_at, "owner_stamp": row.owner_stamp,
        "repositories": row.repositories})


def stamp_token(digest: str, owner_stamp: str) -> bool:
    """Stamp the token if it is there and unstamped: an UPDATE, so a deleted row stays deleted."""
    return bool(Token.objects.filter(digest=digest, owner_stamp="").update(owner_stamp=owner_stamp))


def delete_token(digest: str) -> bool:
    deleted, _ = Token.objects.filter(digest=digest).delete()
    return bool(deleted)


def tokens(prefix: str = "") -> list[TokenRow]:
    """Every token, or those whose digest starts with ``prefix``, oldest first."""
    rows = Token.objects.filter(digest__startswith=prefix) if prefix else Token.objects.all()
    return _rows(rows.order_by("created_at", "digest").values_list(*_TOKEN_FIELDS))


def tokens_of(owner: str) -> list[TokenRow]:
    """One user's tokens, oldest first: an indexed lookup, whatever the others hold."""
    return _rows(Token.objects.filter(owner=owner).order_by("created_at", "digest").values_list(*_TOKEN_FIELDS))


def live_token_count_of(owner: str, now: datetime) -> int:
    return Token.objects.filter(owner=owner, expires_at__gt=now).count()


def live_tokens_by_role(now: datetime) -> dict[str, int]:
    rows = Token.objects.filter(expires_at__gt=now).values_list("role").annotate(count=Count("digest"))
    return {role: count for role, count in rows}


def delete_tokens_expired_before(moment: datetime) -> int:
    deleted, _ = Token.objects.filter(expires_at__lte=moment).delete()
    return deleted


def token_owners() -> set[str]:
    return set(Token.objects.values_list("owner", flat=True).distinct())


# Robot accounts --------------------------------------------------------------------------------

@dataclass(frozen=True)
class RobotRow:
    name: str
    digest: str
    role: str
    repositories: str  # a JSON list of globs
    description: str
    created_by: str
    created_at: datetime
    expires_at: datetime
    rotated_at: datetime | None
    disabled: bool


_ROBOT_FIELDS = ("name", "digest", "role", "repositories", "description", "created_by", "created_at",
                 "expires_at", "rotated_at", "disabled")


@cache
def _robot_sql() -> str:
    table = connection.ops.quote_name(Robot._meta.db_table)
    return f"SELECT {', '.join(_ROBOT_FIELDS)} FROM {table} WHERE name = %s"


def robot(name: str) -> RobotRow | None:
    """The robot's row: every request a robot makes asks, so the statement is prebuilt."""
    with connection.cursor() as cursor:
        cursor.execute(_robot_sql(), [name])
        row = cursor.fetchone()
    if row is None:
        return None
    name, digest, role, repositories, description, created_by, created_at, expires_at, rotated_at, disabled = row
    return RobotRow(name, digest, role, repositories, description, created_by, _moment(created_at),
                    _moment(expires_at), _moment(rotated_at) if rotated_at is not None else None, bool(disabled))


def robots() -> list[RobotRow]:
    return [RobotRow(*row) for row in Robot.objects.order_by("name").values_list(*_ROBOT_FIELDS)]


def insert_robot(row: RobotRow) -> bool:
    """Create the robot unless one of that name exists; whether it was created."""
    created = Robot.objects.bulk_create([Robot(**{field: getattr(row, field) for field in _ROBOT_FIELDS})],
                                        ignore_conflicts=True)
    return bool(created) and Robot.objects.filter(name=row.name, digest=row.digest).exists()


def set_robot_secret(name: str, digest: str, now: datetime) -> bool:
    return bool(Robot.objects.filter(name=name).update(digest=digest, rotated_at=now))


def set_robot_disabled(name: str, disabled: bool) -> bool:
    return bool(Robot.objects.filter(name=name).update(disabled=disabled))


def delete_robot(name: str) -> bool:
    deleted, _ = Robot.objects.filter(name=name).delete()
    return bool(deleted)
