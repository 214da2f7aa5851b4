"""The replication page: each policy, its last runs, its backlog, totals and errors."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from ops.ui.access import page, ui_view
from replication.status import statuses

RUNS_SHOWN = 10


@ui_view("GET", admin=True)
def policies(request: HttpRequest) -> HttpResponse:
    return page(request, "replication.html", {"nav": "replication", "policies": statuses(jobs=RUNS_SHOWN)})
