"""The notifications page: each webhook endpoint's state, backlog, totals and last error."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from notifications.status import statuses
from ops.ui.access import page, ui_view


@ui_view("GET", admin=True)
def endpoints(request: HttpRequest) -> HttpResponse:
    return page(request, "notifications.html", {"nav": "notifications", "endpoints": statuses()})
