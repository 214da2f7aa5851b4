"""Each policy's state, as /metrics, the web UI and ``manage.py replicate`` show it."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from replication import queries
from replication.feed import configured
from replication.queries import JobRow

LEFT_SHOWN = 20


@dataclass(frozen=True)
class PolicyStatus:
    name: str
    configured: bool
    direction: str = ""
    remote: str = ""  # host and port: never credentials
    trigger: str = ""
    schedule_minutes: int = 0
    repositories: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    deletes: bool = False
    pending: int = 0
    oldest: datetime | None = None  # when the oldest pending item was written
    bytes: int = 0
    items: int = 0
    failures: int = 0
    attempts: int = 0  # failed attempts in a row against the remote
    next_attempt_at: datetime | None = None
    last_error: str = ""
    last_error_at: datetime | None = None
    last_success_at: datetime | None = None
    jobs: list[JobRow] = field(default_factory=list)  # the latest first
    left: list[tuple[str, str, str]] = field(default_factory=list)  # the last run's tags left to others

    @property
    def state(self) -> str:
        if not self.configured:
            return "unconfigured"
        return "failing" if self.attempts else "ok"

    @property
    def lag_seconds(self) -> float:
        """How far the other side is behind: the age of the oldest item not yet done (0 when none)."""
        return max((timezone.now() - self.oldest).total_seconds(), 0.0) if self.oldest else 0.0

    @property
    def last_job(self) -> JobRow | None:
        return self.jobs[0] if self.jobs else None


def statuses(jobs: int = 0) -> list[PolicyStatus]:
    """Configured policies in configuration order, then any other name the tables still hold;
    with each one's ``jobs`` latest runs."""
    backlogs, states = queries.backlogs(), queries.states()
    policies = {policy.name: policy for policy in configured()}
    names = list(policies) + sorted((set(backlogs) | set(states)) - set(policies))
    result = []
    for name in names:
        policy, backlog, state = policies.get(name), backlogs.get(name), states.get(name)
        described = {} if policy is None else {
            "direction": policy.direction, "remote": policy.remote, "trigger": policy.trigger,
            "schedule_minutes": policy.schedule_minutes, "repositories": policy.repositories,
            "tags": tuple(pattern.pattern for pattern in policy.tags), "deletes": policy.deletes}
        totals = {} if state is None else {
            "bytes": state.bytes, "items": state.items, "failures": state.failures, "attempts": state.attempts,
            "next_attempt_at": state.next_attempt_at, "last_error": state.last_error,
            "last_error_at": state.last_error_at, "last_success_at": state.last_success_at}
        recent = queries.recent_jobs(name, jobs) if jobs else []
        result.append(PolicyStatus(
            name=name, configured=policy is not None, pending=backlog.pending if backlog else 0,
            oldest=backlog.oldest if backlog else None, jobs=recent,
            left=queries.left_alone(recent[0].id, LEFT_SHOWN) if recent else [],
            **described, **totals))  # type: ignore[arg-type]
    return result
