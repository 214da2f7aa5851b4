"""Replication's work, in the database so that any worker of any replica can carry it on.

A job is one run of a policy: a burst of push and delete events (trigger "event"), a scheduled or
manual run over the policy's repositories. Its items are one tag (or one digest) each and carry what
became of them. Event items are written in the transaction of the change they report (the push or
delete), with no job yet; the policy's runner gathers them into a job. A large blob's upload to the
destination is recorded chunk by chunk (Upload), so that a run killed midway resumes it.
"""
from __future__ import annotations

from django.db import models
from django.utils import timezone


class Job(models.Model):
    id = models.BigAutoField(primary_key=True)
    policy = models.CharField(max_length=64)
    trigger = models.CharField(max_length=16)  # event, schedule, manual
    state = models.CharField(max_length=16, default="queued")  # queued, running, succeeded, failed
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True)
    finished_at = models.DateTimeField(null=True)
    done = models.IntegerField(default=0)
    skipped = models.IntegerField(default=0)  # up to date already, or nothing to do
    failed = models.IntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["policy", "state", "id"], name="replication_job_state")]


class Item(models.Model):
    """One tag (or an untagged manifest, by digest) to copy or delete, in ``id`` order per tag."""

    id = models.BigAutoField(primary_key=True)
    policy = models.CharField(max_length=64)
    job = models.ForeignKey(Job, null=True, on_delete=models.CASCADE, related_name="items")
    action = models.CharField(max_length=8)  # copy, delete
    repository = models.CharField(max_length=255)  # the source's name of it
    tag = models.CharField(max_length=128, blank=True, default="")
    digest = models.CharField(max_length=200, blank=True, default="")
    state = models.CharField(max_length=8, default="pending")  # pending, done, skipped, failed
    attempts = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True)
    bytes = models.BigIntegerField(default=0)
    note = models.TextField(blank=True, default="")  # why it was skipped, or its last error
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True)

    class Meta:
        indexes = [
            models.Index(fields=["policy", "state", "id"], name="replication_item_state"),
            models.Index(fields=["job", "state"], name="replication_item_job"),
            models.Index(fields=["policy", "repository", "tag", "id"], name="replication_item_tag"),
        ]


class PolicyState(models.Model):
    """A policy's totals (for /metrics, the UI, the command) and its destination's backoff."""

    name = models.CharField(max_length=64, primary_key=True)
    bytes = models.BigIntegerField(default=0)
    items = models.BigIntegerField(default=0)
    failures = models.BigIntegerField(default=0)
    attempts = models.IntegerField(default=0)  # failed attempts in a row against the remote
    next_attempt_at = models.DateTimeField(null=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True)
    last_success_at = models.DateTimeField(null=True)


class Upload(models.Model):
    """A blob upload in progress at the destination: where, and how many bytes it has taken."""

    policy = models.CharField(max_length=64)
    repository = models.CharField(max_length=255)  # the destination's name
    digest = models.CharField(max_length=200)
    location = models.TextField()
    offset = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["policy", "repository", "digest"],
                                               name="replication_upload_once")]
