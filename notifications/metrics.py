"""/metrics: each endpoint's pending events and its delivered, failed and expired totals.

Read from the database at scrape time, like the storage gauges: the outbox and the totals are shared
by every worker and replica and survive restarts, so any worker of any replica reports the same
numbers (aggregate replicas with max(), not sum()).
"""
from __future__ import annotations

import logging
import time
from typing import Iterator

from django.db import DatabaseError
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from notifications.status import statuses

log = logging.getLogger(__name__)


class NotificationsCollector:
    def collect(self) -> Iterator[Metric]:
        try:
            rows = statuses()
        except DatabaseError as exc:
            log.warning("metrics: notification totals unavailable: %s", exc)
            return
        if not rows:
            return
        labels = ["endpoint"]
        pending = GaugeMetricFamily("registry_notifications_pending",
                                    "Events written and not yet accepted by the endpoint.", labels=labels)
        oldest = GaugeMetricFamily("registry_notifications_oldest_pending_seconds",
                                   "Age of the endpoint's oldest pending event (0 when none).", labels=labels)
        delivered = CounterMetricFamily("registry_notifications_delivered",
                                        "Events the endpoint accepted.", labels=labels)
        failed = CounterMetricFamily("registry_notifications_failed",
                                     "Delivery attempts (POSTs) that failed: no connection, no answer in time, or a "
                                     "status other than 2xx or 3xx. The events are retried.", labels=labels)
        expired = CounterMetricFamily("registry_notifications_expired",
                                      "Events never delivered within the endpoint's max_age_hours, given up "
                                      "(each is logged).", labels=labels)
        dropped = CounterMetricFamily("registry_notifications_dropped",
                                      "Events dropped undelivered because the endpoint held its max_pending "
                                      "(the oldest go first; each batch is logged).", labels=labels)
        now = time.time()
        for row in rows:
            pending.add_metric([row.name], row.pending)
            oldest.add_metric([row.name], max(now - row.oldest.timestamp(), 0.0) if row.oldest else 0.0)
            delivered.add_metric([row.name], row.delivered)
            failed.add_metric([row.name], row.failed)
            expired.add_metric([row.name], row.expired)
            dropped.add_metric([row.name], row.dropped)
        yield from (pending, oldest, delivered, failed, expired, dropped)
