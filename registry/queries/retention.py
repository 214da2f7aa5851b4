"""What retention plans over, a page at a time, and its plan held in two temporary tables while it
is carried out (registry.retention.executor): a repository's tags newest first, the tags the plan
removes and the manifests the next collection then removes, each read back in the order it is
reported. A repository of a million tags is planned this way in bounded memory: loading it whole
took gigabytes.
"""
from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator, NamedTuple, Sequence

from django.db import connection

from registry.models import Manifest, Tag
from registry.queries._sql import execute, execute_many, fetch_all, marks, moment, reader, statement, table
from registry.queries.graph import REMOVED_TAGS, chunks

DOOMED = "registry_retention_doomed"
KEPT = "registry_retention_kept"


class TagLine(NamedTuple):
    """A tag with what ranks it and decides it."""

    id: int
    name: str
    manifest_id: int
    pushed_at: datetime
    last_pulled_at: datetime | None  # its manifest's
    referrer: bool  # its manifest is a referrer of another manifest of the repository
    subject: str  # that manifest's subject, or ""


def _tag_line(row: Sequence[Any]) -> TagLine:
    pushed, pulled = reader(Tag, "updated_at"), reader(Manifest, "last_pulled_at")
    return TagLine(int(row[0]), str(row[1]), int(row[2]), pushed(row[3]), pulled(row[4]), bool(row[5]), str(row[6]))


def _tag_columns() -> str:
    return ("t.id, t.name, t.manifest_id, t.updated_at, m.last_pulled_at, "
            "(m.subject_digest <> '' AND m.subject_digest <> m.digest AND (SELECT 1 FROM "
            f"{table(Manifest)} s WHERE s.repository_id = m.repository_id AND s.digest = m.subject_digest) "
            "IS NOT NULL), m.subject_digest")


@statement
def _newest_sql(after: bool) -> str:
    # tag_pushed_idx, read backwards from the newest.
    return (f"SELECT {_tag_columns()} FROM {table(Tag)} t JOIN {table(Manifest)} m ON m.id = t.manifest_id "
            "WHERE t.repository_id = %s" + (" AND (t.updated_at < %s OR (t.updated_at = %s AND t.id < %s))"
                                            if after else "")
            + " ORDER BY t.updated_at DESC, t.id DESC LIMIT %s")


def tags_newest_first(repository_id: int, after: TagLine | None, limit: int) -> list[TagLine]:
    """The repository's tags by push, newest first (ties: highest id first), after ``after``."""
    params: list[Any] = [repository_id]
    if after is not None:
        at = moment(after.pushed_at)
        params += [at, at, after.id]
    rows = fetch_all(_newest_sql(after is not None), [*params, limit])
    return [_tag_line(row) for row in rows]


@statement
def _tags_of_sql(count: int) -> str:
    return (f"SELECT {_tag_columns()} FROM {table(Tag)} t JOIN {table(Manifest)} m ON m.id = t.manifest_id "
            f"WHERE t.manifest_id IN ({marks(count)})")


def tags_of_manifests(manifest_ids: Sequence[int]) -> list[TagLine]:
    return [_tag_line(row) for chunk in chunks(sorted(set(manifest_ids)))
            for row in fetch_all(_tags_of_sql(len(chunk)), chunk)]


# -- the plan, while it is carried out --------------------------------------------------------------


@contextmanager
def plan_tables() -> Iterator[None]:
    """The tables of one repository's plan, for the duration of the block (one connection's)."""
    moment_type = connection.data_types["DateTimeField"]
    drop()
    execute(f"CREATE TEMPORARY TABLE {REMOVED_TAGS} (id bigint PRIMARY KEY, name varchar(128) NOT NULL, "
            f"manifest_id bigint NOT NULL, pushed_at {moment_type} NOT NULL, last_pulled_at {moment_type} NULL, "
            "rank integer NULL, subject varchar(200) NOT NULL)", [])
    execute(f"CREATE INDEX {REMOVED_TAGS}_name ON {REMOVED_TAGS} (name)", [])
    execute(f"CREATE INDEX {REMOVED_TAGS}_manifest ON {REMOVED_TAGS} (manifest_id)", [])
    execute(f"CREATE TEMPORARY TABLE {DOOMED} (id bigint PRIMARY KEY, digest varchar(200) NOT NULL, "
            f"pushed_at {moment_type} NOT NULL, referrer_of varchar(200) NOT NULL)", [])
    execute(f"CREATE INDEX {DOOMED}_pushed ON {DOOMED} (pushed_at, digest)", [])
    execute(f"CREATE TEMPORARY TABLE {KEPT} (id bigint PRIMARY KEY, digest varchar(200) NOT NULL, "
            f"pushed_at {moment_type} NOT NULL, pulled boolean NOT NULL, young boolean NOT NULL)", [])
    execute(f"CREATE INDEX {KEPT}_pushed ON {KEPT} (pushed_at, digest)", [])
    try:
        yield
    finally:
        drop()


def drop() -> None:
    execute(f"DROP TABLE IF EXISTS {REMOVED_TAGS}", [])
    execute(f"DROP TABLE IF EXISTS {DOOMED}", [])
    execute(f"DROP TABLE IF EXISTS {KEPT}", [])


class Removal(NamedTuple):
    tag: TagLine
    rank: int | None  # among the counted tags; None for a tag on a referrer that goes with its subject


def add_removals(removals: Sequence[Removal]) -> None:
    execute_many(f"INSERT INTO {REMOVED_TAGS} (id, name, manifest_id, pushed_at, last_pulled_at, rank, subject) "
                 "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                 [(r.tag.id, r.tag.name, r.tag.manifest_id, moment(r.tag.pushed_at),
                   None if r.tag.last_pulled_at is None else moment(r.tag.last_pulled_at), r.rank, r.tag.subject)
                  for r in removals])


def removals_by_name(after: str, limit: int) -> list[Removal]:
    """The plan's removals in name order, after ``after``."""
    rows = fetch_all(f"SELECT id, name, manifest_id, pushed_at, last_pulled_at, rank, subject FROM {REMOVED_TAGS} "
                     "WHERE name > %s ORDER BY name LIMIT %s", [after, limit])
    pushed, pulled = reader(Tag, "updated_at"), reader(Manifest, "last_pulled_at")
    return [Removal(TagLine(int(r[0]), str(r[1]), int(r[2]), pushed(r[3]), pulled(r[4]), r[5] is None, str(r[6])),
                    None if r[5] is None else int(r[5])) for r in rows]


def removed_names(manifest_ids: Sequence[int]) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    for chunk in chunks(sorted(set(manifest_ids))):
        for mid, name in fetch_all(f"SELECT manifest_id, name FROM {REMOVED_TAGS} "
                                   f"WHERE manifest_id IN ({marks(len(chunk))})", chunk):
            names.setdefault(int(mid), []).append(str(name))
    return names


class Doomed(NamedTuple):
    id: int
    digest: str
    pushed_at: datetime
    referrer_of: str  # its subject when it goes as a referrer of it, else ""


def add_doomed(doomed: Sequence[Doomed]) -> None:
    execute_many(f"INSERT INTO {DOOMED} (id, digest, pushed_at, referrer_of) VALUES (%s, %s, %s, %s) "
                 "ON CONFLICT DO NOTHING", [(d.id, d.digest, moment(d.pushed_at), d.referrer_of) for d in doomed])


def clear_doomed() -> None:
    execute(f"DELETE FROM {DOOMED}", [])


def _by_push(name: str, columns: str, after: tuple[datetime, str] | None, limit: int) -> list[tuple[Any, ...]]:
    where, params = "", []
    if after is not None:
        at = moment(after[0])
        where, params = " WHERE pushed_at > %s OR (pushed_at = %s AND digest > %s)", [at, at, after[1]]
    return fetch_all(f"SELECT {columns} FROM {name}{where} ORDER BY pushed_at, digest LIMIT %s", [*params, limit])


def doomed_by_push(after: Doomed | None, limit: int) -> list[Doomed]:
    """The doomed manifests by push, oldest first (ties: by digest), after ``after``."""
    rows = _by_push(DOOMED, "id, digest, pushed_at, referrer_of", after and (after.pushed_at, after.digest), limit)
    pushed = reader(Manifest, "created_at")
    return [Doomed(int(r[0]), str(r[1]), pushed(r[2]), str(r[3])) for r in rows]


def doomed_among(manifest_ids: Sequence[int]) -> set[int]:
    return {int(row[0]) for chunk in chunks(sorted(set(manifest_ids)))
            for row in fetch_all(f"SELECT id FROM {DOOMED} WHERE id IN ({marks(len(chunk))})", chunk)}


class Kept(NamedTuple):
    """A manifest only the plan's removed tags reached that the next collection keeps all the same."""

    id: int
    digest: str
    pushed_at: datetime
    pulled: bool  # it, or a manifest reaching it, was pulled within pulled_within_days
    young: bool  # pushed within untagged_after_hours (else a young manifest reaches it)


def add_kept(kept: Sequence[Kept]) -> None:
    execute_many(f"INSERT INTO {KEPT} (id, digest, pushed_at, pulled, young) VALUES (%s, %s, %s, %s, %s) "
                 "ON CONFLICT DO NOTHING", [(k.id, k.digest, moment(k.pushed_at), k.pulled, k.young) for k in kept])


def kept_by_push(after: Kept | None, limit: int) -> list[Kept]:
    """The kept manifests by push, oldest first (ties: by digest), after ``after``."""
    rows = _by_push(KEPT, "id, digest, pushed_at, pulled, young", after and (after.pushed_at, after.digest), limit)
    pushed = reader(Manifest, "created_at")
    return [Kept(int(r[0]), str(r[1]), pushed(r[2]), bool(r[3]), bool(r[4])) for r in rows]
