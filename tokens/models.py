"""What authentication keeps in the database, so that every gunicorn worker and every replica sees
the same: failed logins per client address (the throttle) and per user (to notice a guessing
attack spread over addresses), and API tokens when ``[auth] token_backend = "database"``."""
from __future__ import annotations

from django.db import models


class LoginThrottle(models.Model):
    """One client address's failed password logins (an IPv6 client's whole /64: tokens.throttle)."""

    address = models.CharField(max_length=64, primary_key=True)
    failures = models.IntegerField(default=0)
    last_failure_at = models.DateTimeField(db_index=True)
    next_attempt_at = models.DateTimeField()  # no password is checked for the address before
    # Checks running now (tokens.throttle): they hold places of the allowance until they end. A
    # database default, so that the previous release can insert rows into the migrated table.
    pending = models.IntegerField(default=0, db_default=0)
    pending_since = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.address}: {self.failures} failures, next attempt at {self.next_attempt_at:%H:%M:%S}"


class LoginFailure(models.Model):
    """One failed password login for a user: kept for minutes, to count the addresses it came from."""

    username = models.CharField(max_length=255)
    address = models.CharField(max_length=64)
    failed_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["username", "address", "failed_at"], name="login_failure_key")]

    def __str__(self) -> str:
        return f"{self.username} from {self.address} at {self.failed_at:%Y-%m-%d %H:%M:%S}"


class Token(models.Model):
    """An API token's record: its SHA-256 (never the token), owner, role and lifetime, and the stamp
    of its owner's htpasswd entry when it was made (tokens.owner_stamp; empty: made before stamps)."""

    digest = models.CharField(max_length=64, primary_key=True)
    owner = models.CharField(max_length=255, db_index=True)
    role = models.CharField(max_length=8)
    description = models.CharField(max_length=256, blank=True, default="")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)
    # A database default too: the previous release, running during an upgrade, inserts rows
    # without it (they are stamped at their first use, as older ones are).
    owner_stamp = models.CharField(max_length=64, blank=True, default="", db_default="")
    # The repository globs the token is limited to, as a JSON list; empty: not limited.
    repositories = models.TextField(blank=True, default="", db_default="")

    def __str__(self) -> str:
        return f"{self.digest[:16]} of {self.owner}"


class Robot(models.Model):
    """A robot account (tokens.robots): an identity for CI that belongs to no person. Its secret is
    never stored, only its SHA-256; its scope is a role on the repositories its globs match."""

    name = models.CharField(max_length=80, primary_key=True)  # robot$<name>
    digest = models.CharField(max_length=64)
    role = models.CharField(max_length=8)
    repositories = models.TextField()  # a JSON list of globs
    description = models.CharField(max_length=256, blank=True, default="")
    created_by = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    rotated_at = models.DateTimeField(null=True)
    disabled = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.name
