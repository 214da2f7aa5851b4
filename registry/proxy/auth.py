"""Authenticating to another registry: what the pull-through cache and replication share.

Registries admit clients three ways: anonymously, with Basic credentials, and with the Bearer token
flow of Docker Hub, GHCR and distribution's token auth (a 401 with ``WWW-Authenticate: Bearer
realm=..., service=..., scope=...``, a token fetched from the realm with the credentials, the request
sent again with it). The realm is named by the remote registry, so the credentials go there only when
it is the registry's own host (over https when the registry is) or one listed in ``realm_hosts``.
Nothing here logs or returns a credential or a token in a message.
"""
from __future__ import annotations

import base64
import json
import re
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

_CHALLENGE_PARAM = re.compile(r'([A-Za-z_]+)\s*=\s*"([^"]*)"')
TOKEN_LIMIT = 1024 * 1024  # a token service's answer, read whole


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """A WWW-Authenticate value's scheme (lower case) and parameters."""
    scheme, _, rest = header.strip().partition(" ")
    return scheme.lower(), dict(_CHALLENGE_PARAM.findall(rest))


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


def trusts_realm(realm: str, registry_url: str, realm_hosts: frozenset[str]) -> bool:
    """Whether the token service at ``realm`` may have the credentials of ``registry_url``: the
    registry's own host, or one of ``realm_hosts``; plain http for an https registry only as
    ``http://host`` there."""
    url, registry = urlsplit(realm), urlsplit(registry_url)
    host = (url.hostname or "").lower()
    if url.scheme == "http" and registry.scheme == "https":
        return f"http://{host}" in realm_hosts
    return host == (registry.hostname or "").lower() or host in realm_hosts or f"http://{host}" in realm_hosts


def realm_host(realm: str) -> str:
    url = urlsplit(realm)
    return f"{url.scheme}://{url.hostname or ''}"


def token_url(realm: str, service: str, scope: str) -> str:
    query = urlencode([(key, value) for key, value in (("service", service), ("scope", scope)) if value])
    return f"{realm}{'&' if '?' in realm else '?'}{query}"


def parse_token(body: bytes) -> tuple[str, float] | None:
    """The token of a token service's answer and the seconds it may be used; None if it has none."""
    try:
        data = json.loads(body)
        token = data.get("token") or data.get("access_token")
        expires_in = int(data.get("expires_in") or 60)
    except (ValueError, AttributeError, TypeError):
        return None
    if not isinstance(token, str) or not token:
        return None
    # Spent a little early, so that a token never expires between the check and its use.
    return token, max(expires_in - 10, expires_in / 2, 1)


class Credentials:
    """Authorization headers each remote accepted, by key (a cache's prefix, a policy's name): Basic
    for all its scopes (scope ""), a Bearer token per scope until shortly before it expires. Kept in
    each process's memory as a cache only: losing it costs a round trip."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._headers: dict[tuple[str, str], tuple[str, float]] = {}

    def get(self, key: str, scope: str) -> str | None:
        now = time.monotonic()
        with self._lock:
            for entry in ((key, scope), (key, "")):
                found = self._headers.get(entry)
                if found is not None and found[1] > now:
                    return found[0]
        return None

    def put(self, key: str, scope: str, header: str, seconds: float) -> None:
        with self._lock:
            self._headers[(key, scope)] = (header, time.monotonic() + seconds)

    def forget(self, key: str) -> None:
        with self._lock:
            for entry in [entry for entry in self._headers if entry[0] == key]:
                del self._headers[entry]


def retry_after(response: Any, default: int) -> int:
    """The seconds a Retry-After header asks for (a number or an HTTP date), 1 to 3600."""
    value = (response.headers.get("Retry-After") or "").strip()
    if value.isdigit():
        seconds = int(value)
    else:
        try:
            seconds = int(parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            seconds = default
    return min(max(seconds, 1), 3600)


def discard(response: Any) -> None:
    """Give a response's connection back, closing it first when its body was not read to the end."""
    try:
        if not response.isclosed():
            response.close()
    finally:
        response.release_conn()
