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
