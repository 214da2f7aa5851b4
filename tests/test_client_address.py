"""The client's address: REMOTE_ADDR, or behind a trusted proxy the right-most untrusted hop of
X-Forwarded-For; X-Forwarded-Proto believed from trusted proxies only."""
from __future__ import annotations

import ipaddress

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from regsite import config
from regsite.forwarded import ForwardedProtoMiddleware, client_address


@pytest.fixture
def proxies(settings):
    def trust(*entries: str) -> None:
        settings.SERVER_TRUSTED_PROXIES = config.proxy_networks(list(entries))
    trust()
    return trust


def address(remote: str, forwarded: str | None = None) -> str:
    headers = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded
    return client_address(RequestFactory().get("/", **headers))


def test_it_ignores_x_forwarded_for_when_no_proxy_is_trusted(proxies) -> None:
    assert address("203.0.113.5", "198.51.100.1") == "203.0.113.5"


def test_it_ignores_x_forwarded_for_from_an_untrusted_address(proxies) -> None:
    proxies("10.0.0.0/8")
    assert address("203.0.113.5", "198.51.100.1") == "203.0.113.5"


def test_it_takes_the_right_most_hop_that_is_not_a_trusted_proxy(proxies) -> None:
    proxies("10.0.0.0/8", "192.0.2.1")
    # The client wrote "1.1.1.1" itself; the trusted proxies appended the rest.
    assert address("10.0.0.2", "1.1.1.1, 198.51.100.7, 192.0.2.1, 10.9.9.9") == "198.51.100.7"
    assert address("10.0.0.2", "198.51.100.7") == "198.51.100.7"


def test_it_falls_back_to_the_proxy_when_it_sends_no_header(proxies) -> None:
    proxies("10.0.0.2")
    assert address("10.0.0.2") == "10.0.0.2"
    assert address("10.0.0.2", "10.0.0.2") == "10.0.0.2"


def test_it_spells_each_address_one_way(proxies) -> None:
    proxies("::1")
    assert address("::ffff:203.0.113.5") == "203.0.113.5"
    assert address("::1", "2001:DB8:0:0::1") == "2001:db8::1"


def test_the_configuration_names_a_bad_entry() -> None:
    assert config.proxy_networks(["10.0.0.1", "fd00::/8"]) == (
        ipaddress.ip_network("10.0.0.1/32"), ipaddress.ip_network("fd00::/8"))
    with pytest.raises(config.ConfigError, match=r"\[server\] trusted_proxies: 'proxy.internal'"):
        config.proxy_networks(["proxy.internal"])


def test_the_environment_gives_a_comma_separated_list() -> None:
    assert config.load({"SVC_SERVER_TRUSTED_PROXIES": "10.0.0.0/8, ::1"})["server"]["trusted_proxies"] == [
        "10.0.0.0/8", "::1"]
    with pytest.raises(config.ConfigError, match="trusted_proxies"):
        config.load({"SVC_SERVER_TRUSTED_PROXIES": "10.0.0.0/33"})


def scheme(remote: str, proto: str) -> bool:
    seen = []
    middleware = ForwardedProtoMiddleware(lambda request: seen.append(request.is_secure()) or HttpResponse())
    middleware(RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_PROTO=proto))
    return seen[0]


def test_it_believes_x_forwarded_proto_from_a_trusted_proxy_only(proxies) -> None:
    assert scheme("127.0.0.1", "https") is False
    proxies("127.0.0.1")
    assert scheme("127.0.0.1", "https") is True
    assert scheme("127.0.0.1", "http") is False
    assert scheme("10.0.0.9", "https") is False
