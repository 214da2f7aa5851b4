"""Token endpoints (public views: each checks the credentials it is given itself)."""
from __future__ import annotations

from django.urls import path

from tokens import bearer_views, views

urlpatterns = [
    path("api/tokens", views.create_token, name="tokens-create"),
    path("api/tokens/list", views.list_tokens, name="tokens-list"),
    path("api/tokens/revoke", views.revoke_token, name="tokens-revoke"),
    path("auth/token", bearer_views.token, name="auth-token"),
]
