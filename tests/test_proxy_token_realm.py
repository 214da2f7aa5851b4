"""The upstream names the token service in its challenge, and the cache sends the [[proxy]] entry's
credentials there only when it is the upstream's own host (over https when the upstream is), or a
host the entry lists in ``realm_hosts``: otherwise it asks for a token without them."""
from __future__ import annotations

import json
from typing import Any

import pytest

from registry.proxy import mirrors, upstream as upstream_client
from tests.support.proxy_fixtures import fresh_upstream_state, proxy_entry, start_upstream  # noqa: F401
from tests.support.upstreams import OCI_MANIFEST, TokenRealm, push_image

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": OCI_MANIFEST}
USER, PASSWORD = "puller", "pw-5e0f-realm"


@pytest.fixture
def elsewhere(tmp_path):  # type: ignore[no-untyped-def]
    """A token realm on another host name than the upstream's (localhost, where the upstream is 127.0.0.1)."""
    realm = TokenRealm(tmp_path / "realm", USER, PASSWORD, host="localhost").start()
    yield realm
    realm.stop()


def test_a_realm_on_another_host_gets_no_credentials(client, settings, start_upstream, elsewhere) -> None:
    upstream = start_upstream(realm=elsewhere)
    push_image(upstream.url, "library/alpine", "3.20", authorization=upstream.authorization("library/alpine"))
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=upstream.url, username=USER, password=PASSWORD)]
    response = client.get("/v2/hub/library/alpine/manifests/3.20", headers=ACCEPT)
    assert elsewhere.credentialed == [False]  # asked, anonymously
    assert response.status_code == 502
    message = json.loads(response.content)["errors"][0]["message"]
    assert "localhost" in message and "realm_hosts" in message


def test_a_realm_host_listed_in_realm_hosts_gets_them(client, settings, start_upstream, elsewhere) -> None:
    upstream = start_upstream(realm=elsewhere)
    pushed = push_image(upstream.url, "library/alpine", "3.20", authorization=upstream.authorization("library/alpine"))
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=upstream.url, username=USER, password=PASSWORD,
                                             realm_hosts=["localhost"])]
    response = client.get("/v2/hub/library/alpine/manifests/3.20", headers=ACCEPT)
    assert response.status_code == 200 and response["Docker-Content-Digest"] == pushed.digest
    assert elsewhere.credentialed == [True]


class Recorded:
    """Stands in for the upstream's connection pool: records what was sent, answers 401 to a token."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, str]]] = []

    def request(self, method: str, url: str, headers: dict[str, str] | None = None, **_: Any) -> Any:
        self.sent.append((url, dict(headers or {})))
        return Answer()


class Answer:
    status, headers, data = 401, {}, b"{}"

    def isclosed(self) -> bool:
        return True

    def release_conn(self) -> None:
        pass

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        return b"{}"

    connection = None


@pytest.mark.parametrize("upstream_url, realm, realm_hosts, credentialed", [
    ("https://registry.example", "https://registry.example/token", [], True),
    ("https://registry.example:5000", "https://registry.example:5001/token", [], True),
    ("https://registry.example", "http://registry.example/token", [], False),  # plain http for an https upstream
    ("https://registry.example", "http://registry.example/token", ["registry.example"], False),
    ("https://registry.example", "http://registry.example/token", ["http://registry.example"], True),
    ("https://registry-1.docker.io", "https://auth.docker.io/token", [], False),
    ("https://registry-1.docker.io", "https://auth.docker.io/token", ["auth.docker.io"], True),
    ("https://registry-1.docker.io", "https://AUTH.docker.io/token", ["auth.docker.io"], True),
    ("https://registry-1.docker.io", "https://auth.docker.io.evil.example/token", ["auth.docker.io"], False),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5001/token", [], True),
])
def test_which_realms_get_the_credentials(settings, monkeypatch, upstream_url, realm, realm_hosts,
                                          credentialed) -> None:
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=upstream_url, username=USER, password=PASSWORD,
                                             realm_hosts=realm_hosts)]
    recorded = Recorded()
    monkeypatch.setattr(upstream_client, "_pool", lambda: recorded)
    with pytest.raises(upstream_client.UpstreamFailed):
        upstream_client.Upstream(mirrors.configured()[0])._authorize(
            f'Bearer realm="{realm}",service="registry",scope="repository:library/alpine:pull"',
            "repository:library/alpine:pull")
    [(url, headers)] = recorded.sent
    assert url.startswith(realm + "?")
    assert ("Authorization" in headers) is credentialed
