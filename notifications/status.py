"""Each endpoint's delivery state, as the web UI and ``manage.py notifications list`` show it."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from notifications import queries
from notifications.outbox import configured


@dataclass(frozen=True)
class EndpointStatus:
    name: str
    url: str  # without its query
    events: list[str]
    repositories: str
    configured: bool
    pending: int
    oldest: datetime | None
    delivered: int
    failed: int
    expired: int
    dropped: int  # beyond max_pending
    attempts: int  # failed attempts in a row
    next_attempt_at: datetime | None
    last_error: str
    last_error_at: datetime | None
    last_success_at: datetime | None

    @property
    def state(self) -> str:
        """ok (the last attempt worked, or none was needed), failing, or unconfigured."""
        if not self.configured:
            return "unconfigured"
        return "failing" if self.attempts else "ok"


def statuses() -> list[EndpointStatus]:
    """Configured endpoints in configuration order, then any other name the outbox still holds."""
    backlogs, states = queries.backlogs(), queries.states()
    endpoints = {endpoint.name: endpoint for endpoint in configured()}
    names = list(endpoints) + sorted((set(backlogs) | set(states)) - set(endpoints))
    result = []
    for name in names:
        endpoint, backlog, state = endpoints.get(name), backlogs.get(name), states.get(name)
        result.append(EndpointStatus(
            name=name,
            url=endpoint.shown_url if endpoint else "",
            events=sorted(endpoint.events) if endpoint else [],
            repositories=endpoint.repositories if endpoint else "",
            configured=endpoint is not None,
            pending=backlog.count if backlog else 0,
            oldest=backlog.oldest if backlog else None,
            delivered=state.delivered if state else 0,
            failed=state.failed if state else 0,
            expired=state.expired if state else 0,
            dropped=state.dropped if state else 0,
            attempts=state.attempts if state else 0,
            next_attempt_at=state.next_attempt_at if state else None,
            last_error=state.last_error if state else "",
            last_error_at=state.last_error_at if state else None,
            last_success_at=state.last_success_at if state else None,
        ))
    return result
