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
        pushed = push_image(upstream.url, "library/alpine", "3.20", authorization=upstream.authorization("library/alpine"))
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
        pushed = push_image(upstream.url, "library/alpine", "3.20", authorization=upstream.authorization("library/alpine"))
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
