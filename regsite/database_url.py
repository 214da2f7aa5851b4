"""``[database] url`` to a Django DATABASES entry.

A PostgreSQL URL is read by libpq's own parser (through psycopg), so everything libpq takes works as
libpq documents it: several hosts (``postgresql://u@pg1:5432,pg2:5432/registry``, tried in turn), and
a query part of connection parameters (``target_session_attrs``, ``connect_timeout``, ``sslmode``,
``application_name``, ...) kept as they are. What a registry needs to ride through a failover is the
default where the URL says nothing:

- ``target_session_attrs=read-write``: a connection reaches a writable primary or fails, so a node
  that was demoted (or the standby of a multi-host list) is never taken for the primary;
- ``connect_timeout``: a host that takes the connection and never answers costs seconds, not minutes;
- TCP keepalives and ``tcp_user_timeout``: a peer that vanished (a host powered off, a partition) is
  noticed by the kernel instead of being waited on;
- ``jit=off`` (unless the URL's ``options`` set ``jit``): the registry's statements are short reads
  of an index, and PostgreSQL compiles a statement whose estimate is far off for longer than it
  runs (issue 25: 7-10 ms of JIT for the web UI's untagged list, which ran in 2);
- ``[database] statement_timeout``, sent to the server, and the same bound plus ANSWER_GRACE on
  every wait for an answer in the process (regsite.postgresql), for a path that swallows packets.
"""
from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

from regsite.config import ConfigError

DEFAULT_PARAMETERS = {
    "target_session_attrs": "read-write",
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}
# The server cancels a statement at statement_timeout; a server that does not answer at all (its
# path blackholed) is given this much more before the process gives up on the connection.
ANSWER_GRACE = 5.0
SESSION_ATTRS = {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}
INTEGER_PARAMETERS = ("connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                      "keepalives_count", "tcp_user_timeout")
# Connection parameters with a key of their own in Django's DATABASES entry.
DJANGO_KEYS = {"dbname": "NAME", "user": "USER", "password": "PASSWORD", "host": "HOST", "port": "PORT"}


def django_settings(database: Mapping[str, Any]) -> dict[str, Any]:
    url = database["url"]
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        return _sqlite(url)
    if scheme in {"postgres", "postgresql"}:
        return _postgresql(url, database)
    raise ConfigError(f"[database] url: expected sqlite:///path or postgresql://..., got {redact(url)!r}")


def _sqlite(url: str) -> dict[str, Any]:
    # sqlite:///relative/path and sqlite:////absolute/path, as SQLAlchemy spells them.
    path = urlsplit(url).path
    name = path[1:] if path.startswith("/") else path
    if not name:
        raise ConfigError(f"[database] url: no database path in {url!r}")
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": name,
        "OPTIONS": {
            # WAL lets readers run beside the one writer; IMMEDIATE takes the write lock at BEGIN
            # so two workers never deadlock upgrading read locks, and the timeout waits for it.
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
        # Opening a connection and running its PRAGMAs is a large part of a small request's CPU
        # (18274cd has the profile): each gunicorn thread keeps its own connection instead.
        "CONN_MAX_AGE": 60,
    }


def _postgresql(url: str, database: Mapping[str, Any]) -> dict[str, Any]:
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    def refuse(problem: str) -> ConfigError:
        return ConfigError(f"[database] url: {problem} (in {redact(url)!r})")

    try:
        params = {key: str(value) for key, value in conninfo_to_dict(url).items() if value is not None}
    except ProgrammingError as exc:
        raise refuse(str(exc).strip().splitlines()[0]) from None
    if not params.get("dbname"):
        raise refuse("no database name")
    _check_hosts(params.get("host", ""), params.get("port", ""), refuse)
    for key in INTEGER_PARAMETERS:
        if key in params and not params[key].strip().isdigit():
            raise refuse(f"{key}={params[key]!r} is not a whole number")
    if params.get("target_session_attrs", "any") not in SESSION_ATTRS:
        raise refuse(f"target_session_attrs={params['target_session_attrs']!r} is not one of "
                     f"{', '.join(sorted(SESSION_ATTRS))}")
    if "statement_timeout" in params.get("options", ""):
        raise ConfigError("[database] statement_timeout: set it there, not in the url's options")
    params = {**DEFAULT_PARAMETERS, **params}
    if "jit" not in params.get("options", ""):
        params["options"] = f"{params.get('options', '')} -c jit=off".strip()
    statement_timeout = int(database.get("statement_timeout", 0))
    if statement_timeout:
        params["options"] = f"{params.get('options', '')} -c statement_timeout={statement_timeout * 1000}".strip()
    entry = {django: params.pop(key, "") for key, django in DJANGO_KEYS.items()}
    return {
        "ENGINE": "regsite.postgresql",
        **entry,
        # A pool per worker process: however many threads and clients, a worker holds at most
        # pool_size connections (threads beyond wait up to pool_timeout seconds for one).
        # Connections are checked before use, so a restarted server costs no failed request.
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {**params, "pool": {"min_size": 1, "max_size": database.get("pool_size", 8),
                                       "timeout": database.get("pool_timeout", 10)}},
        "ANSWER_TIMEOUT": statement_timeout + ANSWER_GRACE if statement_timeout else None,
    }


def _check_hosts(hosts: str, ports: str, refuse: Any) -> None:
    names = hosts.split(",")
    numbers = ports.split(",") if ports else []
    if len(numbers) > 1 and len(numbers) != len(names):
        raise refuse(f"{len(numbers)} ports for {len(names)} hosts (give one port, or one per host)")
    for index, port in enumerate(numbers):
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            host = names[index] if len(numbers) > 1 else names[0]
            raise refuse(f"port {port!r} of host {host} is not a port number")


def redact(url: str) -> str:
    """``url`` as an error may show it: no password, in the user part or in the query."""
    parts = urlsplit(url)
    shown = url
    if "@" in parts.netloc:
        userinfo, _, _ = parts.netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        shown = shown.replace(f"{userinfo}@", f"{user}:***@" if colon else f"{user}@", 1)
    if parts.query:
        kept = [f"{key}=***" if unquote(key) == "password" else f"{key}={value}"
                for key, _, value in (item.partition("=") for item in parts.query.split("&"))]
        shown = shown.replace(parts.query, "&".join(kept), 1)
    return shown
