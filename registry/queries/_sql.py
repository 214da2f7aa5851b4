"""What the queries share: statements written by hand, built once, and the byte-order rule.

A statement is hand-written only where it measurably beats the ORM (``python -m bench.queries
--variants`` times each against its ORM form): on the hot paths, compiling an ORM query costs more
than running it. Such a statement is built once, by a function decorated with ``@statement`` that
names tables and columns through the models, quoted for the database.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from typing import Any, Callable, Iterable, Iterator, Sequence

from django.db import connection, models
from django.db.models import BooleanField, Case, F, Q, Value, When
from django.db.models.functions import Collate

from registry.visibility import Ladder, Visible


def statement(build: Callable[..., str]) -> Callable[..., str]:
    """The text ``build(*shape)`` returns, built once per shape (e.g. a count of placeholders).
    A process talks to one database, so the text built first stays right."""
    return cache(build)


def table(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def name(column: str) -> str:
    """A column whose name is a keyword somewhere (``offset``), quoted."""
    return connection.ops.quote_name(column)


def marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def fetch_one(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row: tuple[Any, ...] | None = cursor.fetchone()
    return row


def fetch_all(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


@contextmanager
def streamed(sql: str, params: Sequence[Any], batch: int = 1000) -> Iterator[Iterator[tuple[Any, ...]]]:
    """The rows of a statement, read ``batch`` at a time while the block lasts: several may be
    open at once, on one connection."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        yield (row for rows in iter(lambda: cursor.fetchmany(batch), []) for row in rows)


def execute(sql: str, params: Sequence[Any]) -> int:
    """Run a statement; the number of rows it changed."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def execute_many(sql: str, rows: Iterable[Sequence[Any]]) -> None:
    with connection.cursor() as cursor:
        cursor.executemany(sql, list(rows))


def moment(value: datetime) -> Any:
    """A datetime as the database driver takes it."""
    return connection.ops.adapt_datetimefield_value(value)


@cache
def reader(model: type[models.Model], field: str) -> Callable[[Any], Any]:
    """What the ORM does to a column's raw value (SQLite returns datetimes as text)."""
    return _reader(model, field)


def _reader(model: type[models.Model], field: str) -> Callable[[Any], Any]:
    model_field = model._meta.get_field(field)
    assert isinstance(model_field, models.Field)
    column = model_field.get_col(model._meta.db_table)
    converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)

    if not converters:
        return lambda value: value

    def read(value: Any) -> Any:
        for convert in converters:
            value = convert(value, column, connection)
        return value

    return read


def json_value(value: Any) -> Any:
    """A JSON column read by hand: text on SQLite, decoded already by psycopg."""
    if isinstance(value, (str, bytes, bytearray)):
        return json.loads(value)
    return value or {}


def _byte_collation() -> str | None:
    """Names, tags and catalog entries sort byte by byte ("ASCIIbetical"), as the distribution
    spec's lists do, whatever the database's locale: PostgreSQL needs the "C" collation for that;
    SQLite compares text with its BINARY collation already."""
    return "C" if connection.vendor == "postgresql" else None


def byte_order(field: str) -> F | Collate:
    """``field`` compared in byte order, for ORM queries."""
    collation = _byte_collation()
    return F(field) if collation is None else Collate(F(field), collation)


def byte_order_sql(column: str) -> str:
    """``column`` compared in byte order, for hand-written statements."""
    collation = _byte_collation()
    return column if collation is None else f'{column} COLLATE "{collation}"'


def visible_names(visible: Visible, field: str = "name") -> Q | None:
    """The condition that ``field`` (a repository name) is one of ``visible`` (registry.visibility),
    for ORM queries; None when every name is. Each ladder is one CASE over the rules' regular
    expressions, which SQLite (Python's re) and PostgreSQL (~) read alike."""
    if visible.everything:
        return None
    condition = Q(pk__in=[])
    for part in visible.parts:
        term = Q()
        if part.within is not None:
            term &= Q(**{f"{field}__regex": part.within})
        if part.ladder is not None:
            term &= Q(_ladder(part.ladder, field))
        condition |= term
    return condition


def _ladder(ladder: Ladder, field: str) -> Case:
    whens = []
    for level, grants in ladder.steps:
        if grants is not None:
            whens.append(When(Q(**{f"{field}__regex": level}) & Q(**{f"{field}__regex": grants}), then=Value(True)))
        whens.append(When(Q(**{f"{field}__regex": level}), then=Value(False)))
    return Case(*whens, default=Value(ladder.otherwise), output_field=BooleanField())
