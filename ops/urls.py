"""Ops routes: probes, metrics, API documentation. All stay open when authentication is on."""
from __future__ import annotations

from django.urls import path, re_path

from ops import views

app_name = "ops"

urlpatterns = [
    path("health", views.health, name="health"),
    path("ready", views.ready, name="ready"),
    path("metrics", views.prometheus_metrics, name="metrics"),
    re_path(r"^api-docs/?$", views.api_docs, name="api-docs"),
    path("api-docs/openapi.json", views.openapi_document, name="openapi"),
]
