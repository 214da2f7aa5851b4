"""Events written to the outbox, in the caller's transaction, in CNCF distribution's format.

Each function is the one call a registry service (or view, for pulls) makes when something happened:
it writes one row per endpoint that wants the event, so the event exists exactly when the change
does (a rolled-back push leaves none) and a registry killed after the commit still has it. Nothing
is written, and nothing is asked of the database, when no endpoint wants the event.
"""
from __future__ import annotations

import hashlib
import logging
import socket
import uuid
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Sequence

from django.conf import settings
from django.utils import timezone

from notifications import context, queries
from notifications.endpoints import Endpoint
from replication import feed

# The envelope's media type: what consumers of CNCF distribution 2.x's notifications read.
MEDIA_TYPE = "application/vnd.docker.distribution.events.v1+json"
# What distribution calls a blob whose use it does not know (a blob is pushed before the manifest
# that says it is a layer or a config).
BLOB_MEDIA_TYPE = "application/octet-stream"
INSTANCE_ID = str(uuid.uuid4())  # this process; changes at every start, as distribution's does
# A reader pulling one image in a loop writes one pull event per this long, not one per pull: a
# receiver that hangs would otherwise see the outbox grow by thousands of rows a minute.
COALESCE_PULLS = timedelta(minutes=1)

log = logging.getLogger("notifications")

_endpoints: tuple[object, list[Endpoint]] | None = None


def configured() -> list[Endpoint]:
    """The [[notifications]] endpoints of the current settings (compiled once per settings list)."""
    global _endpoints
    entries = settings.NOTIFICATIONS
    if _endpoints is None or _endpoints[0] is not entries:
        _endpoints = (entries, [Endpoint.of(entry) for entry in entries])
    return _endpoints[1]


def manifest_pushed(repository: str, digest: str, media_type: str, size: int, tags: list[str],
                    subject: str = "") -> None:
    """A manifest PUT: one event per tag it was pushed with, or one without a tag. ``subject``: the
    digest a referrer refers to."""
    feed.manifest_pushed(repository, digest, tags, subject)
    _record("push", repository, [_manifest(repository, digest, media_type, size, tag) for tag in tags or [""]])


def manifest_pulled(repository: str, digest: str, media_type: str, size: int, tag: str = "") -> None:
    _record("pull", repository, [_manifest(repository, digest, media_type, size, tag)], coalesce=digest)


def manifest_deleted(repository: str, digest: str) -> None:
    feed.manifest_deleted(repository, digest)
    _record("delete", repository, [{"digest": digest, "repository": repository}])


def tag_deleted(repository: str, tag: str) -> None:
    tags_deleted(repository, [tag])


def tags_deleted(repository: str, tags: Sequence[str]) -> None:
    """Tags removed together (by [[retention]]): one delete event each, written in one statement."""
    feed.tags_deleted(repository, tags)
    _record("delete", repository, [{"repository": repository, "tag": tag} for tag in tags])


def blob_pushed(repository: str, digest: str, size: int) -> None:
    _record("push", repository, [_blob(repository, digest, size)])


def blob_mounted(repository: str, digest: str, size: int, from_repository: str) -> None:
    _record("mount", repository, [_blob(repository, digest, size) | {"fromRepository": from_repository}])


def blob_pulled(repository: str, digest: str, size: int) -> None:
    _record("pull", repository, [_blob(repository, digest, size)], coalesce=digest)


def blob_deleted(repository: str, digest: str) -> None:
    _record("delete", repository, [{"digest": digest, "repository": repository}])


def repository_deleted(repository: str) -> None:
    _record("delete", repository, [{"repository": repository}])


def replication_finished(job: dict[str, Any]) -> None:
    """A replication run ended (replication.runner): its policy, state and counts as the target."""
    _record("replication", "", [job])


def _manifest(repository: str, digest: str, media_type: str, size: int, tag: str) -> dict[str, Any]:
    target = {"mediaType": media_type, "digest": digest, "size": size, "length": size,
              "repository": repository, "url": _url(f"/v2/{repository}/manifests/{digest}")}
    return target | ({"tag": tag} if tag else {})


def _blob(repository: str, digest: str, size: int) -> dict[str, Any]:
    return {"mediaType": BLOB_MEDIA_TYPE, "digest": digest, "size": size, "length": size,
            "repository": repository, "url": _url(f"/v2/{repository}/blobs/{digest}")}


def _url(path: str) -> str:
    cause = context.current()
    return f"{cause.scheme}://{cause.host}{path}" if cause.host else ""


def _record(action: str, repository: str, targets: list[dict[str, Any]], coalesce: str = "") -> None:
    """Write the events for every endpoint that wants them. ``coalesce``: a pull's digest; the
    pulls of one repository and digest within COALESCE_PULLS of one that was written are not."""
    if not settings.NOTIFICATIONS or not targets:
        return
    wanted = [endpoint for endpoint in configured() if endpoint.wants(action, repository)]
    if not wanted:
        return
    now = timezone.now()
    if coalesce:
        key = hashlib.sha256(f"{repository}@{coalesce}".encode()).hexdigest()
        if not queries.pull_due(key, now, now - COALESCE_PULLS):
            return
    events = [event(action, {k: v for k, v in target.items() if v != ""}, now) for target in targets]
    for dropped in queries.add([e.name for e in wanted], events, now, {e.name: e.max_pending for e in wanted}):
        limit = next(e.max_pending for e in wanted if e.name == dropped.endpoint)
        log.warning("notifications: endpoint %s holds max_pending = %d undelivered events: dropped the %d oldest, "
                    "written %s to %s (%d dropped so far)", dropped.endpoint, limit, dropped.count,
                    _moment(dropped.first), _moment(dropped.last), dropped.total,
                    extra={"endpoint": dropped.endpoint, "dropped": dropped.count, "dropped_total": dropped.total})


def _moment(at: datetime) -> str:
    return at.isoformat(timespec="seconds").replace("+00:00", "Z")


def event(action: str, target: dict[str, Any], now: datetime) -> dict[str, Any]:
    """One event record, with the fields and names of distribution's notifications.Event."""
    cause = context.current()
    actor = cause.actor()
    return {
        "id": str(uuid.uuid4()),
        "timestamp": now.isoformat().replace("+00:00", "Z"),
        "action": action,
        "target": target,
        "request": cause.request_record(),
        "actor": {"name": actor} if actor else {},
        "source": {"addr": _source_addr(), "instanceID": INSTANCE_ID},
    }


@lru_cache(maxsize=1)
def _source_addr() -> str:
    # As distribution: this node's host name and the port it serves.
    bind = settings.NOTIFICATIONS_SOURCE
    port = "" if bind.startswith("unix:") else bind.rpartition(":")[2]
    return f"{socket.gethostname()}:{port}" if port else socket.gethostname()
