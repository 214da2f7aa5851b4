"""Helpers for notification tests: [[notifications]] entries as the configuration loader makes them."""
from __future__ import annotations

import json
from typing import Any

from notifications.models import PendingEvent
from regsite import config


def entry(name: str = "ci", url: str = "http://127.0.0.1:9/hooks", **keys: Any) -> dict[str, Any]:
    """A complete entry: the schema's defaults, ``name``, ``url`` and ``keys``."""
    defaults = {key: (value.copy() if isinstance(value, (list, dict)) else value)
                for key, value in config.LISTS["notifications"].items() if not isinstance(value, config.Required)}
    return {**defaults, "name": name, "url": url, **keys}


def queued(endpoint: str = "ci") -> list[dict[str, Any]]:
    """The events waiting for ``endpoint``, oldest first."""
    rows = PendingEvent.objects.filter(endpoint=endpoint).order_by("id").values_list("payload", flat=True)
    return [json.loads(row) for row in rows]


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(action, repository, tag or digest) of each event."""
    return [(e["action"], e["target"].get("repository", ""), e["target"].get("tag") or e["target"].get("digest", ""))
            for e in events]
