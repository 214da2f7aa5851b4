"""manage.py robots: list robot accounts; disable, enable, rotate or delete one."""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from regsite import tables
from regsite.config import PATHS_NOTE
from tokens import robots
from tokens.services import TokenError

COLUMNS = ("NAME", "ROLE", "REPOSITORIES", "STATE", "EXPIRES", "CREATED_BY", "DESCRIPTION")


class Command(BaseCommand):
    help = ("Robot accounts: `list` (--json), or `disable`, `enable`, `rotate` (prints a new secret once; the "
            "old one stops working at once) or `delete` NAME." + " " + PATHS_NOTE)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("verb", choices=["list", "disable", "enable", "rotate", "delete"])
        parser.add_argument("name", nargs="?", help="The robot, robot$NAME or NAME.")
        parser.add_argument("--json", action="store_true", help="list: one JSON document instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        verb, name = options["verb"], options["name"]
        if verb == "list":
            self._list(options["json"])
            return
        if not name:
            raise CommandError(f"robots {verb}: name the robot")
        try:
            if verb == "rotate":
                issued = robots.rotate(name)
                self.stdout.write(issued.secret)
                self.stderr.write(f"Rotated the secret of {issued.robot.name}: the old one no longer works. "
                                  "Store the new one now: it is not shown again.")
            elif verb == "delete":
                robots.delete(name)
                self.stdout.write(f"deleted {robots.full_name(name)}")
            else:
                robot = robots.set_disabled(name, verb == "disable")
                self.stdout.write(f"{robot.name} is {robot.state}")
        except TokenError as exc:
            raise CommandError(getattr(exc, "message", str(exc))) from None

    def _list(self, as_json: bool) -> None:
        found = robots.list_robots()
        if as_json:
            self.stdout.write(json.dumps({"robots": [robot.as_dict() for robot in found]}, indent=2))
            return
        if not found:
            self.stderr.write("No robot accounts.")
            return
        rows = [COLUMNS] + [(r.name, r.role.value, ",".join(r.repositories), r.state, f"{r.expires_at:%Y-%m-%d %H:%M}",
                             r.created_by or "-", r.description) for r in found]
        for line in tables.lines(rows):
            self.stdout.write(line)
