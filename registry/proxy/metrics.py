"""Counters of the pull-through caches. Labelled by the cache's prefix (a handful, from the
configuration) and a bounded kind or reason: never a repository name, never credentials."""
from __future__ import annotations

from prometheus_client import Counter

HITS = Counter(
    "registry_proxy_hits",
    "Pulls through a pull-through cache answered from what it stored, by cache prefix and kind "
    "(manifest, blob); a tag confirmed by a HEAD upstream counts here too.",
    ["proxy", "kind"],
)
MISSES = Counter(
    "registry_proxy_misses",
    "Pulls through a pull-through cache that fetched from the upstream, by cache prefix and kind.",
    ["proxy", "kind"],
)
STALE = Counter(
    "registry_proxy_stale_served",
    "Tags served from the cache, with a Warning header, because the upstream could not confirm them.",
    ["proxy"],
)
UPSTREAM_ERRORS = Counter(
    "registry_proxy_upstream_errors",
    "Upstream failures by cache prefix and reason: unavailable (unreachable, timed out, 503), "
    "timeout (no whole answer within total_timeout_seconds), throttled (429), failed (other errors, "
    "refused credentials), digest_mismatch.",
    ["proxy", "reason"],
)
UPSTREAM_BYTES = Counter(
    "registry_proxy_upstream_bytes",
    "Bytes of manifests and blobs received from each upstream, by cache prefix.",
    ["proxy"],
)
NEGATIVE_HITS = Counter(
    "registry_proxy_negative_hits",
    "Pulls through a pull-through cache answered 404 without asking the upstream, which answered 404 "
    "for the same name within negative_ttl_seconds, by cache prefix and kind.",
    ["proxy", "kind"],
)
BUSY = Counter(
    "registry_proxy_busy",
    "Pulls through a pull-through cache refused with 503 because the worker's request threads allowed "
    "to wait on upstreams (max_concurrent_fetches, half of [server] threads) were all waiting.",
    ["proxy"],
)
