"""manage.py createrobot: make a robot account for CI and print its secret once."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from regsite.config import PATHS_NOTE
from tokens import robots
from tokens.access import ROLE_NAMES, Role
from tokens.services import TokenError


class Command(BaseCommand):
    help = ("Create a robot account (an identity for CI that belongs to no person) and print its secret on "
            "stdout, the only time it is shown. Clients log in with the username robot$NAME and the secret "
            "as the password, with Basic credentials or through the token flow." + " " + PATHS_NOTE)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The robot's name, e.g. team-a-ci (it logs in as robot$team-a-ci).")
        parser.add_argument("--repository", action="append", dest="repositories", metavar="GLOB", required=True,
                            help="A repository glob it may use, e.g. 'team-a/*' (repeatable); nothing elsewhere.")
        parser.add_argument("--role", default=Role.WRITE.value, choices=ROLE_NAMES,
                            help="read (pull), write (push) or admin (delete) there; default write.")
        parser.add_argument("--ttl-days", type=int, default=robots.DEFAULT_TTL_DAYS,
                            help=f"Lifetime in days; default {robots.DEFAULT_TTL_DAYS}.")
        parser.add_argument("--description", default="", help="A label shown in robot lists.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            issued = robots.create(options["name"], options["repositories"], options["role"], options["ttl_days"],
                                   options["description"], created_by="manage.py")
        except TokenError as exc:
            raise CommandError(getattr(exc, "message", str(exc))) from None
        robot = issued.robot
        self.stdout.write(issued.secret)
        self.stderr.write(f"Created robot account {robot.name}: {robot.role} on {', '.join(robot.repositories)}, "
                          f"expiring {robot.expires_at:%Y-%m-%d %H:%M} UTC. Store the secret now: it is not "
                          "shown again (`manage.py robots rotate` makes a new one).")
