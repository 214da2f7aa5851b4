#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""
from __future__ import annotations

import os
import sys


def main() -> None:
    if sys.argv[1:] in (["version"], ["--version"]):
        # Django answers these itself, with its own version, before looking for any command.
        import django

        from regsite.version import version

        print(f"svc-registry {version()}\nDjango {django.get_version()}")
        return
    if sys.argv[1:2] == ["migrate"]:
        # A migration may build an index over millions of rows: [database] statement_timeout is for
        # the requests of a serving registry, not for this (an explicit variable still wins).
        os.environ.setdefault("SVC_DATABASE_STATEMENT_TIMEOUT", "0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "regsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
