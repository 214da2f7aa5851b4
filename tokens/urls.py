"""Token endpoints (public paths: the credentials travel in the JSON body)."""
from __future__ import annotations

from django.urls import path

from tokens import views

urlpatterns = [
    path("api/tokens", views.create_token, name="tokens-create"),
    path("api/tokens/list", views.list_tokens, name="tokens-list"),
    path("api/tokens/revoke", views.revoke_token, name="tokens-revoke"),
]
