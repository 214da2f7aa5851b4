"""Delivery: one sender for the whole service, one thread per endpoint, retries with backoff.

Every gunicorn worker (of every replica) starts a thread (gunicorn.conf.py's post_worker_init) that
tries to hold the ``notifications`` lock (registry.locks: a file lock on the filesystem backend, a
database lease on S3) without waiting; the holder sends, the others try again every few seconds, so
when the holder dies another worker takes over. The holder runs one thread per endpoint, so a dead or
slow endpoint delays only its own events. Pushing requests never wait on any of this: they only write
the outbox rows in their own transaction.

Per endpoint the oldest pending events are sent first, up to BATCH in one envelope, and removed only
once the endpoint accepts them (any 2xx or 3xx, as distribution counts it): a crash between sending
and removing sends them again (at least once; receivers deduplicate by event id). A failed attempt
is retried after 1, 2, 4 ... up to MAX_BACKOFF seconds, and the events behind it wait, so the
endpoint sees them in order. An event still undelivered ``max_age_hours`` after it was written
expires: logged with what it reported, and counted.
"""
from __future__ import annotations

import hashlib
import hmac
import http.client
import logging
import os
import random
import ssl
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable
from urllib.parse import urlsplit

from django.db import connection
from django.utils import timezone

from notifications import queries
from notifications.endpoints import Endpoint
from notifications.outbox import COALESCE_PULLS, MEDIA_TYPE, configured
from registry.locks import Held, LockHeld, default_locks
from regsite import db
from regsite.version import version

LOCK = "notifications"
BATCH = 100  # events per envelope: a backlog after an outage goes out in few requests
IDLE_POLL = 1.0  # seconds between looks at an endpoint's queue: the longest an event waits to go
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 300.0
FOLLOWER_POLL = 2.0  # how often a worker that is not sending tries to take over
CHECK_LOCK_EVERY = 15.0  # the holder proves it still holds the lock (a database lease can be lost)
ERROR_PAUSE = 5.0
MAX_ERROR_TEXT = 300
# Events of an endpoint removed from the configuration expire after the default max_age_hours.
UNCONFIGURED_MAX_AGE = timedelta(hours=72)

log = logging.getLogger("notifications")


@dataclass(frozen=True)
class Outcome:
    ok: bool
    error: str = ""


Send = Callable[[Endpoint, bytes], Outcome]


def envelope(payloads: list[str]) -> bytes:
    """The request body: the events' JSON texts as written, in one {"events": [...]} envelope."""
    return ('{"events":[' + ",".join(payloads) + "]}").encode()


def signature(secret: str, body: bytes) -> str:
    """X-Registry-Signature: the HMAC-SHA256 of the exact body bytes, keyed by the endpoint's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post(endpoint: Endpoint, body: bytes) -> Outcome:
    """One POST of an envelope. The error names what failed, never a header value or the secret."""
    parts = urlsplit(endpoint.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"Content-Type": MEDIA_TYPE, "User-Agent": f"svc-registry/{version()}"}
    headers |= dict(endpoint.headers)
    if endpoint.secret:
        headers["X-Registry-Signature"] = signature(endpoint.secret, body)
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname or "", parts.port, timeout=endpoint.timeout_seconds, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=endpoint.timeout_seconds)
    try:
        conn.request("POST", target, body=body, headers=headers)
        response = conn.getresponse()
        excerpt = response.read(MAX_ERROR_TEXT)
    except TimeoutError:
        return Outcome(False, f"no answer within {endpoint.timeout_seconds} s")
    except ssl.SSLError as exc:
        return Outcome(False, f"TLS: {exc.reason or exc}")
    except OSError as exc:
        return Outcome(False, f"cannot connect: {exc.strerror or exc}")
    except http.client.HTTPException as exc:
        return Outcome(False, f"not an HTTP answer: {type(exc).__name__}")
    finally:
        conn.close()
    if 200 <= response.status < 400:
        return Outcome(True)
    text = " ".join(excerpt.decode("utf-8", errors="replace").split())
    return Outcome(False, f"HTTP {response.status} {response.reason}" + (f": {text}" if text else ""))


def backoff(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` failures in a row."""
    return min(FIRST_BACKOFF * 2 ** min(attempts - 1, 30), MAX_BACKOFF)


def deliver_once(endpoint: Endpoint, send: Send = post) -> float:
    """One step for one endpoint: expire what is too old, then, unless backing off, send the oldest
    pending events. Returns how long to wait before the next step."""
    now = timezone.now()
    expire(endpoint.name, now - timedelta(hours=endpoint.max_age_hours))
    state = queries.state(endpoint.name)
    if state.next_attempt_at is not None and state.next_attempt_at > now:
        # Looked at again every IDLE_POLL: `manage.py notifications retry` ends the wait.
        return min(IDLE_POLL, (state.next_attempt_at - now).total_seconds())
    batch = queries.oldest(endpoint.name, BATCH)
    if not batch:
        return IDLE_POLL
    outcome = send(endpoint, envelope([event.payload for event in batch]))
    done = timezone.now()
    if outcome.ok:
        queries.delivered(endpoint.name, [event.id for event in batch], done)
        if state.attempts:
            log.info("notifications: endpoint %s accepts events again, after %d failed attempts",
                     endpoint.name, state.attempts, extra={"endpoint": endpoint.name, "attempts": state.attempts})
        return 0.0
    delay = backoff(state.attempts + 1)
    queries.failed(endpoint.name, outcome.error[:MAX_ERROR_TEXT], done, done + timedelta(seconds=delay))
    log.warning("notifications: sending %d event(s) to endpoint %s (%s) failed, attempt %d: %s; next attempt "
                "in %.0f s", len(batch), endpoint.name, endpoint.shown_url, state.attempts + 1, outcome.error, delay,
                extra={"endpoint": endpoint.name, "events": len(batch), "attempt": state.attempts + 1,
                       "error": outcome.error, "retry_in_seconds": delay})
    return min(IDLE_POLL, delay)


def expire(endpoint: str, written_before: Any) -> int:
    """Remove, log and count the endpoint's events written before ``written_before``."""
    oldest = queries.oldest_time(endpoint)
    if oldest is None or oldest >= written_before:
        return 0
    count = 0
    while gone := queries.expire(endpoint, written_before):
        for pending in gone:
            event = pending.event
            target = event.get("target", {})
            age = timezone.now() - pending.created_at
            log.warning("notifications: event %s expired undelivered to endpoint %s after %s: %s %s%s%s",
                        event.get("id"), endpoint, _age(age),
                        event.get("action"), target.get("repository", ""),
                        f":{target['tag']}" if target.get("tag") else "",
                        f"@{target['digest']}" if target.get("digest") else "",
                        extra={"endpoint": endpoint, "event_id": event.get("id"), "action": event.get("action"),
                               "target": target, "age_hours": round(age.total_seconds() / 3600, 1)})
        count += len(gone)
    return count


def _age(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:.1f} h"


def _serve(endpoint: Endpoint, stop: threading.Event, send: Send) -> None:
    try:
        while not stop.is_set():
            try:
                wait = deliver_once(endpoint, send)
            except Exception:
                log.exception("notifications: endpoint %s: the outbox could not be read or updated", endpoint.name,
                              extra={"endpoint": endpoint.name})
                connection.close_if_unusable_or_obsolete()
                wait = ERROR_PAUSE
            finally:
                db.release()  # a pooled connection goes back between steps
            if wait > 0:
                stop.wait(wait)
    finally:
        connection.close()


def lead(held: Held, stop: threading.Event, endpoints: list[Endpoint] | None = None, send: Send = post) -> None:
    """Send to every endpoint until ``stop`` is set or the lock turns out to be lost."""
    endpoints = configured() if endpoints is None else endpoints
    names = [endpoint.name for endpoint in endpoints]
    log.info("notifications: process %d sends events to %s", os.getpid(), ", ".join(names),
             extra={"endpoints": names})
    threads = [threading.Thread(target=_serve, args=(endpoint, stop, send), daemon=True,
                                name=f"notify-{endpoint.name}") for endpoint in endpoints]
    for thread in threads:
        thread.start()
    try:
        while not stop.wait(CHECK_LOCK_EVERY):
            held.set_note(f"{os.getpid()} {time.time():.0f}")  # LockHeld when a lease was lost
            _expire_unconfigured({endpoint.name for endpoint in endpoints})
            _tidy(names)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        connection.close()


def _tidy(names: list[str]) -> None:
    # Rows an earlier release wrote during a rolling upgrade were not counted; marks older than the
    # coalescing window decide nothing any more.
    queries.recount(names)
    queries.prune_pull_marks(timezone.now() - COALESCE_PULLS)


def _expire_unconfigured(names: set[str]) -> None:
    cutoff = timezone.now() - UNCONFIGURED_MAX_AGE
    for name in set(queries.endpoints_with_events()) - names:
        expire(name, cutoff)


def _run() -> None:
    time.sleep(random.uniform(0.1, 0.5))  # workers start together: let one of them go first
    while True:
        try:
            with default_locks().hold(LOCK) as held:
                lead(held, threading.Event())
        except LockHeld:
            pass
        except Exception:
            log.exception("notifications: the sender stopped; another worker or this one takes over")
        finally:
            connection.close()
        time.sleep(FOLLOWER_POLL)


def start() -> threading.Thread | None:
    """Start this process's sender thread when [[notifications]] endpoints are configured."""
    if not configured():
        return None
    thread = threading.Thread(target=_run, name="notifications", daemon=True)
    thread.start()
    return thread
