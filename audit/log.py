"""Recording an event in the audit log: one row in the database and one JSON log line, once.

Who made it comes from the request being served (bound by audit.middleware): the principal the
authentication middleware found (a user, a token by its owner and hash prefix, a robot), else the
UI's signed-in user, else the name a failed sign-in claimed; outside a request (manage.py) the
actor is ``manage.py``. The client address is the one the request log and the login throttle use
(regsite.forwarded). Writing the row never fails what it records: a database that cannot take it
is logged, and the JSON line is written either way.

Rows older than ``[audit] retention_days`` are removed as events are written, at most once an hour
per process and a bounded batch at a time, as the login throttle forgets old failures: the log
prunes itself on every replica without a scheduler (``manage.py audit --prune`` does it by hand).
"""
from __future__ import annotations

import logging
import random
import time
from contextvars import ContextVar
from dataclasses import asdict
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from audit import queries
from regsite import text
from regsite.forwarded import client_address

log = logging.getLogger("audit")

PRUNE_EVERY = 3600.0  # seconds between prunes in one process
PRUNE_BATCH = 10_000
COMMAND_ACTOR = "manage.py"
MAX_DETAIL = 2000


class Outcome(StrEnum):
    SUCCESS = "success"
    DENIED = "denied"  # refused by the access decision or a rule: a 403, or a read answered as absent
    FAILED = "failed"  # credentials that did not check out
    THROTTLED = "throttled"


class Kind(StrEnum):
    """Who acted, as the audit log names them (tokens.principal.Kind, and the two outside it)."""

    ANONYMOUS = "anonymous"
    USER = "user"
    TOKEN = "token"
    ROBOT = "robot"
    SYSTEM = "system"  # manage.py


_request: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)
_next_prune = time.monotonic() + random.uniform(0, 60)


def bind(request: HttpRequest) -> object:
    """Events written until ``unbind`` (with what this returns) are the request's."""
    return _request.set(request)


def unbind(token: object) -> None:
    _request.reset(token)  # type: ignore[arg-type]


def claim(request: HttpRequest, name: str, kind: Kind = Kind.USER, token: str = "") -> None:
    """Name who a request's credentials claim to be, before they are checked: a failed sign-in is
    recorded under that name."""
    request.audit_claim = (name[:255], kind, token)  # type: ignore[attr-defined]


def _actor(request: HttpRequest | None) -> tuple[str, Kind, str]:
    if request is None:
        return COMMAND_ACTOR, Kind.SYSTEM, ""
    principal = getattr(request, "principal", None)
    if principal is not None and principal.is_authenticated:
        return principal.name, Kind(principal.kind.value), principal.hash_prefix or ""
    viewer = getattr(request, "viewer", None)
    if viewer is not None and getattr(viewer, "username", None):
        return viewer.username, Kind.USER, ""
    claimed = getattr(request, "audit_claim", None)
    if claimed is not None:
        return claimed
    return "", Kind.ANONYMOUS, ""


def _text(value: str, most: int) -> str:
    """What a client sent, as every database and terminal takes it: a NUL or a lone surrogate (a
    claimed username may hold one) written out."""
    if text.problem(value) is None:
        return value[:most]
    return text.printable(value.replace(text.NUL, "\\x00"))[:most]


def record(action: str, *, repository: str = "", reference: str = "", digest: str = "",
           outcome: Outcome = Outcome.SUCCESS, detail: str = "", at: datetime | None = None) -> None:
    request = _request.get()
    actor, kind, token = _actor(request)
    row = queries.EventRow(
        at=at or timezone.now(), actor=_text(actor, 255), actor_kind=kind.value, token=token,
        address=client_address(request) if request is not None and request.META.get("REMOTE_ADDR") else "",
        action=action, repository=_text(repository, 255), reference=_text(reference, 255), digest=_text(digest, 150),
        outcome=outcome.value, detail=_text(detail, MAX_DETAIL),
        request_id=(getattr(request, "request_id", "") or "")[:128] if request is not None else "")
    _log_line(row)
    try:
        queries.add(row)
        _prune_if_due()
    except Exception as exc:  # never fail what is being recorded; the line above has it
        log.error("audit: the event could not be written to the database: %s", exc)


def _log_line(row: queries.EventRow) -> None:
    fields = {key: value for key, value in asdict(row).items() if key != "id" and value != ""}
    fields["at"] = row.at.isoformat().replace("+00:00", "Z")
    who = row.actor or row.actor_kind
    where = row.repository + (f":{row.reference}" if row.reference and row.repository else row.reference)
    log.info("audit: %s %s %s%s", who, row.action, f"{where} " if where else "", row.outcome,
             extra={"audit": fields})


def _prune_if_due() -> None:
    global _next_prune
    now = time.monotonic()
    if now < _next_prune:
        return
    _next_prune = now + PRUNE_EVERY
    if prune() >= PRUNE_BATCH:
        _next_prune = now  # more are due: the next event goes on


def prune(batch: int = PRUNE_BATCH) -> int:
    """Delete up to ``batch`` events older than ``[audit] retention_days``; how many."""
    cutoff = timezone.now() - timedelta(days=settings.AUDIT_RETENTION_DAYS)
    removed = queries.delete_before(cutoff, batch)
    if removed:
        log.info("audit: removed %d events older than %d days", removed, settings.AUDIT_RETENTION_DAYS,
                 extra={"removed": removed})
    return removed


def shown(row: queries.EventRow) -> dict[str, Any]:
    """An event as `manage.py audit --json` and the UI show it."""
    return {**{key: value for key, value in asdict(row).items()}, "at": row.at.isoformat().replace("+00:00", "Z")}
