"""Keyset ("seek") pages: a page is the rows after (or before) a row the reader saw, read from an
index in its order from that row's sort key on, so page 1,000 costs what page 1 does (with OFFSET
the web UI skipped the 50,000 rows before it: issue 25, 23-50 ms at 100,000 tags, ten times that at
a million).

A list is one or more segments read one after the other (the repositories by last push: those
pushed, then those never pushed, whose sort key is NULL). What a page's links carry is the key of
the row they continue from, written as text by the caller (ops.ui.seek).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from django.db.models import BooleanField, Expression, F, QuerySet, Value


@dataclass(frozen=True)
class Segment:
    """Rows in the order of ``order`` (field names, all ascending or all "-" descending). A row
    tuple ends with its key: the values of those fields but the first ``len(fixed)``, which every
    row of the segment shares (``fixed``: a repository's id, compared too where a database needs
    the whole index key to start reading at the cursor)."""

    query: QuerySet[Any]
    order: tuple[str, ...]
    fixed: tuple[Any, ...] = ()

    @property
    def descending(self) -> bool:
        return self.order[0].startswith("-")

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(name.lstrip("-") for name in self.order)

    def key(self, row: Any) -> tuple[Any, ...]:
        return tuple(row[len(row) - (len(self.order) - len(self.fixed)):])


@dataclass(frozen=True)
class Cursor:
    segment: int
    key: tuple[Any, ...]
    backwards: bool  # the page before the row of this key, not the one after it


@dataclass(frozen=True)
class Listing:
    rows: list[Any]
    total: int  # as the list's page says it (a tally, or a count)
    first: bool  # nothing before these rows
    last: bool  # nothing after them
    after: str  # the next page's cursor ("" on the last page)
    before: str  # the previous page's cursor ("" on the first)


class _Beyond(Expression):
    """``(f1, f2, ...) > (v1, v2, ...)`` (or ``<``) as one row-value comparison, which both
    databases read as a range of the index on those columns; the ORM would spell it as ORs of
    equalities that only bound the first column."""

    output_field = BooleanField()

    def __init__(self, fields: Sequence[Any], values: Sequence[Any], operator: str) -> None:
        super().__init__()
        self.fields, self.values, self.operator = list(fields), list(values), operator

    def resolve_expression(self, query: Any = None, allow_joins: bool = True, reuse: Any = None,
                           summarize: bool = False, for_save: bool = False) -> _Beyond:
        resolved = self.copy()  # resolved again when the ORM wraps it in "= true": idempotent
        resolved.fields = [(F(f) if isinstance(f, str) else f).resolve_expression(query, allow_joins, reuse, summarize)
                           for f in self.fields]
        resolved.values = [v if hasattr(v, "resolve_expression") else Value(v, output_field=f.output_field)
                           for f, v in zip(resolved.fields, self.values, strict=True)]
        return resolved

    def get_source_expressions(self) -> list[Any]:
        return [*self.fields, *self.values]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        half = len(exprs) // 2
        self.fields, self.values = list(exprs[:half]), list(exprs[half:])

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        left: list[str] = []
        right: list[str] = []
        params: list[Any] = []
        for side, expressions in ((left, self.fields), (right, self.values)):
            for expression in expressions:
                sql, found = compiler.compile(expression)
                side.append(sql)
                params.extend(found)
        if len(left) == 1:
            return f"{left[0]} {self.operator} {right[0]}", params
        return f"({', '.join(left)}) {self.operator} ({', '.join(right)})", params


Encode = Callable[[int, tuple[Any, ...]], str]


def _read(segment: Segment, key: tuple[Any, ...] | None, backwards: bool, limit: int) -> list[Any]:
    """Up to ``limit`` rows of ``segment`` beyond ``key`` (None: from its start, or from its end
    when ``backwards``), in reading order."""
    query = segment.query
    reverse = segment.descending != backwards  # reading towards smaller keys
    if key is not None:
        query = query.filter(_Beyond(segment.fields, (*segment.fixed, *key), "<" if reverse else ">"))
    return list(query.order_by(*(f"-{name}" if reverse else name for name in segment.fields))[:limit])


def listing(segments: Sequence[Segment], cursor: Cursor | None, size: int, total: int, encode: Encode) -> Listing:
    """The page of ``size`` rows that ``cursor`` points at (None: the first page)."""
    if cursor is None:
        rows, more = _gather(segments, 0, None, size)
        return _page(segments, rows, total, encode, first=True, last=not more)
    if cursor.backwards:
        rows, more = _gather(segments, cursor.segment, cursor.key, size, backwards=True)
        if not more:  # the start of the list: its first page, filled up
            return listing(segments, None, size, total, encode)
        return _page(segments, rows, total, encode, first=False, last=False)
    rows, more = _gather(segments, cursor.segment, cursor.key, size)
    if not rows:  # past the end (the rows after it were deleted): the last page
        rows, more = _gather(segments, len(segments) - 1, None, size, backwards=True)
        return _page(segments, rows, total, encode, first=not more, last=True)
    return _page(segments, rows, total, encode, first=False, last=not more)


Found = list[tuple[int, Any]]  # (segment number, row)


def _gather(segments: Sequence[Segment], start: int, key: tuple[Any, ...] | None, size: int,
            backwards: bool = False) -> tuple[Found, bool]:
    """Up to ``size`` rows from ``key`` in segment ``start`` on, through the segments after it (or
    before it, ``backwards``), in the list's order; and whether more follow."""
    found: Found = []
    for number in (range(start, -1, -1) if backwards else range(start, len(segments))):
        rows = _read(segments[number], key if number == start else None, backwards, size + 1 - len(found))
        found += [(number, row) for row in rows]
        if len(found) > size:
            break
    page = found[:size]
    return (page[::-1] if backwards else page), len(found) > size


def _page(segments: Sequence[Segment], found: Found, total: int, encode: Encode, first: bool, last: bool) -> Listing:
    def cursor(entry: tuple[int, Any]) -> str:
        return encode(entry[0], segments[entry[0]].key(entry[1]))

    return Listing(rows=[row for _number, row in found], total=total, first=first or not found,
                   last=last or not found, after="" if last or not found else cursor(found[-1]),
                   before="" if first or not found else cursor(found[0]))
