#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""
from __future__ import annotations

import os
import sys

# Django's development servers would serve the registry without gunicorn, its worker and its limits.
DEV_SERVERS = ("runserver", "testserver")


def main() -> None:
    if sys.argv[1:] in (["version"], ["--version"]):
        # Django answers these itself, with its own version, before looking for any command.
        import django

        from regsite.version import version

        print(f"svc-registry {version()}\nDjango {django.get_version()}")
        return
    if sys.argv[1:2] and sys.argv[1] in DEV_SERVERS:
        sys.exit(f"manage.py {sys.argv[1]}: the registry runs under gunicorn, not Django's development server: "
                 "`make run`, or `gunicorn -c gunicorn.conf.py`")
    if sys.argv[1:2] == ["migrate"]:
        # A migration may build an index over millions of rows: [database] statement_timeout is for
        # the requests of a serving registry, not for this (an explicit variable still wins).
        os.environ.setdefault("SVC_DATABASE_STATEMENT_TIMEOUT", "0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "regsite.settings")
    from django.core.management import ManagementUtility

    class Utility(ManagementUtility):
        def main_help_text(self, commands_only: bool = False) -> str:
            lines = super().main_help_text(commands_only).splitlines()
            return "\n".join(line for line in lines if line.strip() not in DEV_SERVERS)

    Utility(sys.argv).execute()


if __name__ == "__main__":
    main()
