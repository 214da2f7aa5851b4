"""With its upstream down or failing, a pull-through cache serves what it cached (a tag it cannot
confirm with a Warning) and refuses a miss with the upstream's failure in the OCI envelope."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from registry.proxy import upstream as upstream_client
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, proxy_entry, start_upstream, upstream  # noqa: F401
from tests.support.registry_client import body_of
from tests.support.upstreams import OCI_INDEX, OCI_MANIFEST, push_image

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": ", ".join([OCI_MANIFEST, OCI_INDEX])}


def envelope(response: Any) -> dict[str, Any]:
    body = json.loads(response.content)
    assert len(body["errors"]) == 1, body
    return body["errors"][0]


def test_cached_pulls_go_on_with_the_upstream_stopped(client, upstream, mirror) -> None:
    mirror(tag_ttl_seconds=0)  # every tag pull asks the upstream
    pushed = push_image(upstream.url, "library/alpine", "3.20", layers=2)
    assert client.get("/v2/hub/library/alpine/manifests/3.20", headers=ACCEPT).status_code == 200
    for digest in pushed.blobs:
        body_of(client.get(f"/v2/hub/library/alpine/blobs/{digest}"))
    upstream.stop()

    by_tag = client.get("/v2/hub/library/alpine/manifests/3.20", headers=ACCEPT)
    assert by_tag.status_code == 200 and by_tag["Docker-Content-Digest"] == pushed.digest
    assert by_tag["Warning"].startswith('299 - "') and "not reachable" in by_tag["Warning"]
    by_digest = client.get(f"/v2/hub/library/alpine/manifests/{pushed.digest}", headers=ACCEPT)
    assert by_digest.status_code == 200 and "Warning" not in by_digest
    for digest, data in pushed.blobs.items():
        assert body_of(client.get(f"/v2/hub/library/alpine/blobs/{digest}")) == data


def test_a_miss_with_the_upstream_stopped_is_503_with_retry_after(client, upstream, mirror) -> None:
    mirror()
    upstream.stop()
    for path in ("/v2/hub/library/never/manifests/latest", f"/v2/hub/library/never/blobs/sha256:{'a' * 64}"):
        response = client.get(path, headers=ACCEPT)
        assert response.status_code == 503, response.content
        assert int(response["Retry-After"]) > 0
        error = envelope(response)
        assert error["code"] == "UNAVAILABLE" and "not reachable" in error["message"]
    head = client.head("/v2/hub/library/never/manifests/latest", headers=ACCEPT)
    assert head.status_code == 503 and head.content == b""


class Failing:
    """An upstream answering every request with one status (and Retry-After when given)."""

    def __init__(self, status: int, retry_after: str = "") -> None:
        self.status, self.retry_after, self.requests = status, retry_after, 0
        failing = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                failing.requests += 1
                self.send_response(failing.status)
                if failing.retry_after:
                    self.send_header("Retry-After", failing.retry_after)
                self.send_header("Content-Length", "23")
                self.end_headers()
                self.wfile.write(b"upstream's own message\n")

            do_HEAD = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def failing() -> Iterator[Any]:
    servers: list[Failing] = []

    def start(status: int, retry_after: str = "") -> Failing:
        servers.append(Failing(status, retry_after))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize("status, retry_after, expected, code", [
    (429, "120", 429, "TOOMANYREQUESTS"),
    (503, "7", 503, "UNAVAILABLE"),
    (500, "", 502, "UNAVAILABLE"),
    (502, "", 502, "UNAVAILABLE"),
    (403, "", 502, "UNAVAILABLE"),
    (400, "", 502, "UNAVAILABLE"),
])
def test_a_miss_gets_the_upstream_failure_mapped(client, settings, failing, status, retry_after, expected,
                                                 code) -> None:
    server = failing(status, retry_after)
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="quay", url=server.url)]
    response = client.get("/v2/quay/org/app/manifests/v1", headers=ACCEPT)
    assert response.status_code == expected
    assert envelope(response)["code"] == code
    assert response["Retry-After"] == (retry_after or str(upstream_client.RETRY_AFTER))
    assert b"upstream's own message" not in response.content


def test_a_throttled_upstream_leaves_cached_tags_served_with_a_warning(client, settings, upstream, failing) -> None:
    pushed = push_image(upstream.url, "org/app", "v1", layers=1)
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="quay", url=upstream.url, tag_ttl_seconds=0)]
    assert client.get("/v2/quay/org/app/manifests/v1", headers=ACCEPT).status_code == 200
    throttling = failing(429, "60")
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="quay", url=throttling.url, tag_ttl_seconds=0)]
    response = client.get("/v2/quay/org/app/manifests/v1", headers=ACCEPT)
    assert response.status_code == 200 and response["Docker-Content-Digest"] == pushed.digest
    assert "429" in response["Warning"] and throttling.requests == 1


def test_a_down_upstream_is_not_asked_again_for_a_few_seconds(client, upstream, mirror) -> None:
    mirror()
    upstream.stop()
    first = client.get("/v2/hub/library/one/manifests/v1", headers=ACCEPT)
    second = client.get("/v2/hub/library/two/manifests/v1", headers=ACCEPT)
    assert first.status_code == second.status_code == 503
    assert "moments ago" in envelope(second)["message"]
