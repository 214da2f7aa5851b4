"""The configured pull-through caches ([[proxy]] tables) and which one a repository name belongs to.

A cache's namespace is its prefix: ``hub/library/alpine`` is ``library/alpine`` of the upstream
whose prefix is ``hub``. A root mirror's prefix is empty: every name is its own, ``library/alpine``
is the upstream's ``library/alpine``. The configuration was checked at start-up (regsite.config):
prefixes are valid names that do not overlap, a root mirror is the only cache, URLs carry no
credentials.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from registry import visibility
from registry.services.exceptions import NameUnknown, ReadOnlyNamespace


@dataclass(frozen=True)
class Mirror:
    prefix: str
    url: str  # the upstream's base URL, without a trailing slash
    host: str  # the registry host containerd names in ?ns=, or ""
    tag_ttl: timedelta
    evict_after: timedelta | None  # None: never evicted
    timeout: float  # to connect, and for each read
    total_timeout: float = 30.0  # for everything a pull asks the upstream, whole answers included
    max_fetches: int = 4  # request threads of one worker that may wait on the upstream at once
    negative_ttl: float = 0.0  # how long a 404 of the upstream is remembered
    realm_hosts: frozenset[str] = frozenset()  # token services trusted with the credentials
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def upstream(self) -> str:
        """How messages name the upstream: its host and port, never its credentials."""
        return urlsplit(self.url).netloc

    @property
    def root(self) -> bool:
        """Whether this cache is the whole registry (an empty prefix)."""
        return not self.prefix

    @property
    def namespace(self) -> str:
        """How messages name this cache's part of the registry."""
        return f"{self.prefix}/" if self.prefix else "this registry"

    def holds(self, name: str) -> bool:
        """Whether ``name`` (the prefix itself included) is in this cache's namespace."""
        return self.root or name == self.prefix or name.startswith(self.prefix + "/")

    def read_only(self, refused: str = "") -> ReadOnlyNamespace:
        """The refusal of a write into this cache's namespace; ``refused`` names what was refused."""
        return ReadOnlyNamespace(f"{self.namespace} is a read-only pull-through cache of {self.upstream}"
                                 + (f": no {refused} here" if refused else ""))

    def upstream_name(self, name: str) -> str:
        """The upstream's name of the local repository ``name`` (which is under this prefix)."""
        if self.root:
            return name
        rest = name[len(self.prefix) + 1:]
        if not rest:
            raise NameUnknown(f"{name!r} is the namespace of a pull-through cache, not a repository")
        return rest


def _mirror(entry: dict[str, Any]) -> Mirror:
    return Mirror(
        prefix=entry["prefix"],
        url=entry["url"].rstrip("/"),
        host=entry["host"].lower(),
        tag_ttl=timedelta(seconds=entry["tag_ttl_seconds"]),
        evict_after=timedelta(days=entry["evict_after_days"]) if entry["evict_after_days"] else None,
        timeout=float(entry["timeout_seconds"]),
        total_timeout=float(entry["total_timeout_seconds"]),
        max_fetches=entry["max_concurrent_fetches"],
        negative_ttl=float(entry["negative_ttl_seconds"]),
        realm_hosts=frozenset(host.lower() for host in entry["realm_hosts"]),
        username=entry["username"],
        password=entry["password"],
    )


_built: tuple[Any, tuple[Mirror, ...]] = (None, ())


def configured() -> tuple[Mirror, ...]:
    """The mirrors of ``settings.REGISTRY_PROXIES``, built once per list (tests replace it)."""
    global _built
    raw = getattr(settings, "REGISTRY_PROXIES", None) or []
    if _built[0] is not raw:
        _built = (raw, tuple(_mirror(entry) for entry in raw))
    return _built[1]


def find(name: str) -> Mirror | None:
    """The mirror whose namespace holds ``name`` (the prefix itself included), or None."""
    for mirror in configured():
        if mirror.holds(name):
            return mirror
    return None


def mirrored(name: str) -> bool:
    # A repository the caller may not read is answered as absent here, not fetched (registry.visibility).
    return find(name) is not None and not visibility.hidden(name)


def for_host(host: str) -> Mirror | None:
    """The mirror of the registry containerd calls ``host`` (the ``ns`` query parameter)."""
    wanted = host.lower()
    for mirror in configured():
        if mirror.host and mirror.host == wanted:
            return mirror
    return None


def split(name: str) -> tuple[Mirror, str]:
    """The mirror of ``name`` and the upstream's name for it; NameUnknown when it has none."""
    mirror = find(name)
    if mirror is None:
        raise NameUnknown(f"repository {name!r} is not in a pull-through cache")
    return mirror, mirror.upstream_name(name)
