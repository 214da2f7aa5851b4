"""Keyset pages' cursors as text, for the web UI's long lists (registry.queries.keyset reads the
pages): a name as itself, a moment as microseconds since the epoch and a row id, so a page's
address can be bookmarked. A cursor a list could not have made is a BadCursor (the page's 400).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from registry.queries.keyset import Cursor

MAX_CURSOR = 300  # characters: a repository name (255) or two numbers, with room to spare


class BadCursor(ValueError):
    """A page link whose cursor this list could not have made (edited, truncated, another list's)."""


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def moment_text(value: datetime) -> str:
    """A moment as microseconds since the epoch: exact, and short in a link."""
    delta = value.astimezone(timezone.utc) - EPOCH
    return str((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


def moment_of(text: str) -> datetime:
    try:
        return EPOCH + timedelta(microseconds=number_of(text))
    except OverflowError as error:
        raise BadCursor(text) from error


def number_of(text: str) -> int:
    """A non-negative integer written in ASCII digits, of at most 18 (it fits a bigint)."""
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise BadCursor(text)
    return int(text)


def cursor_from(after: str, before: str, parse: Callable[[str], tuple[int, tuple[Any, ...]]]) -> Cursor | None:
    """The cursor of a page's ``?after=`` or ``?before=`` (None: neither, the first page); ``parse``
    reads the text into (segment, key) or raises BadCursor."""
    text, backwards = (before, True) if before else (after, False)
    if not text:
        return None
    if len(text) > MAX_CURSOR:
        raise BadCursor(text[:20])
    segment, key = parse(text)
    return Cursor(segment, key, backwards)
