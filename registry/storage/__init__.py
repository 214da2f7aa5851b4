"""Storage drivers and the process-wide default driver built from settings."""
from __future__ import annotations

from functools import lru_cache

from registry.storage.driver import StorageDriver


@lru_cache(maxsize=1)
def default_driver() -> StorageDriver:
    from django.conf import settings

    if settings.REGISTRY_STORAGE["backend"] == "s3":
        from regsite.config import s3_driver

        driver: StorageDriver = s3_driver(settings.REGISTRY_STORAGE)
        return driver
    from registry.storage.filesystem import FilesystemDriver

    return FilesystemDriver(settings.REGISTRY_STORAGE_ROOT)
