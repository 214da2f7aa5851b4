"""Token endpoints (public views: each checks the credentials it is given itself)."""
from __future__ import annotations

from django.urls import path

from tokens import bearer_views, robot_views, views

urlpatterns = [
    path("api/tokens", views.create_token, name="tokens-create"),
    path("api/tokens/list", views.list_tokens, name="tokens-list"),
    path("api/tokens/revoke", views.revoke_token, name="tokens-revoke"),
    path("auth/token", bearer_views.token, name="auth-token"),
    path("api/robots", robot_views.create_robot, name="robots-create"),
    path("api/robots/list", robot_views.list_robots, name="robots-list"),
    path("api/robots/disable", robot_views.disable_robot, name="robots-disable"),
    path("api/robots/enable", robot_views.enable_robot, name="robots-enable"),
    path("api/robots/rotate", robot_views.rotate_robot, name="robots-rotate"),
    path("api/robots/delete", robot_views.delete_robot, name="robots-delete"),
]
