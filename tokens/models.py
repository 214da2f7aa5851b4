"""Failed password logins, kept in the database so that every gunicorn worker counts the same ones."""
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
