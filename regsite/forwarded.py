"""The client's address: the one helper every part of the service asks (login throttling, logs)."""
from __future__ import annotations

from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The address the request came from."""
    return request.META.get("REMOTE_ADDR") or "unknown"
