"""Django's PostgreSQL backend, with a connection pool that rides through a failover.

Django's pool (psycopg_pool, one per worker process) is kept, with what a failover needs on top:

- every wait for an answer on a connection is bounded (``ANSWER_TIMEOUT``, regsite.database_url):
  a path that swallows packets costs a request that long, then an OperationalError (503), and the
  connection is dropped;
- a connection found read-only (a demoted primary, or a standby an address still leads to) is
  dropped at its first read-only error, which becomes an OperationalError: 503 with Retry-After,
  not a 500, and never the same error again on the same connection;
- the check of a pooled connection before use is bounded by ``connect_timeout`` and refuses a
  standby. One failing check drops every idle connection, which reach the same server, instead of
  psycopg_pool's checking them one at a time with a pause doubling between each (1, 2, 4 s ...);
- reconnection attempts while the server is away are at most a second apart (psycopg_pool doubles
  the pause each time, which kept a pool away for up to 16 s more after a 10 s failover);
- while its last attempt to connect failed and it has no idle connection, the pool makes a request
  wait at most UNREACHABLE_WAIT for one, not ``pool_timeout``: the 503s of an outage come at once
  and leave the request threads free (for /health, and for whatever needs no database).
"""
from __future__ import annotations

import random
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import psycopg
from django.db.backends.postgresql import base
from django.db.backends.base.base import NO_DB_ALIAS
from psycopg import errors
from psycopg_pool import ConnectionPool
from psycopg_pool.base import AttemptWithBackoff

MAX_RECONNECT_DELAY = 1.0
# After a second failing check in one wait for a connection (a fresh connection refused too),
# pause before the next, so that a server refusing every connection is not asked in a busy loop.
RECHECK_PAUSE = 0.25
UNREACHABLE_WAIT = 1.0


# What libpq says when target_session_attrs refuses the server it reached (read-write, primary).
READ_ONLY_REFUSALS = ("session is read-only", "server is in hot standby mode")


class NotPrimary(errors.OperationalError):
    """The server takes no writes: a standby, or a primary demoted under its connections."""


class Connection(psycopg.Connection[Any]):
    """A connection whose every wait for the server ends after ``answer_timeout`` seconds."""

    answer_timeout: float | None = None
    check_timeout: float = 5.0
    _bound: float | None = None

    @contextmanager
    def bounded(self, seconds: float) -> Iterator[None]:
        """Waits in the block end after ``seconds`` instead of ``answer_timeout``."""
        previous, self._bound = self._bound, seconds
        try:
            yield
        finally:
            self._bound = previous

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        limit = timeout if timeout is not None else self._bound or self.answer_timeout
        try:
            return super().wait(gen, interval=interval, timeout=limit)
        except errors.ReadOnlySqlTransaction as exc:
            self.close()  # its pool discards it when it comes back
            raise NotPrimary(f"the database server is read-only (a standby now?): {exc}") from exc
        except errors._WaitTimeout:
            self.close()
            raise errors.OperationalError(f"the database server did not answer within {limit:g} s") from None


def read_only(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server said it takes no writes (PostgreSQL 14 and later report both on their own)."""
    status = conn.info.parameter_status
    return status("in_hot_standby") == "on" or status("default_transaction_read_only") == "on"


def check(conn: Connection) -> None:
    """Before a pooled connection is used: it answers within ``check_timeout`` (or the bound the pool
    set for the wait it is part of), and takes writes."""
    with conn.bounded(conn._bound or conn.check_timeout):
        ConnectionPool.check_connection(conn)
    if read_only(conn):
        raise NotPrimary("the database server is read-only (a standby now?)")


class _Reconnect(AttemptWithBackoff):
    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, random.uniform(MAX_RECONNECT_DELAY / 2, MAX_RECONNECT_DELAY))


class Pool(ConnectionPool[Connection]):
    # Whether the last attempt to connect failed (and none succeeded since).
    unreachable = False
    # Whether the last connection refused (made or checked) reached a server that takes no writes:
    # /ready tells that apart from a server that does not answer.
    refused_read_only = False

    def getconn(self, timeout: float | None = None) -> Connection:
        if self.unreachable and not self._pool:
            timeout = min(self.timeout if timeout is None else timeout, UNREACHABLE_WAIT)
        return super().getconn(timeout)

    def _connect(self, timeout: float | None = None) -> Connection:
        try:
            conn = super()._connect(timeout)
        except Exception as exc:
            self.unreachable = True
            self.refused_read_only = any(text in str(exc) for text in READ_ONLY_REFUSALS)
            raise
        self.unreachable = self.refused_read_only = False
        return conn

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(attempt or _Reconnect(timeout=self.reconnect_timeout), growing)

    def _getconn_with_check_loop(self, deadline: float) -> Connection:
        failures = 0
        while True:
            conn = self._getconn_unchecked(deadline - time.monotonic())
            try:
                with conn.bounded(max(0.1, min(conn.check_timeout, deadline - time.monotonic()))):
                    self._check_connection(conn)
            except Exception as exc:
                self.refused_read_only = isinstance(exc, NotPrimary)
                self._putconn(conn, from_getconn=True)
                self.drain()  # the idle ones reach the same server: new connections instead
                failures += 1
                if failures > 1:
                    time.sleep(max(0.0, min(RECHECK_PAUSE, deadline - time.monotonic())))
                continue
            except BaseException:
                self._putconn(conn, from_getconn=True)
                raise
            return conn


class DatabaseWrapper(base.DatabaseWrapper):
    # Django's, which its stubs do not declare.
    _connection_pools: dict[str, Any]
    _configure_connection: Callable[[Connection], None]  # returns a bool, which the pool ignores

    @property
    def pool(self) -> Pool | None:
        options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not options:
            return None  # Django's own connection to the "postgres" database (creating a test one)
        if self.alias not in self._connection_pools:
            params = self.get_connection_params()
            params["autocommit"] = True  # as Django's pool does; Django sets it per use
            connection_class = type("Connection", (Connection,), {
                "answer_timeout": self.settings_dict.get("ANSWER_TIMEOUT"),
                "check_timeout": float(params.get("connect_timeout") or Connection.check_timeout),
            })
            pool = Pool(kwargs=params, open=False, configure=self._configure_connection, check=check,
                        connection_class=connection_class, **options)
            # Threads starting together may each build one: the first stored is the one used.
            self._connection_pools.setdefault(self.alias, pool)
        pool = self._connection_pools[self.alias]
        assert isinstance(pool, Pool)
        return pool
