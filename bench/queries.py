"""Micro-benchmark of the registry's data access, in process: the service calls whose statements
are hand-written for speed, timed against a throwaway database (no HTTP, memory storage).

    .venv/bin/python -m bench.queries [--variants]                             # SQLite, temp directory
    scripts/with-postgres.sh .venv/bin/python -m bench.queries [--variants]    # PostgreSQL

Each figure is the CPU time of this process per call in microseconds, the best of REPEAT runs of
NUMBER calls: CPU time rather than wall time because the machine is shared, so PostgreSQL's own
time is not counted, only what the driver and Django cost here. ``--variants`` times each
hand-written statement of registry.queries next to its ORM form (``bulk_create`` with
``update_conflicts`` / ``ignore_conflicts`` for the upserts): where the two are close, the ORM form
is the one to keep.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import time
import timeit
from datetime import timedelta
from pathlib import Path
from typing import Callable

REPEAT = 7
NUMBER = 300
REPOSITORY = "bench/app"
MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"


def _setup() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bench-queries-"))
    os.environ.setdefault("SVC_DATABASE_URL", f"sqlite:///{scratch / 'db.sqlite3'}")
    for key, name in (("STORAGE_ROOT", "storage"), ("AUTH_TOKEN_STORAGE", "tokens"),
                      ("SERVER_SECRET_KEY_FILE", "secret_key"), ("AUTH_HTPASSWD_FILE", "users.htpasswd")):
        os.environ[f"SVC_{key}"] = str(scratch / name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "regsite.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _time(label: str, call: Callable[[], object], number: int = NUMBER) -> None:
    call()  # warm: statements built, connection open
    best = min(timeit.repeat(call, number=number, repeat=REPEAT, timer=time.process_time)) / number
    print(f"{label:<44} {best * 1e6:9.1f} us", flush=True)


def _push(name: str, body: bytes) -> str:
    from registry.digests import Digest
    from registry.services import uploads

    digest = str(Digest.of(body))
    uploads.monolithic(name, digest, uploads.Body(io.BytesIO(body), len(body)))
    return digest


def _image() -> bytes:
    """An image manifest whose config and layer are pushed to REPOSITORY."""
    config, layer = b'{"architecture":"amd64","os":"linux"}', b"layer" * 200
    descriptors = [(kind, _push(REPOSITORY, body), len(body))
                   for kind, body in (("config.v1+json", config), ("layer.v1.tar+gzip", layer))]
    return json.dumps({
        "schemaVersion": 2, "mediaType": MEDIA_TYPE,
        "config": {"mediaType": f"application/vnd.oci.image.{descriptors[0][0]}", "digest": descriptors[0][1],
                   "size": descriptors[0][2]},
        "layers": [{"mediaType": f"application/vnd.oci.image.{descriptors[1][0]}", "digest": descriptors[1][1],
                    "size": descriptors[1][2]}],
    }).encode()


def services() -> None:
    from django.db import connection

    from registry.digests import Digest
    from registry.services import blobs, catalog, manifests, referrers, tags, uploads
    from registry.storage.memory import MemoryDriver

    # The services use the process's driver: swapped for one in memory, as the tests swap it, so
    # that disk writes are not part of what is timed.
    driver = MemoryDriver()
    blobs.default_driver = uploads.default_driver = lambda: driver  # type: ignore[assignment]
    manifest = _image()
    digest = str(Digest.of(manifest))
    layer = json.loads(manifest)["layers"][0]["digest"]
    for i in range(50):
        manifests.put(REPOSITORY, f"v{i}", manifest, MEDIA_TYPE, 4 << 20)
    pushes = iter(range(10**9))

    print(f"database: {connection.vendor}")
    _time("manifest GET by tag", lambda: manifests.get(REPOSITORY, "v7"))
    _time("manifest HEAD by digest", lambda: manifests.get(REPOSITORY, digest, with_body=False))
    _time("blob HEAD (stat)", lambda: blobs.stat(REPOSITORY, layer))
    _time("tag list, n=10 after v3", lambda: tags.list_tags(REPOSITORY, 10, "v3"))
    _time("catalog, n=100", lambda: catalog.list_repositories(100, None))
    _time("referrers of the manifest", lambda: referrers.referrers(REPOSITORY, digest))
    _time("manifest PUT, existing, tag moved", lambda: manifests.put(REPOSITORY, "latest", manifest, MEDIA_TYPE,
                                                                     4 << 20))
    _time("blob mount (link upsert)", lambda: blobs.mount("bench/other", layer, REPOSITORY))
    _time("blob push, 1 KiB monolithic",
          lambda: _push("bench/push", next(pushes).to_bytes(8, "big") * 128), number=100)


def variants() -> None:
    """Each hand-written statement of registry.queries next to its ORM form."""
    from django.db import transaction
    from django.utils import timezone

    from registry import queries
    from registry.models import Blob, BlobLink, Manifest, Repository, Tag, Upload
    from registry.queries import byte_order

    repo = Repository.objects.get(name=REPOSITORY)
    manifest = Manifest.objects.filter(repository=repo).values_list("id", flat=True).get(tags__name="v7")
    digest, size = Blob.objects.values_list("digest", "size").first() or ("", 0)
    absent = "sha256:" + "0" * 64
    owner, live_after = "address:127.0.0.1", timezone.now() - timedelta(hours=1)

    def tag_orm() -> None:
        Tag.objects.bulk_create([Tag(repository_id=repo.pk, name="latest", manifest_id=manifest,
                                     updated_at=timezone.now())],
                                update_conflicts=True, unique_fields=["repository", "name"],
                                update_fields=["manifest", "updated_at"])

    def link_orm() -> None:
        now = timezone.now()
        Blob.objects.bulk_create([Blob(digest=digest, size=size, created_at=now)], ignore_conflicts=True)
        blob_id = Blob.objects.filter(digest=digest).values_list("id", flat=True).get()
        BlobLink.objects.bulk_create([BlobLink(repository_id=repo.pk, blob_id=blob_id, created_at=now)],
                                     update_conflicts=True, unique_fields=["repository", "blob"],
                                     update_fields=["created_at"])

    def atomic(call: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            with transaction.atomic():
                call()
        return run

    writes: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("tag upsert", lambda: queries.point_tags(repo.pk, manifest, ["latest"], timezone.now()), tag_orm),
        ("blob link", lambda: queries.link_blob(repo.pk, digest, size, timezone.now()), link_orm),
    ]
    for label, hand, orm in writes:
        _time(f"{label}: hand-written", atomic(hand))
        _time(f"{label}: bulk_create", atomic(orm))
    reads: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("repository by name", lambda: queries.find_repository(REPOSITORY),
         lambda: Repository.objects.filter(name=REPOSITORY).values_list("id", "created_at").first()),
        ("manifest by tag", lambda: queries.manifest_by_tag(REPOSITORY, "v7"),
         lambda: Manifest.objects.filter(repository__name=REPOSITORY, tags__name="v7")
         .values_list("id", "digest", "media_type", "size", "body").first()),
        ("blob through repository", lambda: queries.linked_blob(REPOSITORY, digest),
         lambda: Blob.objects.filter(digest=digest, links__repository__name=REPOSITORY)
         .values_list("digest", "size").first()),
        ("tag names after, limit", lambda: queries.tag_names(REPOSITORY, "v3", 11),
         lambda: list(Tag.objects.filter(repository__name=REPOSITORY).alias(key=byte_order("name"))
                      .filter(key__gt="v3").order_by("key").values_list("name", flat=True)[:11])),
        ("linked digests (2)", lambda: queries.linked_digests(repo.pk, [digest, absent]),
         lambda: set(BlobLink.objects.filter(repository_id=repo.pk, blob__digest__in=[digest, absent])
                     .values_list("blob__digest", flat=True))),
        ("upload sessions of an owner", lambda: queries.count_live_sessions(owner, live_after),
         lambda: Upload.objects.filter(owner=owner, updated_at__gte=live_after).count()),
    ]
    for label, hand, orm in reads:
        _time(f"{label}: hand-written", hand)
        _time(f"{label}: ORM", orm)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--variants", action="store_true", help="also time the ORM forms of the statements")
    args = parser.parse_args()
    _setup()
    services()
    if args.variants:
        variants()


if __name__ == "__main__":
    main()
