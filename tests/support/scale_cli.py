"""The scale content (tests/support/scale.py) from the command line, against the database and storage
the SVC_* variables name: a server's ``env()`` (tests/e2e/test_gc_scale.py, bench/scale.py)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

import django


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.support.scale_cli load --size N`` against the database and storage the SVC_*
    variables name (a server's ``env()``); ``collect`` times one garbage collection there and
    prints it as JSON (seconds, its CPU seconds, and what it removed)."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.scale_cli")
    commands = parser.add_subparsers(dest="command", required=True)
    loading = commands.add_parser("load")
    loading.add_argument("--size", type=int, required=True)
    loading.add_argument("--big-tags", type=int, help="tags of the big repository (default: min(size, 100000))")
    loading.add_argument("--untagged-every", type=int, default=0)
    loading.add_argument("--orphans", type=int, default=0)
    loading.add_argument("--referrers", type=int, default=0)
    loading.add_argument("--no-files", action="store_true")
    collecting = commands.add_parser("collect")
    collecting.add_argument("--delete-untagged", action="store_true")
    collecting.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "regsite.settings")
    django.setup()
    from django.conf import settings

    from registry.services import gc
    from tests.support.scale import Shape, load

    started = time.monotonic()
    if args.command == "load":
        shape = Shape.of_size(args.size, untagged_every=args.untagged_every, orphans=args.orphans,
                              referrers=args.referrers, files=not args.no_files)
        if args.big_tags is not None:
            shape = dataclasses.replace(shape, big_tags=args.big_tags)
        load(shape, Path(settings.REGISTRY_STORAGE_ROOT))
        print(json.dumps({"seconds": time.monotonic() - started, "images": shape.images}))
        return 0
    cpu = time.process_time()
    result = gc.collect(gc.Options(delete_untagged=args.delete_untagged, dry_run=args.dry_run))
    # The collector's own CPU (SQLite runs in it): what it worked, without its pauses and the
    # disk's waits, which move its seconds from one run to the next on a shared machine.
    print(json.dumps({"seconds": time.monotonic() - started, "cpu_seconds": time.process_time() - cpu,
                      **vars(result)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
