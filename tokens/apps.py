from __future__ import annotations

from django.apps import AppConfig


class TokensConfig(AppConfig):
    name = "tokens"
    verbose_name = "Authentication and API tokens"
