"""The cache speaks its upstream's authentication: Basic (distribution with htpasswd) and the Bearer
token flow (distribution with ``auth: token``, tokens from a realm that checks the credentials);
the credentials and tokens it uses never show in an answer, a log line or a metric."""
from __future__ import annotations

import base64
import json
import logging

import pytest

from ops import metrics as ops_metrics
from registry.proxy import mirrors
from tests.support.proxy_fixtures import fresh_upstream_state, proxy_entry, start_upstream  # noqa: F401
from tests.support.registry_client import body_of
from tests.support.upstreams import OCI_MANIFEST, TokenRealm, push_image

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": OCI_MANIFEST}
USER, PASSWORD = "puller", "pw-9c1d7e0b-never-shown"


def pull_all(client, prefix: str, name: str, tag: str, pushed) -> None:  # type: ignore[no-untyped-def]
    response = client.get(f"/v2/{prefix}/{name}/manifests/{tag}", headers=ACCEPT)
    assert response.status_code == 200, response.content
    assert response["Docker-Content-Digest"] == pushed.digest
    for digest, data in pushed.blobs.items():
        assert body_of(client.get(f"/v2/{prefix}/{name}/blobs/{digest}")) == data


def secrets_of(*tokens: str) -> list[str]:
    return [PASSWORD, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(), *tokens]


def test_basic_auth_upstream(client, settings, start_upstream) -> None:
    upstream = start_upstream(credentials=(USER, PASSWORD))
    pushed = push_image(upstream.url, "team/app", "v1", authorization=upstream.authorization())
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="internal", url=upstream.url, username=USER, password=PASSWORD)]
    pull_all(client, "internal", "team/app", "v1", pushed)
    # After the first challenge the credentials are sent at once: one 401 in all.
    ours = [line for line in upstream.log_path.read_text().splitlines() if "python-urllib3" in line]
    assert sum('HTTP/1.1" 401' in line for line in ours) == 1


def test_bearer_token_flow_with_the_token_reused(client, settings, start_upstream, tmp_path) -> None:
    realm = TokenRealm(tmp_path / "realm", USER, PASSWORD).start()
    try:
        upstream = start_upstream(realm=realm)
        pushed = push_image(upstream.url, "library/alpine", "3.20",
                            authorization=upstream.authorization("library/alpine"))
        settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=upstream.url, username=USER, password=PASSWORD)]
        pull_all(client, "hub", "library/alpine", "3.20", pushed)
        assert [r["scope"] for r in realm.requests] == ["repository:library/alpine:pull"]
        assert realm.requests[0]["service"] == realm.service
    finally:
        realm.stop()


def test_anonymous_pulls_of_a_token_upstream_fail_cleanly(client, settings, start_upstream, tmp_path) -> None:
    realm = TokenRealm(tmp_path / "realm", USER, PASSWORD).start()
    try:
        upstream = start_upstream(realm=realm)
        push_image(upstream.url, "library/alpine", "3.20", authorization=upstream.authorization("library/alpine"))
        settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=upstream.url)]
        response = client.get("/v2/hub/library/alpine/manifests/3.20", headers=ACCEPT)
        assert response.status_code == 502
        assert "token service" in json.loads(response.content)["errors"][0]["message"]
    finally:
        realm.stop()


def test_wrong_credentials_are_a_502_that_shows_none(client, settings, start_upstream, caplog) -> None:
    upstream = start_upstream(credentials=(USER, "the-right-one"))
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="internal", url=upstream.url, username=USER, password=PASSWORD)]
    with caplog.at_level(logging.DEBUG):
        response = client.get("/v2/internal/team/app/manifests/v1", headers=ACCEPT)
    assert response.status_code == 502
    assert "refused the credentials" in json.loads(response.content)["errors"][0]["message"]
    exposed = response.content.decode() + str(dict(response.items())) + caplog.text + ops_metrics.exposition().decode()
    for secret in secrets_of():
        assert secret not in exposed


def test_credentials_and_tokens_show_nowhere(client, settings, start_upstream, tmp_path, caplog) -> None:
    realm = TokenRealm(tmp_path / "realm", USER, PASSWORD).start()
    try:
        upstream = start_upstream(realm=realm)
        pushed = push_image(upstream.url, "library/alpine", "3.20",
                            authorization=upstream.authorization("library/alpine"))
        settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=upstream.url, username=USER, password=PASSWORD)]
        with caplog.at_level(logging.DEBUG):
            pull_all(client, "hub", "library/alpine", "3.20", pushed)
            upstream.stop()
            missing = client.get("/v2/hub/library/other/manifests/1", headers=ACCEPT)
        assert realm.issued
        exposed = missing.content.decode() + caplog.text + ops_metrics.exposition().decode()
        for secret in secrets_of(*realm.issued):
            assert secret not in exposed
        assert PASSWORD not in repr(mirrors.configured())
    finally:
        realm.stop()


class Redirecting:
    """An upstream that wants Basic credentials and sends blobs to another server (as Docker Hub
    sends them to its CDN); the other server records the headers it was sent."""

    def __init__(self, blob: bytes) -> None:
        import hashlib
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.blob, self.digest = blob, "sha256:" + hashlib.sha256(blob).hexdigest()
        self.cdn_headers: list[dict[str, str]] = []
        outer = self

        class Cdn(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                outer.cdn_headers.append(dict(self.headers))
                self.send_response(200)
                self.send_header("Content-Length", str(len(outer.blob)))
                self.end_headers()
                self.wfile.write(outer.blob)

            def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
                pass

        class Registry(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                if self.headers.get("Authorization") != basic_header():
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="upstream"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(307)
                self.send_header("Location", f"{outer.cdn_url}/data/{outer.digest}?signature=x")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
                pass

        self.servers = [ThreadingHTTPServer(("127.0.0.1", 0), Registry), ThreadingHTTPServer(("127.0.0.1", 0), Cdn)]
        for server in self.servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.servers[0].server_address[1]}"
        self.cdn_url = f"http://127.0.0.1:{self.servers[1].server_address[1]}"

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


def basic_header() -> str:
    return "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def test_a_redirect_to_another_host_does_not_carry_the_credentials(client, settings) -> None:
    import os

    upstream = Redirecting(os.urandom(100_000))
    try:
        settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=upstream.url, username=USER, password=PASSWORD)]
        response = client.get(f"/v2/hub/library/alpine/blobs/{upstream.digest}")
        assert response.status_code == 200 and body_of(response) == upstream.blob
        assert upstream.cdn_headers and all("Authorization" not in h for h in upstream.cdn_headers)
    finally:
        upstream.stop()
