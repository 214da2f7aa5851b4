"""manage.py adduser: add a user to the htpasswd file, or change a user's password (bcrypt)."""
from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from regsite.config import PATHS_NOTE
from tokens import htpasswd, services


class Command(BaseCommand):
    help = (
        "Write a bcrypt entry for USERNAME into the htpasswd file ([auth] htpasswd_file), creating "
        "the file if needed and replacing the user's old entry. The password comes from "
        "--password-stdin or is prompted for on a terminal. The user's API tokens stop working "
        "(those of an earlier user of the same name, or made with the old password) and are deleted."
        + " " + PATHS_NOTE
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--password-stdin", action="store_true",
                            help="Read the password from the first line of standard input.")
        parser.add_argument("--file", help="The htpasswd file; default the configured one.")
        parser.add_argument("--cost", type=int, default=htpasswd.DEFAULT_COST,
                            help=f"bcrypt cost, 4..16; default {htpasswd.DEFAULT_COST}.")

    def handle(self, *args: Any, **options: Any) -> None:
        stdin: TextIO = options.get("stdin") or sys.stdin
        if not 4 <= options["cost"] <= 16:
            raise CommandError("--cost must be between 4 and 16")
        try:
            htpasswd.validate_username(options["username"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        password = self._password(stdin, options["password_stdin"])
        path = Path(options["file"] or settings.AUTH_HTPASSWD_FILE)
        try:
            created = htpasswd.set_password(path, options["username"], password, options["cost"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc.strerror}") from None
        verb = "Added user" if created else "Changed the password of"
        self.stdout.write(f"{verb} {options['username']} in {path}.")
        if path == Path(settings.AUTH_HTPASSWD_FILE):
            self._purge_tokens(options["username"], created)

    def _purge_tokens(self, username: str, created: bool) -> None:
        # They are refused already, their owner's entry having changed (tokens.owner_stamp): this
        # clears them from the lists, and from the count of the user's tokens.
        try:
            purged = services.purge_tokens_of({username})
        except DatabaseError as exc:  # the database token backend, before `manage.py migrate`
            raise CommandError(f"changed the htpasswd file, but could not delete the tokens of {username} "
                               f"({exc}); they are refused; run `manage.py purgetokens --orphaned`") from None
        if purged and created:
            self.stdout.write(f"Deleted {purged} tokens left by an earlier user named {username}.")
        elif purged:
            self.stdout.write(f"Deleted {purged} tokens of {username}: they were made with the old password.")

    def _password(self, stdin: TextIO, from_stdin: bool) -> str:
        if from_stdin:
            password = stdin.readline().rstrip("\r\n")
            if not password:
                raise CommandError("no password on standard input")
            return password
        if not stdin.isatty():
            raise CommandError("no terminal to prompt for the password: use --password-stdin")
        password = getpass.getpass("Password: ")
        if password != getpass.getpass("Password (again): "):
            raise CommandError("the passwords do not match")
        if not password:
            raise CommandError("the password is empty")
        return password
