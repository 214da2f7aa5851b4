"""LDAP users: a password is checked by binding to the directory as the user (``[ldap]``), with ldap3.

The user's DN comes from ``user_dn_template`` or from a search under ``user_search_base`` (as
``bind_dn``, or anonymously); their groups from a search under ``group_search_base`` (groupOfNames'
``member``), or else from the user's own ``memberOf`` (Active Directory, OpenLDAP's memberof
overlay). Groups feed the ``[[access]]`` rules like the groups file's.

docker sends its credentials with every request of a push or pull, so a successful bind and its
groups are kept for ``cache_seconds`` in this process, keyed by an HMAC of the username and
password under a key that never leaves the process (never the password itself), and concurrent
checks of the same credentials wait for one bind: at most one bind per user per ``cache_seconds``
per worker. Failures are never kept (the login throttle counts them). A directory that cannot be
reached is ``Unavailable`` (a 503 with Retry-After), remembered for a few seconds so that a storm
of requests does not wait out a connection timeout each.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import ssl
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

if TYPE_CHECKING:
    import ldap3

# ldap3 is imported by the functions that talk to the directory, not here: every worker imports this
# module (the login path asks whether [ldap] is on), and one without [ldap] need not carry ldap3.

log = logging.getLogger(__name__)

SOURCE = "ldap"
DOWN_SECONDS = 5  # after a failed connection, the directory counts as down this long (Retry-After)
CACHE_MAX_ENTRIES = 4096
INVALID_CREDENTIALS = 49


class Unavailable(Exception):
    """The directory cannot be reached (or answered with an error that is not about the password)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the LDAP directory is not reachable; retry after {retry_after} seconds")
        self.retry_after = retry_after


@dataclass(frozen=True)
class DirectoryUser:
    username: str
    dn: str
    groups: frozenset[str]


def configured() -> bool:
    return bool(settings.LDAP["url"])


_KEY = secrets.token_bytes(32)  # the cache's key: per process, so nothing outside it can use an entry
_cache: dict[bytes, tuple[float, DirectoryUser]] = {}
_lock = threading.Lock()
_checks: dict[bytes, threading.Lock] = {}  # one bind at a time per credentials
_down_until = [0.0]


def _cache_key(username: str, password: str) -> bytes:
    data = b"\x00".join(part.encode("utf-8", errors="surrogateescape") for part in (username, password))
    return hmac.new(_KEY, data, hashlib.sha256).digest()


def cached(username: str, password: str) -> DirectoryUser | None:
    """The user, if these very credentials were bound within ``cache_seconds`` here."""
    found = _cache.get(_cache_key(username, password))
    return found[1] if found is not None and found[0] > time.monotonic() else None


def clear_cache() -> None:
    with _lock:
        _cache.clear()
        _down_until[0] = 0.0


@receiver(setting_changed)
def _forget(setting: str, **kwargs: Any) -> None:
    if setting == "LDAP":
        clear_cache()


def authenticate(username: str, password: str) -> DirectoryUser | None:
    """The user and their groups if the directory accepts the password; None if it does not (or
    knows no such user). Raises Unavailable when it cannot be asked."""
    if not password or not username:
        return None  # an empty password is an anonymous bind, which every directory accepts
    key = _cache_key(username, password)
    with _lock:
        check = _checks.setdefault(key, threading.Lock())
    try:
        with check:
            found = cached(username, password)
            if found is None:
                found = _bind(username, password)
                if found is not None:
                    _remember(key, found)
    finally:
        with _lock:
            _checks.pop(key, None)
    return found


def _remember(key: bytes, found: DirectoryUser) -> None:
    if settings.LDAP["cache_seconds"] <= 0:
        return
    with _lock:
        if len(_cache) >= CACHE_MAX_ENTRIES:
            now = time.monotonic()
            for stale in [k for k, (until, _) in _cache.items() if until <= now] or list(_cache):
                del _cache[stale]
        _cache[key] = (time.monotonic() + settings.LDAP["cache_seconds"], found)


def _server() -> ldap3.Server:
    import ldap3

    config = settings.LDAP
    url = urlsplit(config["url"])
    tls = None
    if url.scheme == "ldaps" or config["start_tls"]:
        tls = ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=config["ca_file"] or None)
    return ldap3.Server(url.hostname, port=url.port, use_ssl=url.scheme == "ldaps", tls=tls, get_info=ldap3.NONE,
                        connect_timeout=config["timeout_seconds"])


def _connection(dn: str | None, password: str | None) -> ldap3.Connection:
    """A connection bound as ``dn`` (anonymously for None); raises Unavailable, or returns an
    unbound connection whose result says why the bind failed."""
    import ldap3
    from ldap3.core.exceptions import LDAPException

    config = settings.LDAP
    if time.monotonic() < _down_until[0]:
        raise Unavailable(max(1, round(_down_until[0] - time.monotonic())))
    connection = ldap3.Connection(_server(), user=dn, password=password, read_only=True, auto_bind=ldap3.AUTO_BIND_NONE,
                                  receive_timeout=config["timeout_seconds"], raise_exceptions=False)
    try:
        connection.open()
        if config["start_tls"]:
            connection.start_tls()
        connection.bind()
    except LDAPException as exc:
        _down_until[0] = time.monotonic() + DOWN_SECONDS
        # The exception's class says what failed; its text may hold the server's address only.
        log.error("LDAP directory %s cannot be reached (%s)", config["url"], type(exc).__name__)
        raise Unavailable(DOWN_SECONDS) from None
    return connection


def _failed(connection: ldap3.Connection, what: str) -> None:
    """A bind that failed for another reason than the credentials is the directory's trouble."""
    result = connection.result or {}
    if result.get("result") != INVALID_CREDENTIALS:
        log.error("LDAP %s failed: %s (%s)", what, result.get("description"), result.get("result"))
        raise Unavailable(DOWN_SECONDS)


def _user_dn(username: str) -> str | None:
    import ldap3
    from ldap3.utils.conv import escape_filter_chars
    from ldap3.utils.dn import escape_rdn

    config = settings.LDAP
    if config["user_dn_template"]:
        return str(config["user_dn_template"]).replace("{username}", escape_rdn(username))
    service = _connection(config["bind_dn"] or None, config["bind_password"] or None)
    try:
        if not service.bound:
            _failed(service, "search bind as [ldap] bind_dn")
            raise Unavailable(DOWN_SECONDS)  # the service account's password is not ours to count
        query = str(config["user_filter"]).replace("{username}", escape_filter_chars(username))
        service.search(config["user_search_base"], query, search_scope=ldap3.SUBTREE, attributes=[], size_limit=2)
        entries = [entry for entry in service.response or [] if entry.get("type") == "searchResEntry"]
        return entries[0]["dn"] if len(entries) == 1 else None  # none, or ambiguous: no such user
    finally:
        service.unbind()


def _group_name(dn: str) -> str:
    from ldap3.utils.dn import parse_dn

    return parse_dn(dn)[0][1]  # cn=team-a,ou=groups,... -> team-a


def _groups(connection: ldap3.Connection, username: str, dn: str) -> frozenset[str]:
    import ldap3
    from ldap3.utils.conv import escape_filter_chars

    config = settings.LDAP
    attribute = config["group_name_attribute"]
    if config["group_search_base"]:
        query = str(config["group_filter"]).replace("{dn}", escape_filter_chars(dn)).replace(
            "{username}", escape_filter_chars(username))
        connection.search(config["group_search_base"], query, search_scope=ldap3.SUBTREE, attributes=[attribute])
        names: set[str] = set()
        for entry in connection.response or []:
            if entry.get("type") == "searchResEntry":
                value = entry["attributes"].get(attribute)
                names.update(value if isinstance(value, list) else [value] if value else [])
        return frozenset(str(name) for name in names)
    connection.search(dn, "(objectClass=*)", search_scope=ldap3.BASE, attributes=["memberOf"])
    found = connection.response[0]["attributes"].get("memberOf", []) if connection.response else []
    return frozenset(_group_name(group) for group in found)


def _bind(username: str, password: str) -> DirectoryUser | None:
    from ldap3.core.exceptions import LDAPException

    dn = _user_dn(username)
    if dn is None:
        return None
    connection = _connection(dn, password)
    try:
        if not connection.bound:
            _failed(connection, f"bind as {dn}")
            return None
        return DirectoryUser(username, dn, _groups(connection, username, dn))
    except LDAPException as exc:
        log.error("LDAP group search for %s failed (%s)", dn, type(exc).__name__)
        raise Unavailable(DOWN_SECONDS) from None
    finally:
        connection.unbind()


def ready() -> str | None:
    """None when the directory answers (an anonymous, or the search account's, bind); else why not."""
    config = settings.LDAP
    try:
        connection = _connection(config["bind_dn"] or None, config["bind_password"] or None)
    except Unavailable:
        return "not reachable"
    try:
        return None if connection.bound else f"bind refused: {(connection.result or {}).get('description')}"
    finally:
        connection.unbind()
