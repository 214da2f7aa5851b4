"""manage.py deleterepo: delete a whole repository (its blob data is left to garbagecollect)."""
from __future__ import annotations

import sys
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit import log as audit
from registry.services.exceptions import ImmutableTag, NameInvalid, NameUnknown
from registry.services.repositories import delete_repository


class Command(BaseCommand):
    help = (
        "Delete repository NAME with all its tags, manifests, blob links and upload sessions. Blob "
        "data that no other repository uses is removed by the next garbagecollect. Asks for the name "
        "again on a terminal unless --no-input is given."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The repository, e.g. team/app.")
        parser.add_argument("--no-input", "--noinput", action="store_false", dest="interactive",
                            help="Do not ask for confirmation.")

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["name"]
        if options["interactive"]:
            self._confirm(name, options.get("stdin") or sys.stdin)
        try:
            deleted = delete_repository(name)
        except (NameInvalid, NameUnknown, ImmutableTag) as exc:
            raise CommandError(str(exc)) from None
        audit.record("repository.delete", repository=deleted.name,
                     detail=f"{deleted.tags} tags, {deleted.manifests} manifests")
        self.stdout.write(
            f"deleted repository {deleted.name}: {deleted.tags} tags, {deleted.manifests} manifests, "
            f"{deleted.blob_links} blob links, {deleted.uploads} upload sessions"
        )

    def _confirm(self, name: str, stdin: TextIO) -> None:
        if not stdin.isatty():
            raise CommandError("no terminal to confirm on: pass --no-input to delete without asking")
        self.stdout.write(f"This deletes every tag and manifest of {name}. Type its name to confirm: ",
                          ending="")
        self.stdout.flush()
        if stdin.readline().strip() != name:
            raise CommandError("not confirmed; nothing deleted")
