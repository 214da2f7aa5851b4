"""The HTTP client of a pull-through cache's upstream registry.

It speaks the three ways registries admit pulls: anonymous, Basic, and the Bearer token flow of
Docker Hub, GHCR and distribution's token auth (a 401 with ``WWW-Authenticate: Bearer realm=...,
service=...,scope=...``, a token fetched from the realm with the configured credentials, the
request sent again with it). The realm is named by the upstream, so the credentials go there only
when it is the upstream's own host (over https when the upstream is) or one the cache's
``realm_hosts`` lists; any other is asked without them. Failures become the domain's UpstreamError
family, whose messages name the upstream's host and what was asked, never a credential, a token or
an upstream's error body.

Everything one ``Upstream`` asks (a pull's HEAD, GET, token) shares one deadline, the cache's
``total_timeout`` from its creation, over whole answers (registry.proxy.deadline): past it the pull
gets UpstreamTimedOut (504). Bytes that arrive move it on (a second per EARNED_RATE bytes), so a
large layer at an honest pace completes, while an upstream trickling bytes earns nothing.

Two things are kept in each process's memory, as caches only (every worker learns them for itself,
and losing them costs a round trip): the Authorization header each upstream accepted (Basic, or a
token per scope until it expires), and that an upstream was unreachable, for DOWN_SECONDS, so that
a pull meanwhile is answered from the cache (or refused) at once instead of after a timeout each.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3.exceptions import HTTPError as TransportError
from urllib3.util import Retry, Timeout

from registry.media_types import MANIFEST_TYPES
from registry.proxy import auth, deadline, metrics
from registry.proxy.auth import TOKEN_LIMIT, discard
from registry.proxy.mirrors import Mirror
from registry.services.exceptions import (
    UpstreamError,
    UpstreamFailed,
    UpstreamThrottled,
    UpstreamTimedOut,
    UpstreamUnavailable,
)

log = logging.getLogger(__name__)

MANIFEST_ACCEPT = ", ".join(MANIFEST_TYPES)
DOWN_SECONDS = 5.0
RETRY_AFTER = 30
# A dropped keep-alive connection shows as a read error and is retried once; a refused or timed
# out connection is not (the next pull finds the upstream down). Redirects (Docker Hub sends blobs
# to a CDN) are followed, and urllib3 drops the Authorization header when one changes host.
_RETRIES = Retry(total=8, connect=0, read=1, status=0, other=0, redirect=5, raise_on_redirect=True,
                 raise_on_status=False)


@lru_cache(maxsize=1)
def _pool() -> urllib3.PoolManager:
    return deadline.pool_manager(num_pools=16, maxsize=32, block=False, retries=_RETRIES)


_CREDENTIALS = auth.Credentials()
_DOWN_UNTIL: dict[str, float] = {}


@dataclass(frozen=True)
class FetchedManifest:
    body: bytes
    content_type: str
    digest: str  # the upstream's Docker-Content-Digest header, "" when it sent none


# Bytes of an answer that earn it one more second past total_timeout (see Upstream._earn).
EARNED_RATE = 1024 * 1024

class Upstream:
    def __init__(self, mirror: Mirror) -> None:
        self.mirror = mirror
        self.started = time.monotonic()
        self.deadline = self.started + mirror.total_timeout  # a time.monotonic()
        self.received = 0

    # -- what the cache asks -----------------------------------------------------------------

    def head_manifest(self, name: str, reference: str) -> str | None:
        """The digest the upstream has for ``reference`` ("" if it sent none), None if it has none."""
        response = self._send("HEAD", f"/v2/{name}/manifests/{reference}", name, {"Accept": MANIFEST_ACCEPT})
        try:
            if response.status == 404:
                return None
            self._check(response, f"manifest {name}:{reference}")
            return response.headers.get("Docker-Content-Digest", "")
        finally:
            discard(response)

    def get_manifest(self, name: str, reference: str, limit: int) -> FetchedManifest | None:
        response = self._send("GET", f"/v2/{name}/manifests/{reference}", name, {"Accept": MANIFEST_ACCEPT})
        try:
            if response.status == 404:
                return None
            self._check(response, f"manifest {name}:{reference}")
            body = self.read(response, limit + 1)
            if len(body) > limit:
                raise self._failed(f"the upstream {self.mirror.upstream} sent a manifest of {name} larger than "
                                   f"this registry's limit of {limit} bytes")
            return FetchedManifest(body, response.headers.get("Content-Type", ""),
                                   response.headers.get("Docker-Content-Digest", ""))
        finally:
            discard(response)

    def open_blob(self, name: str, digest: str) -> Any | None:
        """The upstream's response with the blob's bytes unread (the caller reads and discards it),
        or None when the upstream does not have it."""
        response = self._send("GET", f"/v2/{name}/blobs/{digest}", name, {})
        if response.status == 404:
            discard(response)
            return None
        try:
            self._check(response, f"blob {digest} of {name}")
        except UpstreamError:
            discard(response)
            raise
        return response

    def head_blob(self, name: str, digest: str) -> int | None:
        """The blob's size upstream, None when the upstream does not have it."""
        response = self._send("HEAD", f"/v2/{name}/blobs/{digest}", name, {})
        try:
            if response.status == 404:
                return None
            self._check(response, f"blob {digest} of {name}")
            length = response.headers.get("Content-Length", "")
            if not length.isdigit():
                raise self._failed(f"the upstream {self.mirror.upstream} gave no size for blob {digest}")
            return int(length)
        finally:
            discard(response)

    def read(self, response: Any, size: int) -> bytes:
        """Up to ``size`` bytes of a response body, counted; a connection lost midway is UpstreamUnavailable."""
        try:
            data = response.read(size, decode_content=False)
        except TransportError as exc:
            raise self._lost(exc) from None
        if len(data) < size and time.monotonic() >= self.deadline:  # cut off by the deadline (not at the end)
            raise self._timed_out()
        metrics.UPSTREAM_BYTES.labels(self.mirror.prefix).inc(len(data))
        self._earn(response, len(data))
        return data

    def _earn(self, response: Any, count: int) -> None:
        """Bytes that arrived move the deadline on by a second per EARNED_RATE bytes: a large layer
        arriving at an honest pace is never cut off (one that takes longer than total_timeout would
        otherwise be fetched again, whole, by every retry and never stored), while an upstream
        trickling bytes earns nothing."""
        self.received += count
        earned = self.started + self.mirror.total_timeout + self.received / EARNED_RATE
        if earned > self.deadline + 1.0:  # a second at a time: one watchdog entry per second, not per read
            self.deadline = earned
            deadline.extend(response, earned)

    # -- requests and authentication -----------------------------------------------------------

    def _send(self, method: str, path: str, name: str, headers: dict[str, str], retried: bool = False) -> Any:
        prefix = self.mirror.prefix
        if _DOWN_UNTIL.get(prefix, 0.0) > time.monotonic():
            metrics.UPSTREAM_ERRORS.labels(prefix, "unavailable").inc()
            raise UpstreamUnavailable(f"the upstream {self.mirror.upstream} of {self.mirror.namespace} was not "
                                      "reachable moments ago; retry later", max(1, int(DOWN_SECONDS)))
        scope = f"repository:{name}:pull"
        sent = dict(headers)
        credentials = _CREDENTIALS.get(prefix, scope)
        if credentials:
            sent["Authorization"] = credentials
        response = self._request(method, self.mirror.url + path, sent)
        if response.status != 401 or retried:
            return response
        challenge = response.headers.get("WWW-Authenticate", "")
        discard(response)
        _CREDENTIALS.forget(prefix)
        self._authorize(challenge, scope)
        return self._send(method, path, name, headers, retried=True)

    def _authorize(self, challenge: str, scope: str) -> None:
        scheme, params = auth.parse_challenge(challenge)
        if scheme == "basic":
            if not self.mirror.username:
                raise self._failed(f"the upstream {self.mirror.upstream} asks for credentials and "
                                   f"[[proxy]] {self.mirror.prefix} has none")
            _CREDENTIALS.put(self.mirror.prefix, "", self._basic(), 24 * 3600.0)
        elif scheme == "bearer" and params.get("realm"):
            token, seconds = self._token(params["realm"], params.get("service", ""), params.get("scope") or scope)
            _CREDENTIALS.put(self.mirror.prefix, scope, f"Bearer {token}", seconds)
        else:
            raise self._failed(f"the upstream {self.mirror.upstream} asks for an authentication this "
                               f"registry does not speak ({scheme[:20]!r})")

    def _request(self, method: str, url: str, headers: dict[str, str]) -> Any:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out()
        timeout = Timeout(connect=min(self.mirror.timeout, left), read=min(self.mirror.timeout, left))
        try:
            with deadline.within(self.deadline):
                return _pool().request(method, url, headers=headers, preload_content=False, decode_content=False,
                                       timeout=timeout)
        except TransportError as exc:
            raise self._lost(exc) from None

    def _trusts(self, realm: str) -> bool:
        return auth.trusts_realm(realm, self.mirror.url, self.mirror.realm_hosts)

    def _basic(self) -> str:
        return auth.basic(self.mirror.username, self.mirror.password)

    def _token(self, realm: str, service: str, scope: str) -> tuple[str, float]:
        """A token from the realm of a Bearer challenge and the seconds it may be used."""
        if urlsplit(realm).scheme not in ("http", "https"):
            raise self._failed(f"the upstream {self.mirror.upstream} names a token service that is not HTTP")
        withheld = bool(self.mirror.username) and not self._trusts(realm)
        if withheld:
            log.warning("pull-through cache %s: the upstream %s names the token service %s, which is neither "
                        "its own host nor in realm_hosts: asking it without the credentials",
                        self.mirror.prefix, self.mirror.upstream, auth.realm_host(realm))
        headers = {"Authorization": self._basic()} if self.mirror.username and not withheld else {}
        response = self._request("GET", auth.token_url(realm, service, scope), headers)
        try:
            if response.status in (401, 403) and withheld:
                raise self._failed(f"the token service {auth.realm_host(realm)} that the upstream "
                                   f"{self.mirror.upstream} names refused a request without credentials "
                                   f"({response.status}); those of [[proxy]] {self.mirror.prefix} go only to the "
                                   "upstream's own host or one listed in its realm_hosts")
            if response.status in (401, 403):
                raise self._failed(f"the token service of the upstream {self.mirror.upstream} refused the "
                                   f"credentials of [[proxy]] {self.mirror.prefix} ({response.status})")
            self._check(response, "a token")
            body = self._read_token(response)
        finally:
            discard(response)
        token = auth.parse_token(body)
        if token is None:
            raise self._failed(f"the token service of the upstream {self.mirror.upstream} sent no token")
        return token

    def _read_token(self, response: Any) -> bytes:
        try:
            body: bytes = response.read(TOKEN_LIMIT + 1, decode_content=True)
        except TransportError as exc:
            raise self._lost(exc) from None
        if len(body) > TOKEN_LIMIT:
            raise self._failed(f"the token service of the upstream {self.mirror.upstream} sent more than "
                               f"{TOKEN_LIMIT} bytes")
        return body

    # -- errors ---------------------------------------------------------------------------------

    def _check(self, response: Any, what: str) -> None:
        status = response.status
        if 200 <= status < 300:
            return
        upstream, prefix = self.mirror.upstream, self.mirror.prefix
        if status == 429:
            metrics.UPSTREAM_ERRORS.labels(prefix, "throttled").inc()
            raise UpstreamThrottled(f"the upstream {upstream} is limiting the rate of pulls (429) for {what}",
                                    auth.retry_after(response, 60))
        if status == 503:
            metrics.UPSTREAM_ERRORS.labels(prefix, "unavailable").inc()
            raise UpstreamUnavailable(f"the upstream {upstream} is unavailable (503) for {what}",
                                      auth.retry_after(response, RETRY_AFTER))
        if status in (401, 403):
            _CREDENTIALS.forget(prefix)
            raise self._failed(f"the upstream {upstream} refused the credentials of [[proxy]] {prefix} for "
                               f"{what} ({status})")
        raise self._failed(f"the upstream {upstream} answered {status} for {what}",
                           auth.retry_after(response, RETRY_AFTER))

    def _failed(self, message: str, retry_after: int = RETRY_AFTER) -> UpstreamFailed:
        metrics.UPSTREAM_ERRORS.labels(self.mirror.prefix, "failed").inc()
        log.warning("pull-through cache %s: %s", self.mirror.prefix, message)
        return UpstreamFailed(message, retry_after)

    def _lost(self, exc: Exception) -> UpstreamUnavailable:
        """A transport error: the deadline's cut (or a read timing out at it), else an unreachable upstream."""
        if time.monotonic() >= self.deadline - 0.05:
            return self._timed_out()
        return self._unreachable(exc)

    def _timed_out(self) -> UpstreamTimedOut:
        prefix, total = self.mirror.prefix, self.mirror.total_timeout
        metrics.UPSTREAM_ERRORS.labels(prefix, "timeout").inc()
        log.warning("pull-through cache %s: the upstream %s did not answer within %g s (total_timeout_seconds)",
                    prefix, self.mirror.upstream, total)
        return UpstreamTimedOut(f"the upstream {self.mirror.upstream} of {self.mirror.namespace} did not answer "
                                f"within {total:g} s (total_timeout_seconds); retry later", RETRY_AFTER)

    def _unreachable(self, exc: Exception) -> UpstreamUnavailable:
        prefix = self.mirror.prefix
        _DOWN_UNTIL[prefix] = time.monotonic() + DOWN_SECONDS
        metrics.UPSTREAM_ERRORS.labels(prefix, "unavailable").inc()
        # The exception's class only: urllib3's texts repeat the URL, and nothing here may ever
        # echo what a request carried.
        log.warning("pull-through cache %s: the upstream %s is unreachable (%s)", prefix, self.mirror.upstream,
                    type(exc).__name__)
        return UpstreamUnavailable(f"the upstream {self.mirror.upstream} of {self.mirror.namespace} is not reachable",
                                   RETRY_AFTER)
