from __future__ import annotations

from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "OCI registry"
