"""Failed password logins, kept in the database so that every gunicorn worker counts the same ones,
and API tokens when ``[auth] token_backend = "database"``."""
from __future__ import annotations

from django.db import models


class LoginFailure(models.Model):
    username = models.CharField(max_length=255)
    address = models.CharField(max_length=64)
    failed_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["username", "address", "failed_at"], name="login_failure_key")]

    def __str__(self) -> str:
        return f"{self.username} from {self.address} at {self.failed_at:%Y-%m-%d %H:%M:%S}"


class Token(models.Model):
    """An API token's record: its SHA-256 (never the token), owner, role and lifetime."""

    digest = models.CharField(max_length=64, primary_key=True)
    owner = models.CharField(max_length=255, db_index=True)
    role = models.CharField(max_length=8)
    description = models.CharField(max_length=256, blank=True, default="")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.digest[:16]} of {self.owner}"
