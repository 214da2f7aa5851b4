"""/metrics: each policy's bytes, items and failures, and how far its other side lags behind.

Read from the database at scrape time, like the notification totals: they are shared by every worker
and replica and survive restarts, so any worker reports the same numbers (aggregate with max()).
"""
from __future__ import annotations

import logging
from typing import Iterator

from django.db import DatabaseError
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from replication.status import statuses

log = logging.getLogger(__name__)


class ReplicationCollector:
    def collect(self) -> Iterator[Metric]:
        try:
            rows = statuses()
        except DatabaseError as exc:
            log.warning("metrics: replication totals unavailable: %s", exc)
            return
        if not rows:
            return
        labels = ["policy"]
        moved = CounterMetricFamily("registry_replication_bytes",
                                    "Blob bytes sent to (push) or fetched from (pull) the policy's remote registry.",
                                    labels=labels)
        items = CounterMetricFamily("registry_replication_items",
                                    "Items (tags, referrers, deletions) replicated; those already up to date are "
                                    "not counted.", labels=labels)
        failures = CounterMetricFamily("registry_replication_failures",
                                       "Failed attempts: the remote unreachable or answering 429/5xx (retried with "
                                       "backoff), or an item refused (retried, then given up).", labels=labels)
        lag = GaugeMetricFamily("registry_replication_lag_seconds",
                                "Age of the policy's oldest item not yet replicated (0 when none is waiting).",
                                labels=labels)
        pending = GaugeMetricFamily("registry_replication_pending", "Items waiting to be replicated.",
                                    labels=labels)
        for row in rows:
            moved.add_metric([row.name], row.bytes)
            items.add_metric([row.name], row.items)
            failures.add_metric([row.name], row.failures)
            lag.add_metric([row.name], row.lag_seconds)
            pending.add_metric([row.name], row.pending)
        yield from (moved, items, failures, lag, pending)
