"""Ops routes: probes, metrics, API documentation, / to the web UI. All stay open when authentication is on."""
from __future__ import annotations

from django.urls import path, re_path

from ops import views

app_name = "ops"

urlpatterns = [
    path("", views.to_ui, name="root"),
    path("ui", views.to_ui, name="ui-root"),
    path("health", views.health, name="health"),
    path("ready", views.ready, name="ready"),
    path("metrics", views.prometheus_metrics, name="metrics"),
    re_path(r"^api-docs/?$", views.api_docs, name="api-docs"),
    path("api-docs/openapi.json", views.openapi_document, name="openapi"),
]
