from __future__ import annotations

from django.apps import AppConfig


class ReplicationConfig(AppConfig):
    name = "replication"
    verbose_name = "Replication: images pushed to and pulled from other registries, recorded as jobs and items"
