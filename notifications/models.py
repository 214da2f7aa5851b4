"""The outbox: events waiting for their endpoint, and each endpoint's delivery state.

An event is written here in the transaction of the change it reports (a push, a delete), once per
endpoint that wants it, so it exists exactly when the change does; it leaves when its endpoint has
accepted it or when it expires. Counters live with the endpoint's state so that /metrics, the UI
and ``manage.py notifications`` read the same numbers from every worker and replica, across restarts.
"""
from __future__ import annotations

from django.db import models
from django.utils import timezone


class PendingEvent(models.Model):
    """One event for one endpoint, sent in ``id`` order (the order the changes were written)."""

    id = models.BigAutoField(primary_key=True)
    endpoint = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    # The event record of CNCF distribution's envelope (id, timestamp, action, target, request,
    # actor, source) as JSON text: encoded once when written, sent as it is.
    payload = models.TextField()

    class Meta:
        indexes = [models.Index(fields=["endpoint", "id"], name="pending_event_order")]


class EndpointState(models.Model):
    """How delivery to one endpoint goes: totals, the current run of failures and when to try next."""

    name = models.CharField(max_length=64, primary_key=True)
    delivered = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)  # delivery attempts (POSTs) that failed
    expired = models.BigIntegerField(default=0)
    attempts = models.IntegerField(default=0)  # consecutive failed attempts; 0 when the last one worked
    next_attempt_at = models.DateTimeField(null=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True)
    last_success_at = models.DateTimeField(null=True)
    # The endpoint's rows in the outbox, kept exact in the transactions that write and remove them
    # (under this row's lock), so that [[notifications]] max_pending is held without counting them;
    # and the events dropped because it was reached. Defaults in the database too: the previous
    # release creates these rows without them.
    pending = models.BigIntegerField(default=0, db_default=0)
    dropped = models.BigIntegerField(default=0, db_default=0)


class PullMark(models.Model):
    """When a pull of one repository and digest last became an event: the pulls of the minute after
    it are that event (a reader pulling in a loop writes one event a minute, not one per pull)."""

    key = models.CharField(max_length=64, primary_key=True)  # SHA-256 of "repository@digest"
    at = models.DateTimeField(db_index=True)
