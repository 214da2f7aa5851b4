"""The ``[[replication]]`` tables: which images go to (push) or come from (pull) which registry, when.

This module imports nothing of Django: the configuration loader calls ``check`` before the settings
exist, so a bad URL, glob or regex stops start-up with one line naming the entry and the key. The
credentials (``username``, ``password``, or ``SVC_REPLICATION_<n>_USERNAME`` / ``_PASSWORD``) are
never repeated in such a line, a log line, a page or a command's output.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from registry.policies.globs import glob_regex

DIRECTIONS = ("push", "pull")
TRIGGERS = ("event", "schedule", "manual")
MAX_CONCURRENCY = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_HOST = re.compile(r"(?:http://)?[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?", re.IGNORECASE)
_PREFIX = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")
# Signatures, attestations and SBOMs that cosign keeps under a tag named after their subject (the
# scheme of registries without the referrers API): they travel with the subject, as referrers do.
COSIGN_TAG = re.compile(r"(sha256|sha512)-([0-9a-f]{64}|[0-9a-f]{128})\.(sig|att|sbom)")

SCHEMA_DEFAULTS: dict[str, Any] = {
    "direction": "push",
    "username": "",
    "password": "",
    "repositories": ["**"],
    "tags": [],
    "destination_prefix": "",
    "trigger": "event",
    "schedule_minutes": 60,
    "deletes": False,
    "referrers": True,
    "max_bytes_per_second": 0,
    "concurrency": 4,
    "timeout_seconds": 30,
    "realm_hosts": [],
}
SECRETS = {("replication", "username"), ("replication", "password")}


@dataclass(frozen=True)
class Policy:
    name: str
    direction: str
    url: str  # the remote registry's base URL, without a trailing slash
    repositories: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]  # the repositories globs
    tags: tuple[re.Pattern[str], ...]  # empty: every tag
    destination_prefix: str
    trigger: str
    schedule_minutes: int
    deletes: bool
    referrers: bool
    max_bytes_per_second: int
    concurrency: int
    timeout: float
    realm_hosts: frozenset[str]
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def remote(self) -> str:
        """How messages name the remote registry: its host and port, never its credentials."""
        return urlsplit(self.url).netloc

    def covers(self, repository: str) -> bool:
        """Whether ``repository`` (a local name for push, a remote one for pull) is the policy's."""
        return any(pattern.fullmatch(repository) for pattern in self.patterns)

    def wants_tag(self, tag: str) -> bool:
        return not self.tags or any(pattern.search(tag) for pattern in self.tags)

    def destination(self, repository: str) -> str:
        """Where ``repository`` goes: the remote name (push) or the local one (pull)."""
        return f"{self.destination_prefix}/{repository}" if self.destination_prefix else repository

    def listed_names(self) -> list[str] | None:
        """The repositories the globs name literally (no wildcard), or None when one is a pattern:
        a registry without a catalog (Docker Hub) can be pulled from by names alone."""
        if any(set(glob) & set("*?[") for glob in self.repositories):
            return None
        return list(self.repositories)

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> "Policy":
        return cls(
            name=entry["name"], direction=entry["direction"], url=entry["url"].rstrip("/"),
            repositories=tuple(entry["repositories"]),
            patterns=tuple(re.compile(glob_regex(glob)) for glob in entry["repositories"]),
            tags=tuple(re.compile(pattern) for pattern in entry["tags"]),
            destination_prefix=entry["destination_prefix"].strip("/"), trigger=entry["trigger"],
            schedule_minutes=entry["schedule_minutes"], deletes=entry["deletes"], referrers=entry["referrers"],
            max_bytes_per_second=entry["max_bytes_per_second"], concurrency=entry["concurrency"],
            timeout=float(entry["timeout_seconds"]),
            realm_hosts=frozenset(host.lower() for host in entry["realm_hosts"]),
            username=entry["username"], password=entry["password"],
        )


def register(lists: dict[str, dict[str, Any]], validators: dict[str, Callable[[list[dict[str, Any]]], None]],
             secrets: set[tuple[str, str]]) -> None:
    """Declare [[replication]] to the configuration loader (regsite.config)."""
    from regsite.config import Required

    lists["replication"] = {"name": Required(str), "url": Required(str), **SCHEMA_DEFAULTS}
    validators["replication"] = check
    secrets.update(SECRETS)


def check(entries: list[dict[str, Any]]) -> None:
    """Every [[replication]] entry is usable, or ConfigError naming the entry and the key."""
    from regsite.config import ConfigError, entry_name

    seen: set[str] = set()
    for index, entry in enumerate(entries):
        problem = _problem(entry, seen)
        if problem is not None:
            key, message = problem
            raise ConfigError(f"{entry_name('replication', index, entry)} {key}: {message}")
        seen.add(entry["name"])


def _problem(entry: Mapping[str, Any], seen: set[str]) -> tuple[str, str] | None:
    name = entry["name"]
    if not _NAME.fullmatch(name):
        return "name", f"expected letters, digits, . _ - (at most 64, a letter or digit first), got {name!r}"
    if name in seen:
        return "name", "used by an earlier entry: each policy needs its own name"
    url_problem = _url_problem(entry["url"])
    if url_problem:
        return "url", url_problem
    for key, allowed in (("direction", DIRECTIONS), ("trigger", TRIGGERS)):
        if entry[key] not in allowed:
            return key, f"expected one of {', '.join(allowed)}, got {entry[key]!r}"
    if entry["direction"] == "pull" and entry["trigger"] == "event":
        return "trigger", 'a pull policy runs on "schedule" or "manual" (the remote registry sends this one no events)'
    if entry["deletes"] and entry["direction"] == "pull":
        return "deletes", "only push policies replicate deletions (a pull policy never deletes here)"
    if not entry["repositories"]:
        return "repositories", "expected at least one glob (\"**\" is every repository)"
    for glob in entry["repositories"]:
        try:
            glob_regex(glob)
        except ValueError as exc:
            return "repositories", f"invalid glob {glob!r}: {exc}"
    for pattern in entry["tags"]:
        try:
            re.compile(pattern)
        except re.error as exc:
            return "tags", f"invalid regular expression {pattern!r}: {exc}"
    prefix = entry["destination_prefix"].strip("/")
    if prefix and not _PREFIX.fullmatch(prefix):
        return "destination_prefix", f"expected a repository name such as \"mirror/dc1\", got {prefix!r}"
    if entry["schedule_minutes"] <= 0:
        return "schedule_minutes", f"must be a positive integer, got {entry['schedule_minutes']}"
    if entry["max_bytes_per_second"] < 0:
        return "max_bytes_per_second", f"must not be negative (0 is unlimited), got {entry['max_bytes_per_second']}"
    if not 0 < entry["concurrency"] <= MAX_CONCURRENCY:
        return "concurrency", f"expected 1 to {MAX_CONCURRENCY}, got {entry['concurrency']}"
    if not 0 < entry["timeout_seconds"] <= 600:
        return "timeout_seconds", f"expected 1 to 600, got {entry['timeout_seconds']}"
    if entry["password"] and not entry["username"]:
        return "password", "given without a username"
    for host in entry["realm_hosts"]:
        if not _HOST.fullmatch(host):
            return "realm_hosts", (f"expected host names such as \"auth.example.org\" (or \"http://host\" to "
                                   f"allow plain http), got {host!r}")
    return None


def _url_problem(text: str) -> str | None:
    try:
        url = urlsplit(text)
        url.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        return "expected an http:// or https:// URL (the port is not a number)"
    if "@" in url.netloc or (not url.netloc and "@" in text):
        return "credentials go in username and password (or SVC_REPLICATION_<n>_USERNAME), not in the URL"
    if url.scheme not in ("http", "https") or not url.hostname:
        return f"expected an http:// or https:// URL, got {text[:200]!r}"
    if url.path not in ("", "/") or url.query or url.fragment:
        return "expected the registry's base URL (no path, query or fragment: /v2/ is added)"
    return None
