"""Database connections held only while a request uses them.

With PostgreSQL each worker has a small connection pool (regsite.config), so a thread must not keep
a connection while it waits on a client: a slow upload would hold it for minutes and a few hundred
downloads would exhaust the pool. SQLite keeps one connection per thread (no pool), which costs
nothing to keep.
"""
from __future__ import annotations

from typing import Callable

from django.db import connection
from django.http import HttpRequest, HttpResponseBase


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
