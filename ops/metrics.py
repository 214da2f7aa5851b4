"""Registry metrics beside django-prometheus's HTTP ones, and the /metrics exposition.

Counters are prometheus_client objects: under gunicorn, PROMETHEUS_MULTIPROC_DIR (set by
gunicorn.conf.py) makes each worker write them to its own mmap file and a scrape adds the files up,
so whichever worker answers reports the whole service. Gauges that describe shared state (stored
blobs, live tokens) are not kept in any process: they are read from the database and the token
directory when Prometheus scrapes.

Labels are bounded: an operation, an outcome, a mechanism, a role, a configured rule's name. Never a
repository or a user.
"""
from __future__ import annotations

import logging
import os
from typing import Iterable, Iterator

import prometheus_client
from django.db import DatabaseError
from prometheus_client import CollectorRegistry, Counter, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric

from notifications.metrics import NotificationsCollector
from ops.processes import ProcessesCollector
from registry import queries
from regsite.version import version
from replication.metrics import ReplicationCollector
from tokens.access import Role

log = logging.getLogger(__name__)

BYTES_UPLOADED = Counter(
    "registry_bytes_uploaded", "Bytes of blobs and manifests accepted from clients."
)
BYTES_DOWNLOADED = Counter(
    "registry_bytes_downloaded", "Bytes of blobs and manifests served to clients."
)
BLOB_OPERATIONS = Counter(
    "registry_blob_operations",
    "Blob pushes (completed uploads and mounts), pulls (GET) and deletes, by outcome.",
    ["operation", "outcome"],
)
MANIFEST_OPERATIONS = Counter(
    "registry_manifest_operations",
    "Manifest pushes (PUT), pulls (GET) and deletes, by outcome.",
    ["operation", "outcome"],
)
UPLOAD_SESSIONS = Counter(
    "registry_upload_sessions",
    "Upload session events: started, completed, failed (a chunk or the final PUT refused), cancelled.",
    ["event"],
)
AUTH_ATTEMPTS = Counter(
    "registry_auth_attempts",
    "Requests that presented credentials, by mechanism (basic, robot, token, bearer, signed, password, other) "
    "and outcome.",
    ["mechanism", "outcome"],
)
AUTH_DISTRIBUTED_FAILURES = Counter(
    "registry_auth_distributed_failures",
    "Failed password logins against a user whose logins failed from at least 5 client addresses within "
    "10 minutes: password guessing spread over addresses, which per-address throttling does not slow.",
)

CLIENT_TIMEOUTS = Counter(
    "registry_client_timeouts",
    "Connections cut off for slowness: a request head or small body not complete in time (head, "
    "body), an upload stalled or below the minimum rate (body), a response not read (response), a TLS "
    "handshake not complete in time (handshake).",
    ["phase"],
)

def outcome(status: int) -> str:
    """A bounded outcome label for an HTTP status."""
    if status < 400:
        return "success"
    if status in (401, 403):
        return "denied"
    if status == 404:
        return "not_found"
    if status < 500:
        return "invalid"
    return "error"


class StateCollector:
    """Gauges read from shared state at scrape time: stored blobs and live API tokens.

    A source that cannot be read leaves its gauges out of the scrape (Prometheus then shows them
    as absent) instead of failing the whole scrape: the HTTP metrics matter most in an outage.
    """

    def collect(self) -> Iterator[Metric]:
        build = GaugeMetricFamily("registry_build_info", "The registry's version (always 1).", labels=["version"])
        build.add_metric([version()], 1)
        yield build
        try:
            totals = queries.blob_totals()
        except DatabaseError as exc:
            log.warning("metrics: blob totals unavailable: %s", exc)
        else:
            blobs = GaugeMetricFamily("registry_storage_blobs", "Blobs stored (each digest once).")
            blobs.add_metric([], totals.blobs)
            yield blobs
            stored = GaugeMetricFamily("registry_storage_bytes", "Bytes of blob data stored.")
            stored.add_metric([], totals.size)
            yield stored
        yield from quota_gauges()
        try:
            by_role = active_tokens_by_role()
        except (OSError, DatabaseError) as exc:
            log.warning("metrics: token counts unavailable: %s", exc)
            return
        tokens = GaugeMetricFamily(
            "registry_active_tokens", "API tokens that are neither expired nor revoked.", labels=["role"]
        )
        for role, count in by_role.items():
            tokens.add_metric([role], count)
        yield tokens


def quota_gauges() -> Iterator[Metric]:
    """Usage and limit of each [[quota]] rule, labelled with the rule's name (never a repository)."""
    from registry.policies import quotas

    try:
        figures = quotas.usage_by_rule()
    except DatabaseError as exc:
        log.warning("metrics: quota usage unavailable: %s", exc)
        return
    if not figures:
        return
    used = GaugeMetricFamily("registry_quota_usage_bytes",
                             "Bytes of the distinct blobs linked in the repositories of a [[quota]] rule.",
                             labels=["rule"])
    limit = GaugeMetricFamily("registry_quota_limit_bytes", "The max_bytes of a [[quota]] rule.", labels=["rule"])
    for name, (rule, usage) in figures.items():
        used.add_metric([name], usage)
        limit.add_metric([name], rule.max_bytes)
    yield used
    yield limit


def active_tokens_by_role() -> dict[str, int]:
    # Indexed counts (tokens.file_index, or one query): reading every token file would make each
    # scrape as slow as the token directory is large.
    from tokens.services import live_tokens_by_role

    counts = live_tokens_by_role()
    return {role.value: counts.get(role, 0) for role in Role}


class _Sources:
    """Several collectors exposed as one, so that one generate_latest() call renders them all."""

    def __init__(self, collectors: Iterable[prometheus_client.registry.Collector]) -> None:
        self._collectors = list(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir")


def exposition() -> bytes:
    """The Prometheus text format of every metric of the service, summed over all workers."""
    sources: list[prometheus_client.registry.Collector] = [StateCollector(), NotificationsCollector(),
                                                           ReplicationCollector()]
    if multiprocess_dir():
        workers = CollectorRegistry()
        multiprocess.MultiProcessCollector(workers)
        sources += [workers, ProcessesCollector()]
    else:
        sources.append(prometheus_client.REGISTRY)  # with this process's own process_* metrics
    return prometheus_client.generate_latest(_Sources(sources))


# The classic text format: every Prometheus 2.x and 3.x server and promtool read it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
