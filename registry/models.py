"""Registry metadata. Blob bytes live in storage; everything that says who has what lives here."""
from __future__ import annotations

from django.db import models
from django.utils import timezone


class Repository(models.Model):
    name = models.CharField(max_length=255, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    # When a push last stored a manifest or moved a tag here, to the minute (registry.queries
    # .repositories.touch_pushed): the web UI lists repositories by it, newest first, from an index.
    pushed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["pushed_at", "id"], name="repository_pushed_idx")]

    def __str__(self) -> str:
        return self.name


class Blob(models.Model):
    """A content-addressed blob stored once, whatever number of repositories link it."""

    digest = models.CharField(max_length=200, unique=True)
    size = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)  # compared in a digest range, never indexed

    def __str__(self) -> str:
        return self.digest


class BlobLink(models.Model):
    """A blob is reachable only through repositories it was pushed or mounted into."""

    # No index of its own (db_index=False): uniq_blob_link starts with it (migration 0007).
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="blob_links", db_index=False)
    blob = models.ForeignKey(Blob, on_delete=models.CASCADE, related_name="links")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repository", "blob"], name="uniq_blob_link")]


class Manifest(models.Model):
    """A manifest or index, its bytes kept exactly as pushed."""

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="manifests",
                                   db_index=False)  # uniq_manifest_digest starts with it
    digest = models.CharField(max_length=200)
    media_type = models.CharField(max_length=255)
    size = models.BigIntegerField()
    body = models.BinaryField()
    artifact_type = models.CharField(max_length=255, blank=True, default="")
    subject_digest = models.CharField(max_length=200, blank=True, default="")
    annotations = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # When a GET (by tag or digest) last served it, to the minute (registry.policies.pulls):
    # retention keeps what is pulled, and a pull-through cache evicts what is not (registry.proxy).
    last_pulled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "digest"], name="uniq_manifest_digest"),
        ]
        indexes = [
            # A subject's referrers in creation order (the referrers API): read in the order returned.
            models.Index(fields=["repository", "subject_digest", "created_at", "id"], name="manifest_referrers_idx"),
            # A repository's manifests newest first: its last push, its untagged manifests (web UI).
            models.Index(fields=["repository", "created_at", "id"], name="manifest_pushed_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.repository_id}@{self.digest}"


class ManifestReference(models.Model):
    """A blob (config, layer) or child manifest that a manifest points to; a subject is not one."""

    BLOB = "blob"
    MANIFEST = "manifest"

    manifest = models.ForeignKey(Manifest, on_delete=models.CASCADE, related_name="references")
    digest = models.CharField(max_length=200)  # reference_digest_idx starts with it
    kind = models.CharField(max_length=8, choices=[(BLOB, "blob"), (MANIFEST, "manifest")])

    class Meta:
        indexes = [
            # Who references a digest, answered from the index alone: the collector's check of a
            # range of blobs (kind, and the manifest for a dry run's discount) reads no row.
            models.Index(fields=["digest", "kind", "manifest"], name="reference_digest_idx"),
        ]


class Tag(models.Model):
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="tags",
                                   db_index=False)  # uniq_tag starts with it
    name = models.CharField(max_length=128)
    manifest = models.ForeignKey(Manifest, on_delete=models.CASCADE, related_name="tags")
    updated_at = models.DateTimeField(default=timezone.now)
    # A pull-through cache's tag: when the upstream last confirmed its digest (registry.proxy).
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repository", "name"], name="uniq_tag")]
        # A repository's tags by when they were pushed: the web UI's default order and retention's
        # keep_last ranking, read a page at a time (on PostgreSQL, also tag_name_bytes: migration 0007).
        indexes = [
            models.Index(fields=["repository", "updated_at", "id"], name="tag_pushed_idx"),
            models.Index(fields=["updated_at", "id"], name="tag_recent_idx"),  # the newest tags anywhere (web UI)
        ]

    def __str__(self) -> str:
        return self.name


class Upload(models.Model):
    """An upload session. Its bytes are in storage; everything needed to continue it in any process
    of any replica is here: how many bytes it holds, the running hash over them, the storage
    driver's own resume state (an S3 multipart upload's parts), and who is writing to it now."""

    id = models.CharField(max_length=32, primary_key=True)
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="uploads")
    algorithm = models.CharField(max_length=16, default="sha256")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now, db_index=True)
    # Defaults in the database too (db_default): the previous release, which inserts sessions
    # without these columns, keeps working on a migrated database during an upgrade or rollback.
    offset = models.BigIntegerField(default=0, db_default=0)
    hash_state = models.BinaryField(null=True)
    storage_state = models.JSONField(default=dict, null=True)
    # A lease, not a lock: a request writing to the session holds it until it is done or until
    # lease_until, so a replica that dies mid-request blocks the session only until then.
    lease_owner = models.CharField(max_length=32, blank=True, default="", db_default="")
    lease_until = models.DateTimeField(null=True)
    # Whose session it is ("user:<name>", or "address:<ip>" when anonymous): each may hold at most
    # [registry] max_upload_sessions live sessions. Empty for sessions made before it was recorded.
    owner = models.CharField(max_length=255, blank=True, default="", db_default="")

    class Meta:
        indexes = [models.Index(fields=["owner", "updated_at"], name="upload_owner_idx")]


class Lease(models.Model):
    """A named lease shared by every worker and replica (the garbage collector's schedule): one
    holder at a time, until it lets go or its time runs out; ``data`` is kept across holders."""

    name = models.CharField(max_length=64, primary_key=True)
    owner = models.CharField(max_length=32, blank=True, default="")
    until = models.DateTimeField(null=True)
    data = models.JSONField(default=dict)


class QuotaUsage(models.Model):
    """The bytes a [[quota]] rule's repositories hold (each distinct blob once), kept exact in the
    transactions that link and unlink blobs, which lock this row (registry.policies.quotas).
    ``scope`` says which rules the figure was counted under; another scope means count again."""

    name = models.CharField(max_length=255, primary_key=True)
    scope = models.CharField(max_length=64, blank=True, default="")
    used_bytes = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)


class Tally(models.Model):
    """Figures that cost a scan of a big table to count (the web UI's totals, a big repository's),
    counted in the background now and then and read in one lookup (ops.ui.tallies). One process
    counts a tally at a time: the one whose ``counting_until`` is set and not past."""

    name = models.CharField(max_length=255, primary_key=True)
    data = models.JSONField(default=dict)
    counted_at = models.DateTimeField(null=True)
    counting_until = models.DateTimeField(null=True)
