"""The ``n`` / ``last`` pagination shared by the tags list and the catalog."""
from __future__ import annotations

from dataclasses import dataclass

from registry.services.exceptions import PaginationInvalid


@dataclass(frozen=True)
class Page:
    items: list[str]
    more: bool  # another page follows: the caller sends a Link header


def parse_limit(raw: str | None, default: int | None, maximum: int, strict: bool) -> int | None:
    """``n`` as an int. Over ``maximum``: an error when ``strict``, else capped (a Link follows)."""
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise PaginationInvalid(f"n must be a non-negative integer, got {raw[:50]!r}") from None
    if value < 0:
        raise PaginationInvalid(f"n must be a non-negative integer, got {value}")
    if value > maximum:
        if strict:
            raise PaginationInvalid(f"n must be at most {maximum}, got {value}", {"n": value, "max": maximum})
        return maximum
    return value


MAX_LAST_LENGTH = 1024


def parse_last(raw: str | None) -> str | None:
    """``last`` as given. It need not name an existing entry (results start after it), but it is
    compared in the database (a NUL, which PostgreSQL refuses, never reaches here: regsite.text)."""
    if not raw:
        return None
    if len(raw) > MAX_LAST_LENGTH:
        raise PaginationInvalid(f"last must be at most {MAX_LAST_LENGTH} characters", {"last": raw[:80]})
    return raw
