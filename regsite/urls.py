"""Project URL conf: the registry API, token endpoints and the ops surfaces."""
from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("", include("registry.urls")),
    path("", include("tokens.urls")),
    path("ui/", include("ops.ui.urls")),
    path("", include("ops.urls")),
]

# An error that escapes a view's own handling (a middleware failing) still answers in JSON.
handler500 = "ops.views.server_error"
