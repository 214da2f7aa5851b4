from __future__ import annotations

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Event notifications: webhooks on push, delete and pull, from a database outbox"
