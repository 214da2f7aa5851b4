"""Binds each request's cause (request record and actor) for the events it writes."""
from __future__ import annotations

from typing import Callable

from django.http import HttpRequest, HttpResponseBase

from notifications.context import Cause, caused_by
from ops.middleware import MAX_USER_AGENT, principal_label
from regsite.forwarded import client_address, from_trusted_proxy, public_base


def _actor(request: HttpRequest) -> Callable[[], str]:
    def name() -> str:
        # A registry client's principal (a user, or a token by its hash prefix: never the secret);
        # in the web UI, the signed-in user.
        viewer = getattr(request, "viewer", None)
        return principal_label(request) or getattr(viewer, "username", None) or ""

    return name


def _client_addr(request: HttpRequest) -> str:
    """The client's address as the request log and the login throttle see it (regsite.forwarded:
    behind a trusted proxy, from X-Forwarded-For), with the port when the client is the peer, as
    CNCF distribution records it ("203.0.113.7:51234"; a forwarded address has no port)."""
    if not request.META.get("REMOTE_ADDR"):
        return ""
    addr = client_address(request)
    port = request.META.get("REMOTE_PORT", "")
    if not port or from_trusted_proxy(request):
        return addr
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


class EventContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        # The events' URLs and host are the registry's own ([server] external_url), never a Host
        # header a client wrote: a receiver may fetch what target.url names. Without one, they
        # are left out unless the Host names this machine's loopback (regsite.forwarded).
        scheme, _, host = (public_base(request) or "").partition("://")
        cause = Cause(
            request_id=getattr(request, "request_id", "") or "",
            addr=_client_addr(request),
            host=host,
            method=request.method or "",
            user_agent=request.META.get("HTTP_USER_AGENT", "")[:MAX_USER_AGENT],
            scheme=scheme or "http",
            actor=_actor(request),
        )
        with caused_by(cause):
            return self.get_response(request)
