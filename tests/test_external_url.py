"""The registry's own URL comes from ``[server] external_url`` (or ``[auth] token_realm`` for the
realm), never from a Host header a client wrote: the Bearer challenge's realm and the webhook events'
``target.url`` and ``request.host``. Without it, only a Host naming this machine's loopback is
believed (``make run`` used from the same machine)."""
from __future__ import annotations

import pytest
from django.test import Client

from regsite import config
from tests.support.auth import auth_on, auth_paths  # noqa: F401  (fixtures)
from tests.support.notify import entry, queued
from tests.support.registry_client import push_image

pytestmark = pytest.mark.django_db

EVIL = "evil.example:4000"


@pytest.fixture
def bearer_on(settings, auth_on):  # type: ignore[no-untyped-def]
    settings.AUTH_CHALLENGE = "bearer"
    return auth_on


def realm(client: Client, host: str) -> str:
    challenge = client.get("/v2/team/app/tags/list", HTTP_HOST=host)["WWW-Authenticate"]
    return challenge.split('realm="', 1)[1].split('"', 1)[0]


def test_a_host_header_is_not_reflected_into_the_realm(client, bearer_on) -> None:
    assert realm(client, EVIL) == "/auth/token"


def test_the_realm_is_built_from_external_url(client, bearer_on, settings) -> None:
    settings.SERVER_EXTERNAL_URL = "https://registry.example.internal"
    assert realm(client, EVIL) == "https://registry.example.internal/auth/token"
    settings.AUTH_TOKEN_REALM = "https://auth.example.internal/token"
    assert realm(client, EVIL) == "https://auth.example.internal/token"


@pytest.mark.parametrize("host", ["localhost:4000", "127.0.0.1:4000", "[::1]:4000", "localhost"])
def test_a_loopback_host_is_believed_without_external_url(client, bearer_on, host: str) -> None:
    assert realm(client, host) == f"http://{host}/auth/token"


def test_events_name_no_url_and_no_host_from_a_host_header(client, settings) -> None:
    settings.NOTIFICATIONS = [entry()]
    client.defaults["HTTP_HOST"] = EVIL
    push_image(client, "team/app", "v1")

    events = queued()

    assert events and all("url" not in event["target"] for event in events)
    assert all("host" not in event["request"] for event in events)
    assert all("evil" not in str(event) for event in events)


def test_events_name_the_external_url(client, settings) -> None:
    settings.NOTIFICATIONS = [entry()]
    settings.SERVER_EXTERNAL_URL = "https://registry.example.internal"
    client.defaults["HTTP_HOST"] = EVIL
    _body, digest = push_image(client, "team/app", "v1")

    manifest = queued()[-1]

    assert manifest["target"]["url"] == f"https://registry.example.internal/v2/team/app/manifests/{digest}"
    assert manifest["request"]["host"] == "registry.example.internal"


@pytest.mark.parametrize("value, needle", [
    ("registry.example.internal", "expected an http:// or https:// URL"),
    ("ftp://registry.example.internal", "expected an http:// or https:// URL"),
    ("https://alice:secret@registry.example.internal", "without credentials"),
    ("https://registry.example.internal/registry", "without a path"),
    ("https://registry.example.internal/?x=1", "without a query"),
    ("https://registry.example.internal:99999", "port"),
    ('https://registry"example', "expected an http:// or https:// URL"),
])
def test_a_bad_external_url_stops_start_up(tmp_path, monkeypatch, value: str, needle: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(config.ConfigError) as error:
        config.load({"SVC_SERVER_EXTERNAL_URL": value})
    assert str(error.value).startswith("[server] external_url: ") and needle in str(error.value)
    assert "secret" not in str(error.value)


def test_external_url_is_read_from_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    loaded = config.load({"SVC_SERVER_EXTERNAL_URL": "https://registry.example.internal:8443/"})
    assert loaded["server"]["external_url"] == "https://registry.example.internal:8443"
