"""Database connections held only while a request uses them, and whether they reach a primary.

With PostgreSQL each worker has a small connection pool (regsite.config), so a thread must not keep
a connection while it waits on a client: a slow upload would hold it for minutes and a few hundred
downloads would exhaust the pool. SQLite keeps one connection per thread (no pool), which costs
nothing to keep.
"""
from __future__ import annotations

import logging
from typing import Callable

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, HttpResponseBase

log = logging.getLogger(__name__)
# The longest /ready waits for the database: a load balancer's or kubelet's check gives up after a
# few seconds, and a thread waiting longer for a dead server only holds a request thread.
PRIMARY_PROBE_SECONDS = 2.0
NOT_PRIMARY = "database is read-only (a standby?): not a primary"


def release() -> None:
    """Give the connection back to the pool, if it is pooled and no transaction is open."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


class ReleaseBeforeStreamingMiddleware:
    """A streamed response (a blob) is sent long after the view has finished with the database:
    the connection goes back before the first byte, not after the last (when Django would)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if response.streaming:
            release()
        return response


def primary_problem(seconds: float = PRIMARY_PROBE_SECONDS, wrapper: BaseDatabaseWrapper = connection) -> str | None:
    """None when this process reaches a writable primary within ``seconds``; else what is wrong.

    PostgreSQL only (a SQLite file is checked by what reads and writes it). A connection of the pool
    is taken with that bound, not ``pool_timeout``, and asked whether its server is in recovery or
    read-only: after a failover an address may still lead to the demoted node.
    """
    from registry import queries  # after Django's apps are ready

    pool = getattr(wrapper, "pool", None)
    if pool is None:
        return None
    try:
        pool.open()
        with pool.connection(timeout=seconds) as conn, conn.bounded(seconds):
            writable = queries.takes_writes(conn)
    except Exception as exc:  # psycopg's errors, PoolTimeout
        if getattr(pool, "refused_read_only", False):  # every address it tried leads to a standby
            log.warning("readiness: the database server takes no writes (a standby?): %s", exc)
            return NOT_PRIMARY
        log.warning("readiness: the database does not answer within %g s: %s", seconds, exc)
        return "database does not answer"
    if not writable:
        log.warning("readiness: the database server is a standby or read-only")
        return NOT_PRIMARY
    return None
