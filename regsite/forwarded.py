"""The client's address and scheme, believing forwarding headers only from ``[server] trusted_proxies``;
and the registry's own URL, believing no Host header but one naming this machine's loopback.

gunicorn is told to trust no forwarding header from anyone (gunicorn.conf.py): it would apply
X-Forwarded-Proto and a SCRIPT_NAME header from any address in its allow list, and it cannot say
which hop of X-Forwarded-For is the client. This module is the one place that decides.

X-Forwarded-For lists the addresses a request passed through, each proxy appending the address it
received the request from. Walking it from the right, every hop is believed while it names a
trusted proxy; the first one that does not is the client (anything further left was written by the
client itself and proves nothing).
"""
from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Callable

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_HOPS = 32  # a longer X-Forwarded-For is not read past this many hops from the right
MAX_ADDRESS_CHARS = 64


@lru_cache(maxsize=4096)
def _parse(value: str) -> IPAddress | None:
    # Cached: the same few addresses come on every request, and ipaddress parses in Python, far
    # slower than a dictionary lookup.
    try:
        address = ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_trusted(address: IPAddress | None) -> bool:
    return address is not None and any(address in network for network in settings.SERVER_TRUSTED_PROXIES)


def from_trusted_proxy(request: HttpRequest) -> bool:
    """Whether the peer is a trusted proxy, whose forwarding headers are believed."""
    return bool(settings.SERVER_TRUSTED_PROXIES) and is_trusted(_parse(request.META.get("REMOTE_ADDR", "")))


def client_address(request: HttpRequest) -> str:
    """The address of the client: REMOTE_ADDR, or behind a trusted proxy the right-most hop of
    X-Forwarded-For that is not a trusted proxy itself. Addresses come back in canonical form
    (an IPv4-mapped IPv6 address as IPv4), so one client is always spelt one way."""
    remote = request.META.get("REMOTE_ADDR") or "unknown"
    if not from_trusted_proxy(request):
        parsed = _parse(remote)
        return str(parsed) if parsed is not None else remote[:MAX_ADDRESS_CHARS]
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    client = remote
    for hop in reversed(hops[-MAX_HOPS:]):
        address = _parse(hop)
        if address is None:
            return hop[:MAX_ADDRESS_CHARS]  # a trusted proxy wrote it: not an address, but the client
        client = str(address)
        if not is_trusted(address):
            return client
    return client  # every hop is a trusted proxy: the farthest one is as close as we get


def public_base(request: HttpRequest) -> str | None:
    """The registry's URL as clients reach it, ``scheme://host[:port]``: ``[server] external_url``;
    without it, the request's own only when its Host names this machine's loopback (``localhost``,
    127.0.0.0/8, ``::1``: a registry used from the machine it runs on); else None. A Host header
    is whatever the client wrote: built into a Bearer realm it sends a client's credentials where
    that header says, into a webhook event it points a scanner at any host."""
    if settings.SERVER_EXTERNAL_URL:
        return str(settings.SERVER_EXTERNAL_URL)
    try:
        host = request.get_host()
    except DisallowedHost:
        return None
    return f"{request.scheme}://{host}" if _loopback_host(host) else None


@lru_cache(maxsize=256)
def _loopback_host(host: str) -> bool:
    domain, _port = split_domain_port(host)
    if domain == "localhost" or domain.endswith(".localhost"):
        return True
    address = _parse(domain)
    return address is not None and address.is_loopback


def public_host(request: HttpRequest) -> str | None:
    """The host[:port] of ``public_base``."""
    base = public_base(request)
    return base.partition("://")[2] if base else None


def _forwarded_proto(request: HttpRequest) -> str | None:
    # A proxy chain may list one scheme per hop; the right-most was written by the proxy we trust.
    value = request.META.get("HTTP_X_FORWARDED_PROTO", "")
    last = value.rpartition(",")[2].strip().lower()
    return last if last in ("http", "https") else None


class ForwardedProtoMiddleware:
    """A request that reached a trusted proxy over HTTPS is treated as secure: Django then sends
    HSTS (SECURE_HSTS_SECONDS), checks CSRF origins as https, and the UI marks its cookies Secure.
    From anyone else X-Forwarded-Proto is ignored."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "HTTP_X_FORWARDED_PROTO" in request.META and from_trusted_proxy(request):
            scheme = _forwarded_proto(request)
            if scheme is not None:
                request.META["wsgi.url_scheme"] = scheme  # what WSGIRequest.scheme reads
        return self.get_response(request)
