"""Domain errors raised by the registry services. They know nothing of HTTP; registry.errors maps them.

A full storage device is the one storage error that services pass through unchanged:
registry.storage.driver.StorageFull, which registry.errors maps as well.
"""
from __future__ import annotations

from typing import Any


class RegistryError(Exception):
    """Base class. ``detail`` is optional structured context safe to show to the client."""

    def __init__(self, message: str = "", detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class NameInvalid(RegistryError):
    pass


class NameUnknown(RegistryError):
    pass


class TagInvalid(RegistryError):
    pass


class DigestInvalid(RegistryError):
    pass


class SizeInvalid(RegistryError):
    pass


class BlobUnknown(RegistryError):
    pass


class UploadUnknown(RegistryError):
    pass


class UploadInvalid(RegistryError):
    pass


class UploadOutOfOrder(RegistryError):
    """A chunk does not start where the upload ends, or the session is busy with another chunk."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class UploadBusy(RegistryError):
    """A closing PUT found its session leased to another request: a chunk still arriving, or an
    earlier attempt of this PUT that the database failed under, whose lease is being given back."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TooManyUploads(RegistryError):
    """The caller holds as many upload sessions as it may; one frees when a push ends or expires."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ManifestInvalid(RegistryError):
    pass


class ManifestUnknown(RegistryError):
    pass


class ManifestBlobUnknown(RegistryError):
    pass


class ManifestTooLarge(RegistryError):
    pass


class PaginationInvalid(RegistryError):
    pass


class RangeNotSatisfiable(RegistryError):
    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


class DeleteDisabled(RegistryError):
    pass


class PolicyDenied(RegistryError):
    """A governance rule refuses the change ([[immutable]], [[quota]]): answered 403 DENIED with a
    message naming the rule."""


class ImmutableTag(PolicyDenied):
    pass


class QuotaExceeded(PolicyDenied):
    pass


class ReadOnlyNamespace(RegistryError):
    """A push, delete or mount into a pull-through cache's namespace."""


class UpstreamError(RegistryError):
    """A pull-through cache's upstream could not give what a pull needs. ``retry_after`` is the
    seconds a client should wait; the message names the upstream's host, never its credentials."""

    def __init__(self, message: str, retry_after: int = 30) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UpstreamUnavailable(UpstreamError):
    """Unreachable, timed out, or answering 503."""


class UpstreamTimedOut(UpstreamUnavailable):
    """No whole answer within the cache's deadline (``total_timeout_seconds``): 504."""


class UpstreamFailed(UpstreamError):
    """Answering an error other than 429 and 503, refusing the configured credentials, or sending
    content that does not match its digest."""


class UpstreamThrottled(UpstreamError):
    """Answering 429 Too Many Requests."""
