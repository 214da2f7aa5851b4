"""Whole repositories: delete one with everything recorded in it.

A repository shows in the catalog while it holds a manifest (services.catalog), so deleting its
last manifest already hides it; deleting the repository also forgets its blob links and upload
sessions. Blob data is left to the garbage collector: other repositories may share it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from notifications import outbox
from registry import queries
from registry.policies import immutable, quotas
from registry.services.common import get_repository
from registry.storage import default_driver, paths
from registry.storage.driver import StorageDriver, delete_if_exists


@dataclass(frozen=True)
class DeletedRepository:
    name: str
    tags: int
    manifests: int
    blob_links: int
    uploads: int


def delete_repository(name: str) -> DeletedRepository:
    """Delete repository ``name`` and its tags, manifests, blob links and upload sessions.

    Raises NameInvalid for a malformed name and NameUnknown for a repository that does not exist.
    """
    repository = get_repository(name)
    with transaction.atomic():
        immutable.check_repository_delete(repository)
        with quotas.releasing(lambda: queries.quota_links_in_repository(repository.id)):
            removed = queries.delete_repository(repository.id)
        outbox.repository_deleted(name)
    _remove_upload_data(removed.sessions, default_driver())
    return DeletedRepository(name, removed.tags, removed.manifests, removed.blob_links, len(removed.sessions))


def _remove_upload_data(sessions: list[tuple[str, dict[str, Any]]], driver: StorageDriver) -> None:
    # After the commit: a crash before this leaves session data without a session, which
    # uploads.purge_expired removes once it is older than the upload expiry.
    for upload_id, state in sessions:
        driver.abort(paths.upload_data(upload_id), state)
        delete_if_exists(driver, paths.upload_dir(upload_id))
