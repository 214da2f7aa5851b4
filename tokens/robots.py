"""Robot accounts: identities for CI that belong to no person, so survive people leaving.

A robot is named ``robot$<name>``, has a role on the repositories its globs match (nothing
elsewhere, whatever the [[access]] rules say of other principals), an expiry, and a secret: ``svcr_``
and 43 URL-safe characters (256 random bits), shown once when it is made or rotated and stored only
as its SHA-256, like an API token's. It signs in as its name with the secret as the password, with
Basic credentials or through the token flow. Disabling or deleting it, or rotating its secret,
refuses its very next request (and every signed token issued to it). Admins manage robots
(tokens.authz.is_admin); they live in the database, so every replica sees them at once.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from audit import log as audit
from tokens import queries
from tokens.access import Role
from tokens.principal import ROBOT_PREFIX, Mechanism, Principal
from tokens.services import (
    InvalidTokenRequest,
    TokenError,
    validate_description,
    validate_repositories,
    validate_role,
    validate_ttl_days,
)

SECRET_PREFIX = "svcr_"
SECRET_SHAPE = re.compile(r"^svcr_[A-Za-z0-9_-]{43}$")
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
DEFAULT_TTL_DAYS = 90
# A digest no secret has: an unknown robot's check costs a comparison as a known one's does.
_NO_DIGEST = "0" * 64


class RobotNotFound(TokenError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no robot account {name!r}")
        self.message = str(self)


class RobotExists(TokenError):
    def __init__(self, name: str) -> None:
        super().__init__(f"a robot account {name!r} exists already: rotate its secret, or delete it first")
        self.message = str(self)


@dataclass(frozen=True)
class Robot:
    name: str
    digest: str
    role: Role
    repositories: tuple[str, ...]
    description: str
    created_by: str
    created_at: datetime
    expires_at: datetime
    rotated_at: datetime | None
    disabled: bool

    @property
    def expired(self) -> bool:
        return _now() >= self.expires_at

    @property
    def state(self) -> str:
        return "disabled" if self.disabled else "expired" if self.expired else "active"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "role": str(self.role), "repositories": list(self.repositories),
                "description": self.description, "created_by": self.created_by,
                "created_at": _iso(self.created_at), "expires_at": _iso(self.expires_at),
                "rotated_at": _iso(self.rotated_at) if self.rotated_at else None, "state": self.state}


@dataclass(frozen=True)
class Issued:
    """A robot with its secret, the only time the secret is shown."""

    robot: Robot
    secret: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.robot.as_dict(), "secret": self.secret}


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", errors="surrogateescape")).hexdigest()


def _robot(row: queries.RobotRow) -> Robot:
    return Robot(row.name, row.digest, Role(row.role), tuple(json.loads(row.repositories)), row.description,
                 row.created_by, row.created_at, row.expires_at, row.rotated_at, row.disabled)


def full_name(name: Any) -> str:
    """``robot$<name>`` from either spelling; InvalidTokenRequest for anything else."""
    if not isinstance(name, str):
        raise InvalidTokenRequest("name", "name must be a string")
    short = name[len(ROBOT_PREFIX):] if name.startswith(ROBOT_PREFIX) else name
    if not NAME.fullmatch(short):
        raise InvalidTokenRequest("name", f"name: {ROBOT_PREFIX}<name>, the name 1 to 64 lower case letters, digits, "
                                          ". _ or -, starting with a letter or digit")
    return ROBOT_PREFIX + short


def create(name: str, repositories: Any, role: Role | str = Role.WRITE, ttl_days: int = DEFAULT_TTL_DAYS,
           description: str = "", created_by: str = "") -> Issued:
    full = full_name(name)
    globs = validate_repositories(repositories)
    if not globs:
        raise InvalidTokenRequest("repositories", "repositories: a robot needs at least one glob, such as "
                                                  "\"team-a/*\"")
    role = validate_role(role)
    ttl_days = validate_ttl_days(ttl_days)
    description = validate_description(description)
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    now = _now()
    row = queries.RobotRow(full, _digest(secret), role.value, json.dumps(list(globs)), description,
                           created_by[:255], now, now + timedelta(days=ttl_days), None, False)
    if not queries.insert_robot(row):
        raise RobotExists(full)
    audit.record("robot.create", reference=full, detail=f"{role} on {', '.join(globs)}, {ttl_days} days")
    return Issued(_robot(row), secret)


def get(name: str) -> Robot:
    row = queries.robot(full_name(name))
    if row is None:
        raise RobotNotFound(full_name(name))
    return _robot(row)


def list_robots() -> list[Robot]:
    return [_robot(row) for row in queries.robots()]


def rotate(name: str) -> Issued:
    """A new secret for the robot; the old one (and every token issued with it) stops working."""
    robot = get(name)
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    now = _now()
    if not queries.set_robot_secret(robot.name, _digest(secret), now):
        raise RobotNotFound(robot.name)
    audit.record("robot.rotate", reference=robot.name)
    return Issued(get(robot.name), secret)


def set_disabled(name: str, disabled: bool) -> Robot:
    full = full_name(name)
    if not queries.set_robot_disabled(full, disabled):
        raise RobotNotFound(full)
    audit.record("robot.disable" if disabled else "robot.enable", reference=full)
    return get(full)


def delete(name: str) -> None:
    full = full_name(name)
    if not queries.delete_robot(full):
        raise RobotNotFound(full)
    audit.record("robot.delete", reference=full)


def live(name: str) -> Robot | None:
    """The robot, unless it is unknown, disabled or expired."""
    if not name.startswith(ROBOT_PREFIX) or not NAME.fullmatch(name[len(ROBOT_PREFIX):]):
        return None
    row = queries.robot(name)
    if row is None or row.disabled or _now() >= row.expires_at:
        return None
    return _robot(row)


def authenticate(name: str, secret: str) -> Robot | None:
    """The robot whose name and secret these are, if it may sign in; None otherwise."""
    robot = live(name)
    given = _digest(secret) if SECRET_SHAPE.fullmatch(secret) else _NO_DIGEST[:-1] + "1"
    if not hmac.compare_digest(given, robot.digest if robot is not None else _NO_DIGEST):
        return None
    return robot


def principal(robot: Robot, mechanism: Mechanism) -> Principal:
    return Principal(name=robot.name, mechanism=mechanism, role=robot.role, repositories=robot.repositories)
