"""The PostgreSQL connection pool of a worker (regsite.postgresql) when the server goes away, comes
back, turns read-only or stops answering, against a real server (and tests/support/faultproxy.py
between the two for a path that swallows everything)."""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
from django.db import OperationalError
from django.db.utils import ConnectionHandler

from regsite import database_url
from regsite import db as db_module
from tests.e2e.conftest import running_postgres
from tests.support.faultproxy import PASS, STALL, FaultProxy
from tests.support.postgres import Postgres

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[Postgres]:
    """A cluster of this module's own: its tests stop and restart it."""
    yield from running_postgres()


def _wrapper(url: str, answer_timeout: float | None = None, **database: Any) -> Any:
    """A Django connection of its own (alias "probe"), with the pool the registry would build."""
    settings = database_url.django_settings({"url": url, "pool_size": 4, "pool_timeout": 3,
                                             "statement_timeout": 30, **database})
    if answer_timeout is not None:
        settings["ANSWER_TIMEOUT"] = answer_timeout
    handler = ConnectionHandler({"default": {"ENGINE": "django.db.backends.dummy"}, "probe": settings})
    return handler["probe"]


@pytest.fixture
def connect(django_db_blocker: Any) -> Iterator[Any]:
    made: list[Any] = []

    def make(url: str, **kwargs: Any) -> Any:
        made.append(_wrapper(url, **kwargs))
        return made[-1]

    with django_db_blocker.unblock():  # these are not the tests' Django database
        yield make
        for wrapper in made:
            wrapper.close()
            wrapper.close_pool()


def _one(wrapper: Any, sql: str) -> Any:
    with wrapper.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0] if cursor.description else None


def _hold(wrapper: Any, count: int) -> None:
    """Fill the pool with ``count`` idle connections (each checked out once, then given back)."""
    pool = wrapper.pool
    pool.open()
    conns = [pool.getconn() for _ in range(count)]
    for conn in conns:
        pool.putconn(conn)


def test_a_read_only_error_is_a_503_and_the_connection_is_not_used_again(server: Postgres, connect) -> None:
    db = connect(server.new_database())
    _one(db, "CREATE TABLE marks (n int)")
    pid = _one(db, "SELECT pg_backend_pid()")
    _one(db, "SET default_transaction_read_only = on")  # as a primary demoted under it would be
    with pytest.raises(OperationalError, match="read-only"):  # Django's InternalError was a 500
        _one(db, "INSERT INTO marks VALUES (1)")
    db.close()  # back to the pool, which must drop it
    assert _one(db, "SELECT pg_backend_pid()") != pid
    _one(db, "INSERT INTO marks VALUES (2)")
    assert _one(db, "SELECT count(*) FROM marks") == 1


def test_a_standby_is_never_taken_for_the_primary(server: Postgres, connect) -> None:
    url = server.new_database()
    name = url.rsplit("/", 1)[1]
    server.query(f"ALTER DATABASE {name} SET default_transaction_read_only = on")  # says it is read-only
    db = connect(url, pool_timeout=2)
    started = time.monotonic()
    with pytest.raises(OperationalError):
        db.ensure_connection()
    assert time.monotonic() - started < 2 + 1.5  # pool_timeout, and a loaded machine's slack
    server.query(f"ALTER DATABASE {name} RESET default_transaction_read_only")
    assert _one(db, "SELECT 1") == 1


def test_a_query_on_a_path_that_goes_silent_fails_within_the_answer_timeout(server: Postgres, connect) -> None:
    proxy = FaultProxy(("127.0.0.1", server.port)).start()
    try:
        url = server.new_database().replace(f":{server.port}/", f":{proxy.port}/")
        db = connect(url, answer_timeout=1.5)
        assert _one(db, "SELECT 1") == 1
        proxy.set(STALL)
        started = time.monotonic()
        with pytest.raises(OperationalError, match="did not answer within 1.5 s"):
            _one(db, "SELECT 2")
        # Without a bound it waited for as long as the kernel kept the connection: forever here.
        assert time.monotonic() - started < 1.5 + 2
        db.close()
        proxy.set(PASS)
        assert _one(db, "SELECT 3") == 3  # a new connection: the silent one was dropped
    finally:
        proxy.stop()


def test_a_server_that_accepts_and_never_answers_costs_connect_timeout(server: Postgres, connect) -> None:
    proxy = FaultProxy(("127.0.0.1", server.port)).start()
    try:
        proxy.set(STALL)
        url = server.new_database().replace(f":{server.port}/", f":{proxy.port}/") + "?connect_timeout=2"
        db = connect(url, pool_timeout=3)
        started = time.monotonic()
        with pytest.raises(OperationalError):
            db.ensure_connection()
        assert time.monotonic() - started < 3 + 1.5  # pool_timeout, and slack
        assert proxy.accepted >= 1
    finally:
        proxy.stop()


def test_after_a_restart_one_failed_check_replaces_every_idle_connection(server: Postgres, connect) -> None:
    db = connect(server.new_database())
    _hold(db, 4)
    server.restart()  # the four idle connections are dead now
    started = time.monotonic()
    assert _one(db, "SELECT 1") == 1
    # psycopg_pool alone checks them one at a time, pausing 1, 2, then 4 s between: 7 s here.
    assert time.monotonic() - started < 2.5


def test_the_pool_is_back_within_a_second_or_so_of_the_server(server: Postgres, connect) -> None:
    db = connect(server.new_database(), pool_timeout=1, pool_size=2)
    _hold(db, 2)  # a full pool: only its own reconnects bring connections back
    server.stop(keep_data=True)
    try:
        down = time.monotonic()
        while time.monotonic() - down < 8:  # reconnect attempts pile up their pauses meanwhile
            with pytest.raises(OperationalError):
                _one(db, "SELECT 1")
            db.close()
    finally:
        server.start_again()
    back = time.monotonic()
    while True:
        try:
            assert _one(db, "SELECT 1") == 1
            break
        except OperationalError:
            db.close()
            assert time.monotonic() - back < 10, "the pool never came back"
    # Reconnects at most a second apart; psycopg_pool's doubling pauses were 4 to 8 s by now.
    assert time.monotonic() - back < 2.5


def test_readiness_names_a_read_only_server_as_not_a_primary_within_its_bound(server: Postgres, connect) -> None:
    url = server.new_database()
    name = url.rsplit("/", 1)[1]
    server.query(f"ALTER DATABASE {name} SET default_transaction_read_only = on")  # as a standby says
    db = connect(url)
    started = time.monotonic()
    assert db_module.primary_problem(1.0, db) == "database is read-only (a standby?): not a primary"
    assert time.monotonic() - started < 1.0 + 1.5  # its bound, not pool_timeout; and slack
    server.query(f"ALTER DATABASE {name} RESET default_transaction_read_only")
    assert db_module.primary_problem(1.0, db) is None
