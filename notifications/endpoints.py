"""The configured webhook endpoints ([[notifications]]): checked at start-up, matched per event.

This module imports nothing of Django: the configuration loader calls ``check_entries`` before the
settings exist, so a bad URL, event or glob stops start-up with one line naming the entry and key.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import urlsplit

from registry.policies.globs import glob_regex

ACTIONS = ("push", "delete", "pull", "replication")  # replication: a [[replication]] run ended
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Set by the sender for every delivery: a configured header must not replace them.
RESERVED_HEADERS = frozenset({"content-type", "content-length", "host", "transfer-encoding", "connection",
                              "x-registry-signature"})
MAX_TIMEOUT_SECONDS = 300
# Events one endpoint may hold undelivered (about 1 KB each): beyond it the oldest are dropped.
DEFAULT_MAX_PENDING = 100_000
# Never repeated in an error message: a header may carry a token.
SECRET_KEYS = ("headers", "secret")


class BadGlob(ValueError):
    """A repositories glob that cannot match repository names as written."""


def compile_glob(glob: str) -> re.Pattern[str]:
    """The glob as the governance rules read theirs (registry.policies.globs), so that one
    ``repositories`` value selects the same repositories in every table of the configuration."""
    try:
        return re.compile(glob_regex(glob))
    except ValueError as exc:
        raise BadGlob(str(exc)) from None


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str
    events: frozenset[str]
    repositories: str
    pattern: re.Pattern[str]
    headers: tuple[tuple[str, str], ...]
    secret: str
    timeout_seconds: int
    max_age_hours: int
    max_pending: int = DEFAULT_MAX_PENDING

    def wants(self, action: str, repository: str) -> bool:
        # A mount is how a blob arrives in a repository without an upload: a push to its subscribers.
        kind = "push" if action == "mount" else action
        return kind in self.events and (not repository or self.pattern.fullmatch(repository) is not None)

    @property
    def shown_url(self) -> str:
        """The URL without its query (which may carry a key), for pages, lists and logs."""
        parts = urlsplit(self.url)
        return parts._replace(query="…" if parts.query else "", fragment="").geturl()

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> "Endpoint":
        return cls(entry["name"], entry["url"], frozenset(entry["events"]), entry["repositories"],
                   compile_glob(entry["repositories"]), tuple(sorted(entry["headers"].items())),
                   entry["secret"], entry["timeout_seconds"], entry["max_age_hours"], entry["max_pending"])


def register(lists: dict[str, dict[str, Any]], validators: dict[str, Callable[[list[dict[str, Any]]], None]],
             secret_keys: set[tuple[str, str]]) -> None:
    """Declare [[notifications]] to the configuration loader (regsite.config), which calls this
    once it is defined (so the import is here: either module may be imported first)."""
    from regsite.config import Required

    # max_age_hours is per endpoint: TOML cannot hold a [notifications] table beside the
    # [[notifications]] array.
    lists["notifications"] = {
        "name": Required(str),
        "url": Required(str),
        "events": ["push", "delete"],
        "repositories": "**",
        "headers": {},
        "secret": "",
        "timeout_seconds": 5,
        "max_age_hours": 72,
        "max_pending": DEFAULT_MAX_PENDING,
    }
    validators["notifications"] = check_entries
    secret_keys.update(("notifications", key) for key in SECRET_KEYS)


def check_entries(entries: list[dict[str, Any]]) -> None:
    """Every [[notifications]] entry is usable, or ConfigError naming the entry and the key."""
    from regsite.config import ConfigError, entry_name

    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = entry_name("notifications", index, entry)
        problem = _problem(entry, seen)
        if problem is not None:
            key, message = problem
            raise ConfigError(f"{where} {key}: {message}")
        seen.add(entry["name"])


def _problem(entry: Mapping[str, Any], seen: Iterable[str]) -> tuple[str, str] | None:
    name = entry["name"]
    if not _NAME.fullmatch(name):
        return "name", f"expected letters, digits, . _ - (at most 64, a letter or digit first), got {name!r}"
    if name in seen:
        return "name", "used by an earlier entry: each endpoint needs its own name"
    url_problem = _url_problem(entry["url"])
    if url_problem:
        return "url", url_problem
    if not entry["events"]:
        return "events", f"expected at least one of {', '.join(ACTIONS)}"
    unknown = [event for event in entry["events"] if event not in ACTIONS]
    if unknown:
        return "events", f"unknown event {unknown[0]!r}: expected {', '.join(ACTIONS)}"
    try:
        compile_glob(entry["repositories"])
    except BadGlob as exc:
        return "repositories", f"invalid glob {entry['repositories']!r}: {exc}"
    for header, value in entry["headers"].items():
        if not _HEADER_NAME.fullmatch(header):
            return "headers", f"{header!r} is not a valid header name"
        if header.lower() in RESERVED_HEADERS:
            return "headers", f"{header} is set by the registry itself and cannot be configured"
        if any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in value):
            return "headers", f"the value of {header} holds a control character (the value is not shown)"
    if not 0 < entry["timeout_seconds"] <= MAX_TIMEOUT_SECONDS:
        return "timeout_seconds", f"expected 1 to {MAX_TIMEOUT_SECONDS}, got {entry['timeout_seconds']}"
    if entry["max_age_hours"] <= 0:
        return "max_age_hours", f"must be a positive integer, got {entry['max_age_hours']}"
    if entry["max_pending"] <= 0:
        return "max_pending", f"must be a positive integer, got {entry['max_pending']}"
    return None


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as exc:
        return f"expected an http:// or https:// URL, got {_shown(url)} ({exc})"
    if "@" in parts.netloc:
        return "credentials in the URL would be shown in pages and logs: put them in headers instead"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return f"expected an http:// or https:// URL without spaces, got {_shown(url)}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"expected an http:// or https:// URL with a host, got {_shown(url)}"
    if parts.fragment:
        return f"expected a URL without a #fragment, got {_shown(url)}"
    return None


def _shown(url: str) -> str:
    """A URL as an error shows it: without its query (it may carry a key), at most 200 characters."""
    head = url.split("?", 1)[0] + ("?…" if "?" in url else "")
    return repr(head if len(head) <= 200 else head[:200] + "…")
