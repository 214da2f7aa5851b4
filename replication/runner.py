"""Running the policies: one holder per policy in the whole service, its items in order per tag.

Every gunicorn worker (of every replica) starts a thread (gunicorn.conf.py's post_worker_init) that
tries to hold each policy's lock (registry.locks: a file lock on the filesystem backend, a database
lease on S3) without waiting; a policy's holder runs it, the others try again every few seconds, so
when the holder dies (``kill -9``) another worker takes over from the rows it left. Pushing requests
never wait on any of this: they only write event items in their own transaction.

A holder's loop: start a scheduled run when one is due, gather new event items into a job, list the
items of queued runs (plan), close jobs whose items are all finished (a webhook event says how each
ended), and hand the oldest pending items to ``concurrency`` threads, never two of one tag (nor
anything of a repository beside a deletion by digest or a referrer of it) at once, and never one
before an older one of its tag: a destination sees each tag's changes in the order they were made.

A remote that cannot be reached, or answers 429 or 5xx, makes the whole policy wait 1, 2, 4 ... up
to 300 seconds (the notifications sender's rules) and its items stay pending; any other failure of
an item is retried the same way up to MAX_ATTEMPTS times, then the item is failed (and logged).
"""
from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Callable

from django.db import connection, transaction
from django.utils import timezone

from notifications import context, outbox
from notifications.sender import backoff
from registry.locks import LockHeld, default_locks
from registry.services.exceptions import RegistryError
from regsite import db
from replication import feed, plan, queries
from replication.policies import Policy
from replication.pull import Pull
from replication.push import Push
from replication.queries import ItemRow, JobRow
from replication.remote import Remote, RemoteError
from replication.transfer import Known, Tally, Throttle

IDLE_POLL = 0.5  # seconds between looks at a policy's items: about the longest an event waits
FOLLOWER_POLL = 2.0
WINDOW = 1000  # pending items looked at per step
CLAIM = 1000  # event items gathered into one job at most
PLAN_BATCH = 500
MAX_ATTEMPTS = 5
KEEP_JOBS = 200
JOB_DAYS = 30
TIDY_EVERY = 600.0
SCHEDULE_CHECK = 10.0  # seconds between looks at whether a scheduled run is due
BACKGROUND_NICE = 10

log = logging.getLogger("replication")


def background() -> None:
    """This thread yields the CPU to the worker's request threads (Linux schedules threads apart):
    replication is background work, and a push must not wait on it."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
    except (AttributeError, OSError):
        pass


def lock_name(policy: str) -> str:
    """The registry.locks name of a policy (those allow fewer characters than a policy's name)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", policy.lower()).strip("-")[:32] or "policy"
    return f"replication-{slug}-{hashlib.sha256(policy.encode()).hexdigest()[:8]}"


class Runner:
    """One policy's loop, in the thread that holds its lock."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.remote = Remote(policy)
        self.engine = self.engine_for(policy, self.remote)
        self.pool = ThreadPoolExecutor(policy.concurrency, thread_name_prefix=f"replicate-{policy.name}"[:30],
                                       initializer=background)
        self.running: dict[int, tuple[tuple[str, str | None], Future[None]]] = {}
        self.failing = queries.state(policy.name).attempts > 0
        self.wake = threading.Event()
        self.tidied = 0.0
        self.schedule_checked = 0.0
        self.changed = True  # items finished (or runs planned) since jobs were last closed

    @staticmethod
    def engine_for(policy: Policy, remote: Remote) -> Push | Pull:
        return (Push if policy.direction == "push" else Pull)(
            policy, remote, Throttle(policy.max_bytes_per_second), Known())

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    def resume(self) -> None:
        """Runs whose listing a dead holder cut short are listed again."""
        for job in queries.jobs(self.policy.name, "planning"):
            queries.replan(job.id)
            queries.requeue(job.id)

    def step(self) -> float:
        """One pass; how long to wait before the next. An idle policy costs one small query."""
        name, now = self.policy.name, timezone.now()
        self._reap()
        if self.policy.trigger == "schedule" and time.monotonic() >= self.schedule_checked + SCHEDULE_CHECK:
            self.schedule_checked = time.monotonic()
            self._schedule()
        work = queries.work(name)
        if work.unclaimed and self.policy.trigger == "event":
            self.changed |= queries.claim_events(name, now, CLAIM) is not None
        if work.queued:
            for job in queries.jobs(name, "queued"):
                self.plan(job)
            self.changed = True
        if self.changed:
            self.changed = False
            self._close_jobs()
        if time.monotonic() - self.tidied > TIDY_EVERY:
            self.tidied = time.monotonic()
            queries.prune_jobs(name, now - timedelta(days=JOB_DAYS), KEEP_JOBS)
            queries.prune_uploads(now - timedelta(days=7))
        if self.failing:
            waiting = queries.backoff_until(name)
            if waiting is not None and waiting > now:
                return min(IDLE_POLL, (waiting - now).total_seconds())
        if work.pending or work.unclaimed or work.queued:
            self._dispatch(now)
        return IDLE_POLL

    def busy(self) -> bool:
        return bool(self.running)

    # -- runs ----------------------------------------------------------------------------------------

    def _schedule(self) -> None:
        name = self.policy.name
        if queries.open_job(name, "schedule"):
            return
        last = queries.last_job_time(name, "schedule")
        if last is None or (timezone.now() - last) >= timedelta(minutes=self.policy.schedule_minutes):
            queries.create_job(name, "schedule", timezone.now())

    def plan(self, job: JobRow) -> None:
        """List the items of a queued run; a remote that cannot be listed fails the run."""
        name = self.policy.name
        queries.set_job_state(job.id, "planning", timezone.now())
        batch: list[queries.NewItem] = []
        try:
            for item in plan.items(self.policy, self.remote):
                batch.append(item)
                if len(batch) >= PLAN_BATCH:
                    queries.add_items(batch, timezone.now(), job.id)
                    batch = []
            queries.add_items(batch, timezone.now(), job.id)
        except RemoteError as exc:
            queries.count(name, failures=1)
            log.warning("replication %s: listing what run %d covers failed: %s", name, job.id, exc.message,
                        extra={"policy": name, "job": job.id, "error": exc.message})
            self._ended(queries.fail_job(job.id, exc.message, timezone.now()))
            return
        queries.set_job_state(job.id, "running", None)
        log.info("replication %s: run %d (%s) started", name, job.id, job.trigger,
                 extra={"policy": name, "job": job.id, "trigger": job.trigger})

    def _close_jobs(self) -> None:
        for job_id in queries.jobs_without_pending(self.policy.name):
            with transaction.atomic():
                job = queries.finish_job(job_id, timezone.now())
                if job is not None:
                    self._ended(job)

    def _ended(self, job: JobRow | None) -> None:
        if job is None:
            return
        level = logging.WARNING if job.state == "failed" else logging.INFO
        log.log(level, "replication %s: run %d (%s) %s: %d copied, %d skipped, %d failed, %d bytes%s",
                job.policy, job.id, job.trigger, job.state, job.done, job.skipped, job.failed, job.bytes,
                f": {job.error}" if job.error else "",
                extra={"policy": job.policy, "job": job.id, "state": job.state, "done": job.done,
                       "skipped": job.skipped, "failed": job.failed, "bytes": job.bytes})
        with context.acting_as(f"replication:{job.policy}"):
            outbox.replication_finished(_job_event(self.policy, job))

    # -- items ---------------------------------------------------------------------------------------

    def _reap(self) -> None:
        for item_id in [i for i, (_key, future) in self.running.items() if future.done()]:
            del self.running[item_id]

    def _dispatch(self, now: object) -> None:
        if len(self.running) >= self.policy.concurrency:
            return
        blocked = _Blocked()
        for key, _future in self.running.values():
            blocked.add(key)
        # The items handed out together share one start: when the remote fails them all, that is one
        # attempt of the backoff, however late a loaded pool gets round to running some of them.
        dispatched = timezone.now()
        for item in queries.window(self.policy.name, WINDOW):
            key = (item.repository, item.tag or None)
            if item.id in self.running or blocked.conflicts(key) or (
                    item.next_attempt_at is not None and item.next_attempt_at > timezone.now()):
                blocked.add(key)
                continue
            blocked.add(key)
            self.running[item.id] = (key, self.pool.submit(self._run, item, dispatched))
            if len(self.running) >= self.policy.concurrency:
                return

    def _run(self, item: ItemRow, started: datetime) -> None:
        name = self.policy.name
        tally = Tally()
        try:
            with context.acting_as(f"replication:{name}"):
                outcome = self.engine.run(item, tally)
        except RemoteError as exc:
            if exc.transient:
                self._unreachable(item, exc, tally, started)
            else:
                self._failed(item, exc.message, tally)
        except RegistryError as exc:
            self._failed(item, exc.message, tally)
        except Exception as exc:
            log.exception("replication %s: item %d (%s) failed", name, item.id, _shown(item))
            self._failed(item, f"internal error ({type(exc).__name__})", tally)
        else:
            with transaction.atomic():
                queries.finish_item(item.id, outcome.state, outcome.bytes, outcome.note, timezone.now(),
                                    outcome.digest or item.digest)
                queries.count(name, size=outcome.bytes, items=1 if outcome.state == "done" else 0)
            if self.failing:
                self.failing = False
                attempts = queries.remote_ok(name, timezone.now())
                log.info("replication %s: %s answers again, after %d failed attempts", name, self.policy.remote,
                         attempts, extra={"policy": name, "attempts": attempts})
        finally:
            self.changed = True
            self.wake.set()
            db.release()

    def _unreachable(self, item: ItemRow, exc: RemoteError, tally: Tally, started: datetime) -> None:
        name, now = self.policy.name, timezone.now()
        attempts = queries.state(name).attempts + 1
        delay = max(backoff(attempts), exc.retry_after)
        recorded = queries.remote_failed(name, exc.message, now, started, attempts, now + timedelta(seconds=delay))
        queries.retry_item(item.id, item.attempts, None, exc.message, tally.bytes)
        queries.count(name, size=tally.bytes)
        self.failing = True
        if not recorded:
            return  # an item beside it failed first and logged the attempt
        log.warning("replication %s: %s (%s), attempt %d; next attempt in %.0f s", name, exc.message, _shown(item),
                    attempts, delay, extra={"policy": name, "error": exc.message, "attempt": attempts,
                                            "retry_in_seconds": delay})

    def _failed(self, item: ItemRow, message: str, tally: Tally) -> None:
        name, now = self.policy.name, timezone.now()
        attempts = item.attempts + 1
        self.engine.known.clear()  # what was known to be there may be what failed
        queries.count(name, size=tally.bytes, failures=1)
        if attempts >= MAX_ATTEMPTS:
            queries.retry_item(item.id, attempts, None, message, 0)  # the row shows every attempt made
            queries.finish_item(item.id, "failed", tally.bytes, message, now, item.digest)
            log.error("replication %s: %s failed %d times and is given up: %s", name, _shown(item), attempts, message,
                      extra={"policy": name, "item": item.id, "error": message})
            return
        delay = backoff(attempts)
        queries.retry_item(item.id, attempts, now + timedelta(seconds=delay), message, tally.bytes)
        log.warning("replication %s: %s failed (attempt %d of %d, next in %.0f s): %s", name, _shown(item), attempts,
                    MAX_ATTEMPTS, delay, message, extra={"policy": name, "item": item.id, "error": message})


class _Blocked:
    """Keys (repository, tag) that an item may not run beside; (repository, None), an untagged
    item, stands for the whole repository."""

    def __init__(self) -> None:
        self._tags: dict[str, set[str | None]] = {}

    def add(self, key: tuple[str, str | None]) -> None:
        self._tags.setdefault(key[0], set()).add(key[1])

    def conflicts(self, key: tuple[str, str | None]) -> bool:
        held = self._tags.get(key[0])
        if not held:
            return False
        return key[1] is None or None in held or key[1] in held


def _shown(item: ItemRow) -> str:
    what = f"{item.repository}:{item.tag}" if item.tag else f"{item.repository}@{item.digest}"
    return f"{item.action} {what}"


def _job_event(policy: Policy, job: JobRow) -> dict[str, object]:
    return {"policy": policy.name, "direction": policy.direction, "remote": policy.remote, "job": job.id,
            "trigger": job.trigger, "state": job.state, "copied": job.done, "skipped": job.skipped,
            "failed": job.failed, "bytes": job.bytes, "error": job.error}


# -- the service's threads -----------------------------------------------------------------------------

def lead(policy: Policy, stop: threading.Event, until: Callable[[], bool] = lambda: False) -> None:
    """Run ``policy`` (its lock held) until ``stop`` is set or ``until()`` holds."""
    runner = Runner(policy)
    try:
        runner.resume()
        while not stop.is_set() and not until():
            try:
                wait = runner.step()
            except Exception:
                log.exception("replication %s: a step failed; retrying", policy.name, extra={"policy": policy.name})
                connection.close_if_unusable_or_obsolete()
                wait = 5.0
            finally:
                db.release()
            runner.wake.wait(wait)
            runner.wake.clear()
    finally:
        runner.close()
        connection.close()


def _hold(policy: Policy) -> None:
    background()
    time.sleep(random.uniform(0.1, 0.5))  # workers start together: let one of them go first
    while True:
        try:
            with default_locks().hold(lock_name(policy.name)) as held:
                log.info("replication %s: this process runs it", policy.name, extra={"policy": policy.name})
                stop = threading.Event()
                checker = threading.Thread(target=_check_lease, args=(held, stop), daemon=True)
                checker.start()
                try:
                    lead(policy, stop)
                finally:
                    stop.set()
        except LockHeld:
            pass
        except Exception:
            log.exception("replication %s: its runner stopped; another worker or this one takes over", policy.name)
        finally:
            connection.close()
        time.sleep(FOLLOWER_POLL)


def _check_lease(held: object, stop: threading.Event) -> None:
    """The holder proves it still holds the lock every 15 s (a database lease can be lost)."""
    try:
        while not stop.wait(15.0):
            try:
                held.set_note(f"{time.time():.0f}")  # type: ignore[attr-defined]
            except LockHeld:
                stop.set()
    finally:
        connection.close()


def start() -> list[threading.Thread]:
    """Start this process's threads: one per configured policy, each trying for its lock."""
    threads = []
    for policy in feed.configured():
        thread = threading.Thread(target=_hold, args=(policy,), name=f"replication-{policy.name}"[:30], daemon=True)
        thread.start()
        threads.append(thread)
    return threads
