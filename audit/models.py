"""The audit log: one row per event, kept ``[audit] retention_days`` (audit.log prunes older ones)."""
from __future__ import annotations

from django.db import models


class AuditEvent(models.Model):
    """One push, delete, tag move, token or robot change, sign-in or refusal, in ``id`` order (the
    order they were written, on every replica sharing the database)."""

    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField(db_index=True)
    # Who: a user's or robot's name (a token's owner); their kind (user, token, robot, anonymous,
    # system); the token's hash prefix when a token was used.
    actor = models.CharField(max_length=255, blank=True, default="")
    actor_kind = models.CharField(max_length=16)
    token = models.CharField(max_length=16, blank=True, default="")
    address = models.CharField(max_length=64, blank=True, default="")
    action = models.CharField(max_length=32)
    repository = models.CharField(max_length=255, blank=True, default="")
    reference = models.CharField(max_length=255, blank=True, default="")  # a tag, or a robot or token
    digest = models.CharField(max_length=150, blank=True, default="")
    outcome = models.CharField(max_length=16)  # success, denied, failed, throttled
    detail = models.TextField(blank=True, default="")
    request_id = models.CharField(max_length=128, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["actor", "id"], name="audit_actor"),
            models.Index(fields=["repository", "id"], name="audit_repository"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.repository} {self.outcome}"
