"""The configured pull-through caches ([[proxy]] tables) and which one a repository name belongs to.

A cache's namespace is its prefix: ``hub/library/alpine`` is ``library/alpine`` of the upstream
whose prefix is ``hub``. The configuration was checked at start-up (regsite.config): prefixes are
valid names that do not overlap, URLs carry no credentials.
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
    timeout: float
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def upstream(self) -> str:
        """How messages name the upstream: its host and port, never its credentials."""
        return urlsplit(self.url).netloc

    def read_only(self, refused: str = "") -> ReadOnlyNamespace:
        """The refusal of a write into this cache's namespace; ``refused`` names what was refused."""
        return ReadOnlyNamespace(f"{self.prefix}/ is a read-only pull-through cache of {self.upstream}"
                                 + (f": no {refused} here" if refused else ""))

    def upstream_name(self, name: str) -> str:
        """The upstream's name of the local repository ``name`` (which is under this prefix)."""
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
        if name == mirror.prefix or name.startswith(mirror.prefix + "/"):
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
