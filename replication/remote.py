"""The HTTP client of a replication policy's remote registry: pull and push, any OCI registry.

Authentication is the pull-through cache's (registry.proxy.auth): anonymous, Basic, or the Bearer
token flow, the credentials going to a token service only when it is the registry's own host or one
of ``realm_hosts``. A push policy asks for ``pull,push`` on the destination repository (and ``pull``
on the one a blob is mounted from).

Every failure is a RemoteError that says whether it is transient (no connection, no answer in time,
429, 5xx: the policy backs off and tries again) or not (the item is retried a few times, then
failed). Its message names the remote's host, the repository and what was asked, and the error code
a registry answered with; never a credential, a token or the Authorization header.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import urllib3
from urllib3.exceptions import HTTPError as TransportError
from urllib3.util import Retry, Timeout

from registry.media_types import MANIFEST_TYPES, OCI_INDEX
from registry.proxy import auth
from replication.policies import Policy

log = logging.getLogger("replication")

MANIFEST_ACCEPT = ", ".join(MANIFEST_TYPES)
MAX_MANIFEST = 4 * 1024 * 1024
MAX_LISTING = 8 * 1024 * 1024  # a page of a catalog or a tag list
MAX_ERROR_TEXT = 200
# A dropped keep-alive connection is retried once for idempotent requests (never a streamed PATCH).
_RETRIES = Retry(total=8, connect=0, read=1, status=0, other=0, redirect=5, raise_on_redirect=True,
                 raise_on_status=False)
_CREDENTIALS = auth.Credentials()


@lru_cache(maxsize=1)
def _pool() -> urllib3.PoolManager:
    # Large writes: a blob goes out in 1 MiB socket writes rather than urllib3's 16 KiB.
    return urllib3.PoolManager(num_pools=32, maxsize=16, block=False, retries=_RETRIES, blocksize=1024 * 1024)


class RemoteError(Exception):
    def __init__(self, message: str, transient: bool, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.message, self.transient, self.retry_after = message, transient, retry_after


@dataclass(frozen=True)
class Manifest:
    body: bytes
    media_type: str


class Remote:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.actions = "pull,push" if policy.direction == "push" else "pull"
        self.key = f"replication:{policy.name}"

    # -- manifests -----------------------------------------------------------------------------

    def manifest_digest(self, repo: str, reference: str) -> str | None:
        """The digest the remote has for ``reference`` ("" when it sends none), None when it has none."""
        response = self._send("HEAD", repo, f"/v2/{repo}/manifests/{reference}", {"Accept": MANIFEST_ACCEPT})
        try:
            if response.status == 404:
                return None
            self._check(response, f"manifest {repo}:{reference}")
            return response.headers.get("Docker-Content-Digest", "")
        finally:
            _release(response)

    def get_manifest(self, repo: str, reference: str) -> Manifest | None:
        response = self._send("GET", repo, f"/v2/{repo}/manifests/{reference}", {"Accept": MANIFEST_ACCEPT})
        try:
            if response.status == 404:
                return None
            self._check(response, f"manifest {repo}:{reference}")
            body = self._read(response, MAX_MANIFEST, f"manifest {repo}:{reference}")
            return Manifest(body, (response.headers.get("Content-Type") or "").split(";")[0].strip())
        finally:
            _release(response)

    def put_manifest(self, repo: str, reference: str, body: bytes, media_type: str) -> dict[str, str]:
        """PUT the manifest byte for byte; the answer's headers (lower-case names)."""
        response = self._send("PUT", repo, f"/v2/{repo}/manifests/{reference}", {"Content-Type": media_type},
                              body=body)
        try:
            self._check(response, f"manifest {repo}:{reference}")
            return {name.lower(): value for name, value in response.headers.items()}
        finally:
            _release(response)

    def delete_manifest(self, repo: str, reference: str) -> int:
        """DELETE a manifest or tag: the status for 2xx, 404, and 400/405 (the registry refuses a
        delete of this kind, as CNCF distribution does a delete by tag); RemoteError otherwise."""
        response = self._send("DELETE", repo, f"/v2/{repo}/manifests/{reference}", {})
        try:
            if response.status in (400, 404, 405) or 200 <= response.status < 300:
                return int(response.status)
            self._check(response, f"delete of {repo}:{reference}")
            return int(response.status)
        finally:
            _release(response)

    # -- blobs ---------------------------------------------------------------------------------

    def has_blob(self, repo: str, digest: str) -> bool:
        response = self._send("HEAD", repo, f"/v2/{repo}/blobs/{digest}", {})
        try:
            if response.status == 404:
                return False
            self._check(response, f"blob {digest} of {repo}")
            return True
        finally:
            _release(response)

    def open_blob(self, repo: str, digest: str) -> Any:
        """The response with the blob's bytes unread (the caller reads and discards it)."""
        response = self._send("GET", repo, f"/v2/{repo}/blobs/{digest}", {})
        try:
            self._check(response, f"blob {digest} of {repo}")
        except RemoteError:
            _release(response)
            raise
        return response

    def start_upload(self, repo: str, mount: str = "", source: str = "") -> str | None:
        """A new upload session's URL; with ``mount``, None when the registry mounted the blob from
        ``source`` instead (a registry that cannot starts an ordinary session, as the spec allows)."""
        query = "?" + urlencode({"mount": mount, "from": source}) if mount else ""
        extra = (f"repository:{source}:pull",) if mount and source else ()
        response = self._send("POST", repo, f"/v2/{repo}/blobs/uploads/{query}", {"Content-Length": "0"},
                              body=b"", scopes=extra)
        try:
            if mount and response.status == 201:
                return None
            self._check(response, f"an upload to {repo}")
            if response.status != 202 or not response.headers.get("Location"):
                raise RemoteError(f"{self.policy.remote} answered {response.status} without an upload "
                                  f"location for {repo}", transient=False)
            return self._absolute(f"/v2/{repo}/blobs/uploads/", response.headers["Location"])
        finally:
            _release(response)

    def upload_offset(self, repo: str, location: str) -> int | None:
        """How many bytes the session at ``location`` holds; None when the remote no longer has it."""
        response = self._send("GET", repo, location, {})
        try:
            if response.status in (404, 400):
                return None
            self._check(response, f"an upload to {repo}")
            taken = (response.headers.get("Range") or "").rpartition("-")[2]
            return int(taken) + 1 if taken.isdigit() else 0
        finally:
            _release(response)

    def patch(self, repo: str, location: str, stream: Any, start: int, length: int) -> str:
        """Send ``length`` bytes of ``stream`` as the session's bytes from ``start``; its next URL."""
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(length),
                   "Content-Range": f"{start}-{start + length - 1}"}
        self._authorized(repo, location)
        response = self._send("PATCH", repo, location, headers, body=stream)
        try:
            self._check(response, f"an upload to {repo}")
            return self._absolute(location, response.headers.get("Location") or location)
        finally:
            _release(response)

    def finish_upload(self, repo: str, location: str, digest: str, stream: Any = None, length: int = 0) -> None:
        """Close the session as blob ``digest``, with its last ``length`` bytes from ``stream``."""
        joiner = "&" if "?" in location else "?"
        headers = {"Content-Length": str(length)}
        if stream is not None:
            headers["Content-Type"] = "application/octet-stream"
            self._authorized(repo, location)
        response = self._send("PUT", repo, f"{location}{joiner}{urlencode({'digest': digest})}", headers,
                              body=b"" if stream is None else stream)
        try:
            self._check(response, f"blob {digest} of {repo}")
        finally:
            _release(response)

    def _authorized(self, repo: str, location: str) -> None:
        """Before a streamed body, which cannot be sent twice: credentials that will be accepted (a
        token may have run out since the upload started), fetched with a small request if needed."""
        if self.policy.username and _CREDENTIALS.get(self.key, self._scope(repo)) is None:
            self.upload_offset(repo, location)

    # -- listings ------------------------------------------------------------------------------

    def referrers(self, repo: str, subject: str) -> list[str]:
        """The digests of the referrers of ``subject``: by the referrers API, or where the registry
        has none, by the spec's fallback tag ``<alg>-<hex>``; empty when neither has any."""
        response = self._send("GET", repo, f"/v2/{repo}/referrers/{subject}", {"Accept": OCI_INDEX})
        try:
            if response.status == 200:
                body = self._read(response, MAX_LISTING, f"the referrers of {subject}")
            elif response.status in (400, 404, 405):
                body = b""
            else:
                self._check(response, f"the referrers of {subject}")
                body = b""
        finally:
            _release(response)
        if not body:
            fallback = self.get_manifest(repo, subject.replace(":", "-")[:128])
            body = fallback.body if fallback else b""
        try:
            listed = json.loads(body).get("manifests") or [] if body else []
        except (ValueError, AttributeError):
            return []
        return [m["digest"] for m in listed if isinstance(m, dict) and isinstance(m.get("digest"), str)]

    def catalog(self) -> Iterator[str]:
        yield from self._pages("", "/v2/_catalog?n=1000", "repositories")

    def tags(self, repo: str) -> Iterator[str]:
        yield from self._pages(repo, f"/v2/{repo}/tags/list?n=1000", "tags")

    def _pages(self, repo: str, path: str, key: str) -> Iterator[str]:
        seen = 0
        while path:
            response = self._send("GET", repo, path, {"Accept": "application/json"})
            try:
                if response.status == 404 and key == "tags":
                    return
                self._check(response, f"the {key} of {repo or self.policy.remote}")
                body = self._read(response, MAX_LISTING, f"the {key} of {repo or self.policy.remote}")
                link = response.headers.get("Link", "")
            finally:
                _release(response)
            try:
                names = json.loads(body).get(key) or []
            except (ValueError, AttributeError):
                raise RemoteError(f"{self.policy.remote} sent a {key} listing that is not JSON", False) from None
            yield from (name for name in names if isinstance(name, str))
            seen += len(names)
            path = _next_page(link) if names else ""

    # -- requests and authentication -----------------------------------------------------------

    def _scope(self, repo: str) -> str:
        return f"repository:{repo}:{self.actions}" if repo else "registry:catalog:*"

    def _absolute(self, base_path: str, location: str) -> str:
        return urljoin(self.policy.url + base_path, location)

    def _send(self, method: str, repo: str, path: str, headers: dict[str, str], body: Any = None,
              scopes: tuple[str, ...] = (), retried: bool = False) -> Any:
        scope = " ".join((self._scope(repo), *scopes))
        sent = dict(headers)
        url = path if path.startswith(("http://", "https://")) else self.policy.url + path
        # An upload location may name another host (a storage front end): it gets no credentials.
        ours = urlsplit(url).netloc == urlsplit(self.policy.url).netloc
        credentials = _CREDENTIALS.get(self.key, scope) if ours else None
        if credentials:
            sent["Authorization"] = credentials
        response = self._request(method, url, sent, body)
        if response.status != 401 or retried or not ours or not isinstance(body, (bytes, type(None))):
            return response
        challenge = response.headers.get("WWW-Authenticate", "")
        _release(response)
        _CREDENTIALS.forget(self.key)
        self._authorize(challenge, scope)
        return self._send(method, repo, path, headers, body, scopes, retried=True)

    def _request(self, method: str, url: str, headers: dict[str, str], body: Any = None) -> Any:
        timeout = Timeout(connect=self.policy.timeout, read=self.policy.timeout)
        try:
            return _pool().request(method, url, headers=headers, body=body, preload_content=False,
                                   decode_content=False, timeout=timeout, redirect=method in ("GET", "HEAD"))
        except TransportError as exc:
            # The exception's class only: urllib3's texts repeat the URL.
            raise RemoteError(f"{self.policy.remote} is not reachable ({type(exc).__name__})", True) from None

    def _authorize(self, challenge: str, scope: str) -> None:
        policy = self.policy
        scheme, params = auth.parse_challenge(challenge)
        if scheme == "basic":
            if not policy.username:
                raise RemoteError(f"{policy.remote} asks for credentials and [[replication]] {policy.name} "
                                  "has none", transient=False)
            _CREDENTIALS.put(self.key, "", auth.basic(policy.username, policy.password), 24 * 3600.0)
        elif scheme == "bearer" and params.get("realm"):
            token, seconds = self._token(params["realm"], params.get("service", ""), scope)
            _CREDENTIALS.put(self.key, scope, f"Bearer {token}", seconds)
        else:
            raise RemoteError(f"{policy.remote} asks for an authentication this registry does not speak "
                              f"({scheme[:20]!r})", transient=False)

    def _token(self, realm: str, service: str, scope: str) -> tuple[str, float]:
        policy = self.policy
        if urlsplit(realm).scheme not in ("http", "https"):
            raise RemoteError(f"{policy.remote} names a token service that is not HTTP", transient=False)
        trusted = auth.trusts_realm(realm, policy.url, policy.realm_hosts)
        if policy.username and not trusted:
            log.warning("replication %s: %s names the token service %s, which is neither its own host nor in "
                        "realm_hosts: asking it without the credentials", policy.name, policy.remote,
                        auth.realm_host(realm), extra={"policy": policy.name})
        headers = {"Authorization": auth.basic(policy.username, policy.password)} if policy.username and trusted \
            else {}
        response = self._request("GET", auth.token_url(realm, service, scope), headers)
        try:
            if response.status in (401, 403):
                raise RemoteError(f"the token service of {policy.remote} refused the credentials of "
                                  f"[[replication]] {policy.name} ({response.status})", transient=False)
            self._check(response, "a token")
            token = auth.parse_token(self._read(response, auth.TOKEN_LIMIT, "a token"))
        finally:
            _release(response)
        if token is None:
            raise RemoteError(f"the token service of {policy.remote} sent no token", transient=False)
        return token

    def _read(self, response: Any, limit: int, what: str) -> bytes:
        try:
            body: bytes = response.read(limit + 1, decode_content=True)
        except TransportError as exc:
            raise RemoteError(f"{self.policy.remote} broke off {what} ({type(exc).__name__})", True) from None
        if len(body) > limit:
            raise RemoteError(f"{self.policy.remote} sent more than {limit} bytes for {what}", transient=False)
        return body

    def _check(self, response: Any, what: str) -> None:
        status = int(response.status)
        if 200 <= status < 300:
            return
        remote = self.policy.remote
        if status in (401, 403):
            _CREDENTIALS.forget(self.key)
            raise RemoteError(f"{remote} refused the credentials of [[replication]] {self.policy.name} for {what} "
                              f"({status}{_codes(response)})", transient=False)
        transient = status in (408, 429) or status >= 500
        wait = auth.retry_after(response, 1) if response.headers.get("Retry-After") else 0.0
        raise RemoteError(f"{remote} answered {status} for {what}{_codes(response, ': ')}", transient, wait)


def _release(response: Any) -> None:
    """Read what is left of an answer (a small one: a HEAD, an error, a created upload) so that its
    connection serves the next request instead of a new one being opened for each."""
    try:
        response.drain_conn()
    except Exception:  # noqa: BLE001  (the connection is closed instead)
        pass
    auth.discard(response)


def _codes(response: Any, lead: str = ", ") -> str:
    """The error codes and messages of a registry's error body, shortened: what the operator needs
    to see why (MANIFEST_INVALID, NAME_UNKNOWN...), never the whole body."""
    try:
        body = response.read(16 * 1024, decode_content=True)
        errors = json.loads(body).get("errors") or []
        text = "; ".join(f"{e.get('code', '')} {e.get('message', '')}".strip() for e in errors[:3]
                         if isinstance(e, dict))
    except (TransportError, ValueError, AttributeError, TypeError):
        return ""
    text = " ".join(text.split())
    return f"{lead}{text[:MAX_ERROR_TEXT]}" if text else ""


def _next_page(link: str) -> str:
    """The path of a Link header's rel="next" page ('' when none)."""
    for part in link.split(","):
        target, _, params = part.partition(";")
        if 'rel="next"' in params.replace(" ", "") or "rel=next" in params.replace(" ", ""):
            url = urlsplit(target.strip().strip("<>"))
            query = parse_qs(url.query)
            return f"{url.path}?{urlencode(query, doseq=True)}" if query else url.path
    return ""
