"""Routes under /ui/. Repository names hold slashes; "/-/" cannot occur in a name (a name
component starts with a letter or digit), so it separates the name from what follows."""
from __future__ import annotations

from django.urls import path, re_path

from ops.ui import account, admin, namespaces, notifications, replication, views

app_name = "ui"
NAME = r"(?P<name>[a-z0-9][^?#]*?)"

urlpatterns = [
    path("", views.home, name="home"),
    path("repositories/", views.repository_list, name="repositories"),
    re_path(rf"^r/{NAME}/-/manifests/(?P<reference>[^/]+)/delete$", views.delete_manifest, name="delete"),
    re_path(rf"^r/{NAME}/-/manifests/(?P<reference>[^/]+)$", views.manifest_detail, name="manifest"),
    re_path(rf"^r/{NAME}/-/delete$", views.delete_repository, name="delete-repository"),
    re_path(rf"^r/{NAME}/$", views.repository_detail, name="repository"),
    path("sign-in", account.sign_in, name="sign-in"),
    path("sign-out", account.sign_out, name="sign-out"),
    path("tokens/", account.tokens, name="tokens"),
    path("tokens/revoke", account.revoke, name="revoke"),
    path("notifications/", notifications.endpoints, name="notifications"),
    path("access/", namespaces.access, name="access"),
    path("robots/", admin.robot_list, name="robots"),
    path("robots/action", admin.robot_action, name="robot-action"),
    path("audit/", admin.audit_log, name="audit"),
    path("replication/", replication.policies, name="replication"),
    re_path(r"^(?P<rest>.*)$", views.unknown_page, name="unknown"),
]
