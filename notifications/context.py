"""Who and what caused the events of this thread: the request record and the actor.

The view layer (EventContextMiddleware) binds one per request; the registry services, which know
nothing of HTTP, write events that carry it. Outside a request (manage.py) nothing is bound and the
events say so: an empty actor and a request without method.
"""
from __future__ import annotations

import uuid
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable, Iterator


@dataclass(frozen=True)
class Cause:
    request_id: str
    addr: str = ""
    host: str = ""
    method: str = ""
    user_agent: str = ""
    scheme: str = "http"
    # Read when an event is written, not when the request starts: the web UI learns who is signed
    # in inside its view, after the middleware has run.
    actor: Callable[[], str] = field(default=lambda: "")

    def request_record(self) -> dict[str, str]:
        record = {"id": self.request_id}
        if self.addr:
            record["addr"] = self.addr
        if self.host:
            record["host"] = self.host
        record |= {"method": self.method, "useragent": self.user_agent}
        return record


_current: ContextVar[Cause | None] = ContextVar("notifications_cause", default=None)


def current() -> Cause:
    return _current.get() or Cause(request_id=str(uuid.uuid4()))


def acting_as(actor: str) -> AbstractContextManager[Cause]:
    """The events written inside name ``actor`` (not a principal: "retention") and share one
    request id, so that a receiver can tell which removals one run made."""
    return caused_by(Cause(request_id=str(uuid.uuid4()), actor=lambda: actor))


@contextmanager
def caused_by(cause: Cause) -> Iterator[Cause]:
    token = _current.set(cause)
    try:
        yield cause
    finally:
        _current.reset(token)
