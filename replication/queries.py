"""Named queries of the replication app: jobs, items, the policies' totals, uploads in progress."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Iterable, NamedTuple

from django.db import connection, transaction
from django.db.models import Count, F, Max, Min, Q, Sum

from registry.models import Manifest, Tag
from registry.queries._sql import execute, fetch_all, fetch_one, reader, statement, table
from replication.models import Item, Job, PolicyState, Upload

FINISHED = ("done", "skipped", "failed")
LEFT = "moved locally, left as it is"  # the note of a pull item whose local tag someone else set


class ItemRow(NamedTuple):
    id: int
    job_id: int | None
    action: str
    repository: str
    tag: str
    digest: str
    attempts: int
    next_attempt_at: datetime | None


class JobRow(NamedTuple):
    id: int
    policy: str
    trigger: str
    state: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    done: int
    skipped: int
    failed: int
    bytes: int
    error: str


_JOB_FIELDS = ("id", "policy", "trigger", "state", "created_at", "started_at", "finished_at", "done", "skipped",
               "failed", "bytes", "error")
_ITEM_FIELDS = ("id", "job_id", "action", "repository", "tag", "digest", "attempts", "next_attempt_at")


@dataclass(frozen=True)
class NewItem:
    policy: str
    action: str  # copy, delete
    repository: str
    tag: str = ""
    digest: str = ""


# -- written with the change they report ---------------------------------------------------------

@lru_cache(maxsize=1)
def _insert_sql() -> str:
    q = connection.ops.quote_name
    return (f"INSERT INTO {q(Item._meta.db_table)} (policy, job_id, action, repository, tag, digest, state, "
            f"attempts, bytes, note, created_at) VALUES (%s, %s, %s, %s, %s, %s, 'pending', 0, 0, '', %s)")


def add_items(items: Iterable[NewItem], now: datetime, job_id: int | None = None) -> None:
    """Queue ``items`` (in order), in the caller's transaction: a prebuilt statement, since event
    items are written inside every push's transaction."""
    at = connection.ops.adapt_datetimefield_value(now)
    rows = [(i.policy, job_id, i.action, i.repository, i.tag, i.digest, at) for i in items]
    if rows:
        with connection.cursor() as cursor:
            cursor.executemany(_insert_sql(), rows)


# -- jobs ------------------------------------------------------------------------------------------

def _job(row: Job) -> JobRow:
    return JobRow(*(getattr(row, name) for name in _JOB_FIELDS))


def create_job(policy: str, trigger: str, now: datetime, state: str = "queued") -> int:
    return Job.objects.create(policy=policy, trigger=trigger, state=state, created_at=now,
                              started_at=now if state == "running" else None).id


def claim_events(policy: str, now: datetime, limit: int) -> int | None:
    """Gather (up to ``limit`` of) the policy's event items that have no job into a new running job."""
    if not Item.objects.filter(policy=policy, job__isnull=True).exists():
        return None  # without a transaction: on SQLite one takes the write lock pushes need
    with transaction.atomic():
        ids = list(Item.objects.filter(policy=policy, job__isnull=True).order_by("id")
                   .values_list("id", flat=True)[:limit])
        if not ids:
            return None
        job = create_job(policy, "event", now, state="running")
        Item.objects.filter(policy=policy, job__isnull=True, id__lte=ids[-1]).update(job_id=job)
    return job


def unclaimed(policy: str) -> int:
    """Event items no job has gathered yet."""
    return Item.objects.filter(policy=policy, job__isnull=True).count()


def jobs(policy: str, state: str) -> list[JobRow]:
    return [_job(row) for row in Job.objects.filter(policy=policy, state=state).order_by("id")]


def job(job_id: int) -> JobRow | None:
    row = Job.objects.filter(id=job_id).first()
    return _job(row) if row else None


def set_job_state(job_id: int, state: str, started_at: datetime | None) -> None:
    """planning (its items being listed) or running; ``started_at`` when it starts."""
    changes: dict[str, object] = {"state": state}
    if started_at is not None:
        changes["started_at"] = started_at
    Job.objects.filter(id=job_id).update(**changes)


def requeue(job_id: int) -> None:
    Job.objects.filter(id=job_id).update(state="queued")


def open_job(policy: str, trigger: str) -> bool:
    """Whether a run of the policy by ``trigger`` is queued or going."""
    return Job.objects.filter(policy=policy, trigger=trigger, state__in=("queued", "planning", "running")).exists()


def replan(job_id: int) -> None:
    """Forget the items of a job whose planning was cut short (it is planned again)."""
    Item.objects.filter(job_id=job_id).delete()


def fail_job(job_id: int, error: str, now: datetime) -> JobRow | None:
    Job.objects.filter(id=job_id).update(state="failed", error=error, finished_at=now)
    return job(job_id)


@statement
def _closable_sql() -> str:
    job, item = table(Job), table(Item)
    return (f"SELECT j.id FROM {job} j WHERE j.policy = %s AND j.state = 'running' AND NOT EXISTS "
            f"(SELECT 1 FROM {item} i WHERE i.job_id = j.id AND i.state = 'pending') ORDER BY j.id")


def jobs_without_pending(policy: str) -> list[int]:
    """The policy's running jobs whose items are all finished."""
    return [row[0] for row in fetch_all(_closable_sql(), [policy])]


def finish_job(job_id: int, now: datetime) -> JobRow | None:
    """Close a running job whose items are all finished: its counts, bytes and state."""
    totals = Item.objects.filter(job_id=job_id).aggregate(
        done=Count("id", filter=Q(state="done")), skipped=Count("id", filter=Q(state="skipped")),
        failed=Count("id", filter=Q(state="failed")), bytes=Sum("bytes"))
    state = "failed" if totals["failed"] else "succeeded"
    Job.objects.filter(id=job_id, state="running").update(
        state=state, finished_at=now, done=totals["done"], skipped=totals["skipped"], failed=totals["failed"],
        bytes=totals["bytes"] or 0)
    return job(job_id)


def last_job_time(policy: str, trigger: str) -> datetime | None:
    return Job.objects.filter(policy=policy, trigger=trigger).aggregate(at=Max("created_at"))["at"]


def recent_jobs(policy: str, limit: int) -> list[JobRow]:
    return [_job(row) for row in Job.objects.filter(policy=policy).order_by("-id")[:limit]]


def prune_jobs(policy: str, finished_before: datetime, keep: int) -> int:
    """Remove finished jobs (and their items) of the policy finished before ``finished_before``,
    always keeping its ``keep`` latest."""
    kept = list(Job.objects.filter(policy=policy).order_by("-id").values_list("id", flat=True)[:keep])
    old = Job.objects.filter(policy=policy, finished_at__lt=finished_before).exclude(id__in=kept)
    return old.delete()[0]


# -- items -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Work:
    unclaimed: bool  # event items no job has gathered
    pending: bool  # items of jobs waiting to run
    queued: bool  # runs waiting to be listed


@statement
def _work_sql() -> str:
    # Hand-written, as the statements below: a policy's runner asks this twice a second, idle or
    # not, and compiling the ORM's form cost more CPU than the rest of an idle step.
    item, job = table(Item), table(Job)
    return (f"SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {item} WHERE policy = %s AND state = 'pending' "
            f"AND job_id IS NULL LIMIT 1) a), (SELECT COUNT(*) FROM (SELECT 1 FROM {item} WHERE policy = %s "
            f"AND state = 'pending' AND job_id IS NOT NULL LIMIT 1) b), (SELECT COUNT(*) FROM (SELECT 1 FROM {job} "
            f"WHERE policy = %s AND state = 'queued' LIMIT 1) c)")


def work(policy: str) -> Work:
    row = fetch_one(_work_sql(), [policy, policy, policy]) or (0, 0, 0)
    return Work(bool(row[0]), bool(row[1]), bool(row[2]))


@statement
def _window_sql() -> str:
    item, job = table(Item), table(Job)
    return (f"SELECT i.id, i.job_id, i.action, i.repository, i.tag, i.digest, i.attempts, i.next_attempt_at "
            f"FROM {item} i JOIN {job} j ON j.id = i.job_id WHERE i.policy = %s AND i.state = 'pending' "
            f"AND j.state = 'running' ORDER BY i.id LIMIT %s")


def window(policy: str, limit: int) -> list[ItemRow]:
    """The policy's oldest pending items of its running jobs, in order."""
    when = reader(Item, "next_attempt_at")
    return [ItemRow(row[0], row[1], row[2], row[3], row[4], row[5], row[6], when(row[7]))
            for row in fetch_all(_window_sql(), [policy, limit])]


@statement
def _finish_sql() -> str:
    return (f"UPDATE {table(Item)} SET state = %s, bytes = bytes + %s, note = %s, finished_at = %s, "
            "digest = %s WHERE id = %s")


def finish_item(item_id: int, state: str, size: int, note: str, now: datetime, digest: str) -> None:
    """``digest``: what the item left its tag at (a pull records it: the next run's ``last_set``)."""
    execute(_finish_sql(), [state, size, note[:1000], connection.ops.adapt_datetimefield_value(now), digest,
                            item_id])


@statement
def _last_set_sql() -> str:
    return (f"SELECT digest FROM {table(Item)} WHERE policy = %s AND repository = %s AND tag = %s "
            "AND action = 'copy' AND state IN ('done', 'skipped') AND digest <> '' ORDER BY id DESC LIMIT 1")


def last_set(policy: str, repository: str, tag: str) -> str | None:
    """The digest the pull policy last left its local copy of ``repository:tag`` at (its latest
    finished item that recorded one), None if it never did: a local tag at another digest is
    someone else's."""
    row = fetch_one(_last_set_sql(), [policy, repository, tag])
    return row[0] if row else None


def left_alone(job_id: int, limit: int) -> list[tuple[str, str, str]]:
    """(repository, tag, note) of a run's items skipped because the local tag is someone else's."""
    rows = (Item.objects.filter(job_id=job_id, state="skipped", note__startswith=LEFT).order_by("id")
            .values_list("repository", "tag", "note")[:limit])
    return list(rows)


def retry_item(item_id: int, attempts: int, at: datetime | None, note: str, size: int) -> None:
    Item.objects.filter(id=item_id).update(attempts=attempts, next_attempt_at=at, note=note[:1000],
                                           bytes=F("bytes") + size)


def item_counts(job_ids: list[int]) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {job_id: {} for job_id in job_ids}
    for row in Item.objects.filter(job_id__in=job_ids).values("job_id", "state").annotate(n=Count("id")):
        counts[row["job_id"]][row["state"]] = row["n"]
    return counts


def job_items(job_id: int, states: tuple[str, ...], limit: int) -> list[tuple[str, str, str, str, str]]:
    """(repository, tag, digest, state, note) of a job's items in those states, in order."""
    rows = (Item.objects.filter(job_id=job_id, state__in=states).order_by("id")
            .values_list("repository", "tag", "digest", "state", "note")[:limit])
    return list(rows)


@dataclass(frozen=True)
class Backlog:
    pending: int
    oldest: datetime | None


def backlogs() -> dict[str, Backlog]:
    rows = Item.objects.filter(state="pending").values("policy").annotate(n=Count("id"), oldest=Min("created_at"))
    return {row["policy"]: Backlog(row["n"], row["oldest"]) for row in rows}


def recent_failures(policy: str, limit: int) -> list[tuple[str, str, str, datetime | None]]:
    rows = (Item.objects.filter(policy=policy, state="failed").order_by("-id")
            .values_list("repository", "tag", "note", "finished_at")[:limit])
    return list(rows)


# -- the policies' totals and backoff ---------------------------------------------------------------

def state(name: str) -> PolicyState:
    row, _ = PolicyState.objects.get_or_create(name=name)
    return row


def states() -> dict[str, PolicyState]:
    return {row.name: row for row in PolicyState.objects.all()}


@statement
def _count_sql() -> str:
    return (f"UPDATE {table(PolicyState)} SET bytes = bytes + %s, items = items + %s, failures = failures + %s "
            "WHERE name = %s")


def count(name: str, size: int = 0, items: int = 0, failures: int = 0) -> None:
    if not execute(_count_sql(), [size, items, failures, name]):
        state(name)
        execute(_count_sql(), [size, items, failures, name])


def backoff_until(name: str) -> datetime | None:
    """When the policy may try its remote again (None: now)."""
    return PolicyState.objects.filter(name=name).values_list("next_attempt_at", flat=True).first()


def remote_failed(name: str, error: str, now: datetime, started: datetime, attempts: int,
                  next_attempt_at: datetime) -> bool:
    """Record a transient failure against the remote as failed attempt ``attempts``, unless another
    item that ran beside this one (one started at ``started``) has recorded it already: the items of
    one step fail together and are one attempt of the backoff. Whether it was recorded."""
    state(name)
    return bool(PolicyState.objects.filter(Q(last_error_at__isnull=True) | Q(last_error_at__lt=started), name=name)
                .update(attempts=attempts, next_attempt_at=next_attempt_at, last_error=error[:1000],
                        last_error_at=now, failures=F("failures") + 1))


def remote_ok(name: str, now: datetime) -> int:
    """The remote answered: the backoff ends; the failed attempts in a row before."""
    before = state(name).attempts
    PolicyState.objects.filter(name=name).update(attempts=0, next_attempt_at=None, last_success_at=now)
    return before


def retry_now(names: list[str]) -> int:
    Item.objects.filter(policy__in=names, state="pending", next_attempt_at__isnull=False).update(next_attempt_at=None)
    return PolicyState.objects.filter(name__in=names, next_attempt_at__isnull=False).update(next_attempt_at=None)


# -- uploads in progress ---------------------------------------------------------------------------

def upload(policy: str, repository: str, digest: str) -> tuple[str, int] | None:
    row = Upload.objects.filter(policy=policy, repository=repository, digest=digest).values_list(
        "location", "offset").first()
    return (row[0], row[1]) if row else None


def save_upload(policy: str, repository: str, digest: str, location: str, offset: int, now: datetime) -> None:
    Upload.objects.update_or_create(policy=policy, repository=repository, digest=digest,
                                    defaults={"location": location, "offset": offset, "updated_at": now})


def drop_upload(policy: str, repository: str, digest: str) -> None:
    Upload.objects.filter(policy=policy, repository=repository, digest=digest).delete()


def prune_uploads(before: datetime) -> int:
    return Upload.objects.filter(updated_at__lt=before).delete()[0]


# -- what a scheduled or manual push run walks ----------------------------------------------------

def tag_page(repository_id: int, after: str, limit: int) -> list[tuple[str, str]]:
    """(tag, manifest digest) of the repository's tags after ``after``, in name order."""
    rows = (Tag.objects.filter(repository_id=repository_id, name__gt=after).order_by("name")
            .values_list("name", "manifest__digest")[:limit])
    return list(rows)


@statement
def _followers_sql(subjects: int, tags: int) -> str:
    m, t = table(Manifest), table(Tag)
    return (f"SELECT m.subject_digest, m.digest, '' FROM {m} m WHERE m.repository_id = %s "
            f"AND m.subject_digest IN ({', '.join(['%s'] * subjects)}) UNION ALL SELECT '', '', t.name FROM {t} t "
            f"WHERE t.repository_id = %s AND t.name IN ({', '.join(['%s'] * tags)})")


def followers(repository_id: int, subjects: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """What follows ``subjects`` in the repository: its OCI referrers, as (subject, digest) in the
    order they were pushed, and cosign's tags ``<alg>-<hex>.sig|att|sbom`` of them. One statement:
    every replicated tag asks."""
    cosign = [f"{s.replace(':', '-')}.{suffix}" for s in subjects for suffix in ("sig", "att", "sbom")]
    rows = fetch_all(_followers_sql(len(subjects), len(cosign)), [repository_id, *subjects, repository_id, *cosign])
    return [(row[0], row[1]) for row in rows if row[1]], sorted(row[2] for row in rows if row[2])


def manifest_subject(repository_id: int, digest: str) -> str | None:
    """The subject digest of the repository's manifest ``digest`` ("" when it has none), None if unknown."""
    row = Manifest.objects.filter(repository_id=repository_id, digest=digest).values_list(
        "subject_digest", flat=True).first()
    return row
