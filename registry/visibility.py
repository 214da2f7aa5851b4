"""What a caller may see: the repositories they may read, and the one they asked for and may not.

"What you can see is what you can read." Listings (the catalog, the UI's lists and search) take a
``Visible``, the set of names a caller may read as the access decision (tokens.authz) describes it,
which the queries turn into one SQL condition. A read of a repository the caller may not read runs
its view as usual with that repository ``hidden``: the services then find nothing by that name, so
the answer is exactly the answer for a repository that does not exist, whatever the route, status,
code and message (registry.services read ``hidden`` at their lookups by name).

Pure Python; no Django.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterator

_hidden: ContextVar[str | None] = ContextVar("registry_hidden_repository", default=None)


def hidden(name: str) -> bool:
    """Whether ``name`` must be answered as absent in this request."""
    hide = _hidden.get()
    return hide is not None and hide == name


@contextmanager
def hiding(name: str) -> Iterator[None]:
    token = _hidden.set(name)
    try:
        yield
    finally:
        _hidden.reset(token)


def hide(name: str) -> object:
    """Hide ``name`` until ``unhide`` with what this returns (for a middleware's two halves)."""
    return _hidden.set(name)


def unhide(token: object) -> None:
    _hidden.reset(token)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Ladder:
    """Rules tried in order: the first step whose ``level`` matches a name decides, by whether the
    name matches ``grants`` (None: grants nothing); a name no step matches gets ``otherwise``."""

    steps: tuple[tuple[str, str | None], ...]
    otherwise: bool
    _compiled: tuple[tuple[re.Pattern[str], re.Pattern[str] | None], ...] = field(
        default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = tuple((re.compile(level), re.compile(grants) if grants else None)
                         for level, grants in self.steps)
        object.__setattr__(self, "_compiled", compiled)

    def allows(self, name: str) -> bool:
        for level, grants in self._compiled:
            if level.match(name):
                return grants is not None and grants.match(name) is not None
        return self.otherwise


@dataclass(frozen=True)
class Part:
    """Names the ladder allows (every name without one) that match ``within`` (any without)."""

    ladder: Ladder | None = None
    within: str | None = None

    def allows(self, name: str) -> bool:
        if self.within is not None and re.match(self.within, name) is None:
            return False
        return self.ladder is None or self.ladder.allows(name)


@dataclass(frozen=True)
class Visible:
    """The names any of ``parts`` allows."""

    parts: tuple[Part, ...]

    @property
    def everything(self) -> bool:
        return any(part.ladder is None and part.within is None for part in self.parts)

    @property
    def nothing(self) -> bool:
        return not self.parts

    def allows(self, name: str) -> bool:
        return any(part.allows(name) for part in self.parts)


EVERYTHING = Visible((Part(),))
NOTHING = Visible(())


def any_of(regexes: list[str]) -> str | None:
    """One anchored regular expression matching what any of ``regexes`` does (plain groups, which
    Python's re and PostgreSQL's ~ read alike); None for none."""
    if not regexes:
        return None
    return regexes[0] if len(regexes) == 1 else "|".join(f"({regex})" for regex in regexes)
