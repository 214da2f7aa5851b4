"""The ``[[proxy]]`` tables of the configuration: pull-through caches of other registries (registry.proxy).

Their keys (with defaults) go into ``regsite.config.LISTS``. A prefix is the local namespace of one
upstream; ``host`` is the registry name containerd sends as ``?ns=``. A bad entry stops start-up
with one line naming it and the key; upstream credentials (``username``, ``password``, or any
written into the URL) never appear in such a line.

An empty prefix is a root mirror: the whole registry is a read-only copy of one upstream, names one
to one, as the CNCF registry's proxy mode is (what Docker Engine's ``registry-mirrors`` needs). It is
then the only entry: beside other prefixes it would answer for every name they do not claim, so an
upstream repository whose name begins with another prefix (``hub/x`` of docker.io beside a ``hub``
cache) could never be pulled, and a name's upstream would change when a prefix is added.
"""
from __future__ import annotations

import re
from typing import Any, Callable
from urllib.parse import urlsplit

from regsite.config import ConfigError, Required, entry_name

SCHEMA: dict[str, Any] = {
    "prefix": Required(str),
    "url": Required(str),
    "host": "",
    "username": "",
    "password": "",
    "tag_ttl_seconds": 300,
    "evict_after_days": 30,
    "timeout_seconds": 10,
    "total_timeout_seconds": 30,
    "max_concurrent_fetches": 4,
    "negative_ttl_seconds": 30,
    "realm_hosts": [],
}
SECRETS = {("proxy", "username"), ("proxy", "password")}
_HOST = re.compile(r"(?:http://)?[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?", re.IGNORECASE)
_PREFIX = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")


def _shown(url: str) -> str:
    """A URL as an error may show it: whatever stands before an ``@`` may be credentials."""
    return repr(url) if "@" not in url else "a URL with credentials in it"


def _check_url(where: str, text: str) -> None:
    url = urlsplit(text)
    if "@" in url.netloc or (not url.netloc and "@" in text):
        raise ConfigError(f"{where} url: credentials go in username and password, not in the URL")
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ConfigError(f"{where} url: expected an http:// or https:// URL, got {_shown(text)}")
    if url.query or url.fragment:
        raise ConfigError(f"{where} url: expected no query or fragment")


def check(entries: list[dict[str, Any]]) -> None:
    prefixes: list[str] = []
    hosts: set[str] = set()
    for index, entry in enumerate(entries):
        where = entry_name("proxy", index, entry, "prefix")
        prefix = entry["prefix"]
        if prefixes and (prefix == "" or "" in prefixes):
            raise ConfigError(f'{where} prefix: a root mirror (prefix = "") must be the only [[proxy]] entry: '
                              "it answers for every repository name")
        if prefix and not _PREFIX.fullmatch(prefix):
            raise ConfigError(f"{where} prefix: expected a repository name such as \"hub\", got {prefix!r}")
        for other in prefixes:
            if prefix == other or prefix.startswith(other + "/") or other.startswith(prefix + "/"):
                raise ConfigError(f"{where} prefix: overlaps the prefix {other!r} of an earlier entry")
        prefixes.append(prefix)
        _check_url(where, entry["url"])
        host = entry["host"]
        if host and (not all(c.isalnum() or c in ".-:_" for c in host) or host in hosts):
            raise ConfigError(f"{where} host: expected a registry host name used by no earlier entry, "
                              f"got {host!r}")
        hosts.add(host)
        if entry["password"] and not entry["username"]:
            raise ConfigError(f"{where} password: given without a username")
        for key in ("tag_ttl_seconds", "evict_after_days", "negative_ttl_seconds"):
            if entry[key] < 0:
                raise ConfigError(f"{where} {key}: must not be negative, got {entry[key]}")
        for key in ("timeout_seconds", "total_timeout_seconds", "max_concurrent_fetches"):
            if entry[key] <= 0:
                raise ConfigError(f"{where} {key}: must be a positive integer, got {entry[key]}")
        for host in entry["realm_hosts"]:
            if not _HOST.fullmatch(host):
                raise ConfigError(f"{where} realm_hosts: expected host names such as \"auth.docker.io\" (or "
                                  f"\"http://host\" to allow plain http), got {host!r}")


def register(lists: dict[str, dict[str, Any]], validators: dict[str, Callable[[list[dict[str, Any]]], None]],
             secrets: set[tuple[str, str]]) -> None:
    lists["proxy"] = SCHEMA
    validators["proxy"] = check
    secrets.update(SECRETS)
