"""Every on-disk path of the registry is built here and nowhere else.

Layout below the storage root::

    blobs/<algorithm>/<first two hex>/<hex>/data    content-addressed blob data, stored once
    uploads/<upload id>/data                         bytes of an upload session in progress
    _probe/<random>                                  readiness probe files
    uploads/.probe-ready                             the readiness probe on an object store, overwritten
    _gc/schedule                                     the collector's lock ("gc", registry.locks) with
                                                     the time of the last scheduled run
    _locks/<name>                                    any other named lock, with its note
    _trash/<random>                                  a collected blob's directory, renamed out of
                                                     blobs/ under its lock and deleted after it

Repository membership, manifests and tags live in the database, not in this tree. The inputs are
validated again here, so that no caller can build a path outside the tree by mistake.
"""
from __future__ import annotations

import re

from registry.digests import Digest

_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
_LOCK_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_BLOB_PREFIX = re.compile(r"[0-9a-f]{2}")

BLOBS = "blobs"
UPLOADS = "uploads"
PROBES = "_probe"
LOCKS = "_locks"
TRASH = "_trash"
GC_SCHEDULE = "_gc/schedule"
GC_LOCK = "gc"


def blob_dir(digest: Digest) -> str:
    return f"{BLOBS}/{digest.algorithm}/{digest.hex[:2]}/{digest.hex}"


def blob_data(digest: Digest) -> str:
    return f"{blob_dir(digest)}/data"


def trash(name: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{32}", name):
        raise ValueError(f"invalid trash name {name!r}")
    return f"{TRASH}/{name}"


def upload_dir(upload_id: str) -> str:
    if not _UPLOAD_ID.fullmatch(upload_id):
        raise ValueError(f"invalid upload id {upload_id!r}")
    return f"{UPLOADS}/{upload_id}"


def upload_data(upload_id: str) -> str:
    return f"{upload_dir(upload_id)}/data"


def probe(name: str, area: str = PROBES) -> str:
    """A readiness probe file: in ``_probe/``, or in ``blobs/`` or ``uploads/`` themselves (where a
    push writes), as ``.probe-<name>``, a name no blob or upload path can have."""
    if not re.fullmatch(r"[0-9a-f]{8,64}", name):
        raise ValueError(f"invalid probe name {name!r}")
    if area == PROBES:
        return f"{PROBES}/{name}"
    if area not in (BLOBS, UPLOADS):
        raise ValueError(f"no probes in {area!r}")
    return f"{area}/.probe-{name}"


def ready_probe(area: str) -> str:
    """The one readiness probe of an object store in ``area``: every check overwrites it."""
    if area not in (BLOBS, UPLOADS):
        raise ValueError(f"no probes in {area!r}")
    return f"{area}/.probe-ready"


def lock(name: str) -> str:
    """The file behind the named lock of registry.locks.FileLocks."""
    if not _LOCK_NAME.fullmatch(name):
        raise ValueError(f"invalid lock name {name!r}")
    if name == GC_LOCK:
        # Where releases before named locks flock it: replicas of both sharing one storage root
        # during an upgrade still exclude each other, and the time of the last run is kept.
        return GC_SCHEDULE
    return f"{LOCKS}/{name}"


def blob_algorithm_dir(algorithm: str) -> str:
    """The directory of one algorithm's blobs, whose entries are the prefix directories."""
    return f"{BLOBS}/{algorithm}"


def blob_prefix_dir(algorithm: str, prefix: str) -> str:
    """A prefix directory (``blobs/<alg>/<xx>``), whose entries are the blob directories."""
    return f"{blob_algorithm_dir(algorithm)}/{prefix}"


def is_blob_prefix(name: str) -> bool:
    """Whether ``name`` is the name of a prefix directory (``blobs/<alg>/<xx>``)."""
    return _BLOB_PREFIX.fullmatch(name) is not None


def digest_from_blob_dir(algorithm: str, prefix: str, name: str) -> Digest | None:
    """The digest the blob directory ``blobs/<alg>/<prefix>/<name>`` is for, or None for anything else."""
    if not is_blob_prefix(prefix) or not name.startswith(prefix):
        return None
    return Digest.parse_or_none(f"{algorithm}:{name}")


def digest_from_blob_path(path: str) -> Digest | None:
    """The digest a ``blobs/<alg>/<xx>/<hex>/data`` path stores, or None for anything else."""
    parts = path.split("/")
    if len(parts) != 5 or parts[0] != BLOBS or parts[4] != "data":
        return None
    return digest_from_blob_dir(parts[1], parts[2], parts[3])
