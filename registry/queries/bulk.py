"""Rows in bulk: a registry's worth of metadata written at once, for the scale benchmark and the
tests that pin query plans on big data (``bench/scale.py``, ``tests/support/scale.py``).

COPY on PostgreSQL, ``executemany`` on SQLite, from iterables that are consumed as they are written
(memory stays flat at a million rows). The caller gives the ids (``next_id``), so that the rows of
one table can name those of another without reading them back; ``finish`` then moves the id
sequences past them and refreshes the planner's statistics. Meant for a database nothing else
writes to meanwhile.
"""
from __future__ import annotations

from datetime import datetime
from itertools import islice
from typing import Any, Iterable, Sequence

from django.core.management.color import no_style
from django.db import connection, models

from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from registry.queries._sql import fetch_one, marks, moment, table

BATCH = 10_000  # rows per executemany on SQLite
TABLES: tuple[type[models.Model], ...] = (Repository, Blob, BlobLink, Manifest, ManifestReference, Tag)


def next_id(model: type[models.Model]) -> int:
    """The first id above every row of ``model``'s table."""
    row = fetch_one(f"SELECT MAX(id) FROM {table(model)}", [])
    return int(row[0] or 0) + 1 if row else 1


def load(model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Insert ``rows`` (values in the order of ``columns``) into ``model``'s table; how many."""
    names = ", ".join(connection.ops.quote_name(column) for column in columns)
    if connection.vendor == "postgresql":
        return _copy(f"COPY {table(model)} ({names}) FROM STDIN", rows)
    sql = f"INSERT INTO {table(model)} ({names}) VALUES ({marks(len(columns))})"
    # Moments as the ORM writes them: sqlite3's own adapter adds "+00:00", and SQLite compares
    # moments as text, so a loaded row and a cursor or bound written by the ORM at the same moment
    # would not compare equal.
    count, source = 0, (tuple(moment(v) if isinstance(v, datetime) else v for v in row) for row in rows)
    with connection.cursor() as cursor:
        while batch := list(islice(source, BATCH)):
            cursor.executemany(sql, batch)
            count += len(batch)
    return count


def _copy(sql: str, rows: Iterable[Sequence[Any]]) -> int:
    count = 0
    with connection.cursor() as cursor:
        with cursor.cursor.copy(sql) as copy:  # psycopg's own cursor under Django's wrapper
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


def finish() -> None:
    """After loading: id sequences past the loaded ids (PostgreSQL), and fresh planner statistics
    for the registry's tables, as autovacuum would gather them on a live server."""
    with connection.cursor() as cursor:
        for sql in connection.ops.sequence_reset_sql(no_style(), list(TABLES)):
            cursor.execute(sql)
        if connection.vendor == "postgresql":
            cursor.execute(f"ANALYZE {', '.join(table(model) for model in TABLES)}")
        else:
            cursor.execute("ANALYZE")
