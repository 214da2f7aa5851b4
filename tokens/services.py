"""API tokens: create, list, revoke, purge and authenticate. Pure Python over the token repository
(files or database); no HTTP.

A token is ``svc_`` followed by 43 URL-safe characters (256 random bits). Only its SHA-256 is
stored; the first 16 hex digits of that hash (``hash_prefix``) name it in lists and revocations.
A token lives only as long as its owner is the user of the htpasswd file it was made for, with the
entry it had then (tokens.owner_stamp): one whose owner left the file, was added again or had their
password changed is refused at once, listed as orphaned, and purged by ``manage.py purgetokens``.
A token may be limited to ``repositories`` (globs); what it may do on a repository is the access
decision's (tokens.authz): the least of its role, its repositories and its owner's role there.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from audit import log as audit
from registry.policies.globs import glob_regex
from regsite import text
from tokens import htpasswd, owner_stamp
from tokens.access import DEFAULT_ROLE, ROLE_NAMES, Role
from tokens.principal import ROBOT_PREFIX, Mechanism, Principal
from tokens.db_repository import DatabaseTokenRepository
from tokens.htpasswd import validate_username
from tokens.repository import StoredToken, TokenRepository, TokenStore

log = logging.getLogger(__name__)

TOKEN_PREFIX = "svc_"
TOKEN_SHAPE = re.compile(r"^svc_[A-Za-z0-9_-]{43}$")
HASH_PREFIX = re.compile(r"^[0-9a-fA-F]{16}$")
HASH_PREFIX_LENGTH = 16
DEFAULT_TTL_DAYS = 30
MAX_TTL_DAYS = 3650
MAX_DESCRIPTION = 256
MAX_REPOSITORIES = 32
TOKEN_USERNAME = "token"  # Basic credentials with this username carry a token as the password


class TokenError(Exception):
    pass


class InvalidTokenRequest(TokenError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class InvalidPrefix(InvalidTokenRequest):
    def __init__(self, message: str = "hash_prefix must be 16 hexadecimal characters") -> None:
        super().__init__("hash_prefix", message)


class TooManyTokens(TokenError):
    def __init__(self, owner: str, limit: int) -> None:
        super().__init__(f"{owner} already has {limit} live tokens, the most [auth] max_tokens_per_user "
                         "allows: revoke one first")
        self.message = str(self)


class NotAllowed(TokenError):
    """The signed-in user may not do this (manage robot accounts: admins only)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TokenNotFound(TokenError):
    def __init__(self, hash_prefix: str) -> None:
        super().__init__(f"no token with hash_prefix {hash_prefix}")
        self.hash_prefix = hash_prefix


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class CreatedToken:
    token: str
    hash_prefix: str
    role: Role
    description: str
    created_at: datetime
    expires_at: datetime
    expires_in_days: int
    repositories: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "hash_prefix": self.hash_prefix,
            "role": str(self.role),
            "description": self.description,
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
            "expires_in_days": self.expires_in_days,
            "repositories": list(self.repositories) or None,
        }


@dataclass(frozen=True)
class TokenRecord:
    hash_prefix: str
    owner: str
    role: Role
    description: str
    created_at: datetime
    expires_at: datetime
    owner_stamp: str = field(default=owner_stamp.UNSTAMPED, repr=False, compare=False)
    repositories: tuple[str, ...] = ()

    @property
    def expired(self) -> bool:
        return _now() >= self.expires_at

    @property
    def orphaned(self) -> bool:
        """Its owner is no longer the user it was made for (gone from the htpasswd file, added
        again, or with another password): it is refused, and purgetokens removes it."""
        return not owner_stamp.holds(self.owner, self.owner_stamp, htpasswd.current_file().snapshot())

    @classmethod
    def from_stored(cls, stored: StoredToken) -> TokenRecord:
        # An earlier release stored descriptions holding lone surrogates: shown written out, so
        # that every page, list and terminal takes them.
        return cls(stored.digest[:HASH_PREFIX_LENGTH], stored.owner, stored.role, text.printable(stored.description),
                   stored.created_at, stored.expires_at, stored.owner_stamp, stored.repositories)

    def as_dict(self) -> dict[str, Any]:
        return {
            "hash_prefix": self.hash_prefix,
            "owner": self.owner,
            "role": str(self.role),
            "description": self.description,
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
            "expired": self.expired,
            "repositories": list(self.repositories) or None,
        }


def token_principal(record: TokenRecord, mechanism: Mechanism) -> Principal:
    """Who a request with this token is: its owner, capped by its role and repositories."""
    return Principal(name=record.owner, mechanism=mechanism, role=record.role, hash_prefix=record.hash_prefix,
                     repositories=record.repositories or None)


_DATABASE = DatabaseTokenRepository()


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def repository() -> TokenStore:
    """The configured token repository: files ([auth] token_storage) or the database."""
    if settings.AUTH_TOKEN_BACKEND == "database":
        return _DATABASE
    return _repository_at(str(settings.AUTH_TOKEN_STORAGE))


def file_repository() -> TokenRepository:
    """The token files, whichever backend is configured (``manage.py copytokens`` reads them)."""
    return _repository_at(str(settings.AUTH_TOKEN_STORAGE))


@lru_cache(maxsize=8)
def _repository_at(directory: str) -> TokenRepository:
    # Every Bearer request needs the repository: building a Path for it each time cost more than
    # the token file's lstat. It holds nothing but its directory.
    return TokenRepository(Path(directory))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", errors="surrogateescape")).hexdigest()


def claimed_prefix(token: str) -> str:
    """How the audit log names a token that was refused: its hash prefix, if it has a token's shape."""
    return token_digest(token)[:HASH_PREFIX_LENGTH] if TOKEN_SHAPE.match(token) else ""


def validate_owner(owner: Any) -> str:
    if not isinstance(owner, str):
        raise InvalidTokenRequest("username", "username must be a string")
    try:
        validate_username(owner)
    except ValueError as exc:
        raise InvalidTokenRequest("username", f"username: {exc}") from None
    if owner == TOKEN_USERNAME:
        raise InvalidTokenRequest("username", f"username {TOKEN_USERNAME!r} is reserved for token logins")
    if owner.startswith(ROBOT_PREFIX):
        raise InvalidTokenRequest("username", f"names starting {ROBOT_PREFIX!r} are robot accounts', which hold "
                                              "no tokens")
    return owner


def validate_role(role: Any) -> Role:
    parsed = Role.parse(role)
    if parsed is None:
        raise InvalidTokenRequest("role", f"role must be one of {', '.join(ROLE_NAMES)}")
    return parsed


def validate_ttl_days(ttl_days: Any) -> int:
    if isinstance(ttl_days, bool) or not isinstance(ttl_days, int):
        raise InvalidTokenRequest("ttl_days", "ttl_days must be an integer number of days")
    if not 1 <= ttl_days <= MAX_TTL_DAYS:
        raise InvalidTokenRequest("ttl_days", f"ttl_days must be between 1 and {MAX_TTL_DAYS}")
    return ttl_days


def validate_description(description: Any) -> str:
    if not isinstance(description, str):
        raise InvalidTokenRequest("description", "description must be a string")
    if text.problem(description):  # a command's argument (the API's body is checked whole)
        raise InvalidTokenRequest("description", f"description {text.problem(description)}")
    if len(description) > MAX_DESCRIPTION:
        raise InvalidTokenRequest("description",
                                  f"description must be at most {MAX_DESCRIPTION} characters")
    return description


def validate_repositories(repositories: Any, field: str = "repositories") -> tuple[str, ...]:
    """Globs such as ``team-a/*`` (as the [[access]] rules spell them); None or empty: not limited."""
    if repositories is None:
        return ()
    if not isinstance(repositories, list) or not all(isinstance(glob, str) for glob in repositories):
        raise InvalidTokenRequest(field, f"{field} must be a list of repository globs such as \"team-a/*\"")
    if len(repositories) > MAX_REPOSITORIES:
        raise InvalidTokenRequest(field, f"{field}: at most {MAX_REPOSITORIES} globs")
    for glob in repositories:
        try:
            glob_regex(glob)
        except ValueError as exc:
            raise InvalidTokenRequest(field, f"{field}: invalid glob {glob[:100]!r}: {exc}") from None
    return tuple(dict.fromkeys(repositories))


def create_token(owner: str, role: Role | str = DEFAULT_ROLE, ttl_days: int = DEFAULT_TTL_DAYS,
                 description: str = "", repositories: list[str] | tuple[str, ...] | None = None) -> CreatedToken:
    owner = validate_owner(owner)
    role = validate_role(role)
    ttl_days = validate_ttl_days(ttl_days)
    description = validate_description(description)
    globs = validate_repositories(list(repositories) if isinstance(repositories, tuple) else repositories)
    stamp = owner_stamp.current(owner, htpasswd.current_file().snapshot())
    if stamp is None:
        raise InvalidTokenRequest("username", f"no user {owner!r} in the htpasswd file")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    created_at = _now()
    stored = StoredToken(token_digest(token), owner, role, description, created_at,
                         created_at + timedelta(days=ttl_days), stamp, globs)
    repo = repository()
    # Counted, then saved: two creates at the very same moment could pass it together. The limit
    # bounds what one user can make the registry keep, not a security boundary.
    if repo.live_count_of(owner, created_at) >= settings.AUTH_MAX_TOKENS_PER_USER:
        # Tokens left from an earlier password (or an earlier user of the name) are dead and
        # invisible to the user: they must not hold places.
        _purge(_orphaned_of(repo, owner))
        if repo.live_count_of(owner, created_at) >= settings.AUTH_MAX_TOKENS_PER_USER:
            raise TooManyTokens(owner, settings.AUTH_MAX_TOKENS_PER_USER)
    repo.save(stored)
    prefix = stored.digest[:HASH_PREFIX_LENGTH]
    audit.record("token.create", reference=prefix,
                 detail=f"{role} token of {owner}, {ttl_days} days" + (f", on {', '.join(globs)}" if globs else ""))
    return CreatedToken(token, prefix, role, description, created_at, stored.expires_at, ttl_days, globs)


def list_tokens(owner: str | None = None) -> list[TokenRecord]:
    """One user's tokens (without reading anyone else's), or every token, orphaned ones included."""
    repo = repository()
    stored = repo.all() if owner is None else repo.of_owner(owner)
    return sorted(map(TokenRecord.from_stored, stored), key=lambda r: (r.created_at, r.hash_prefix))


def tokens_of_user(owner: str) -> list[TokenRecord]:
    """The tokens the user signed in as ``owner`` holds: not those an earlier user of the name, or
    the user with an earlier password, made (they are refused; only the server lists them)."""
    users = htpasswd.current_file().snapshot()
    return [record for record in list_tokens(owner) if owner_stamp.holds(owner, record.owner_stamp, users)]


def live_tokens_by_role() -> dict[Role, int]:
    """Tokens neither expired nor revoked, by role, at a cost that does not grow with their number."""
    return repository().live_counts(_now())


def purge_expired(before: datetime | None = None) -> int:
    """Delete the tokens that expired (at or before ``before``, default now); how many."""
    return repository().delete_expired(before or _now())


def _orphaned_of(repo: TokenStore, owner: str) -> list[StoredToken]:
    users = htpasswd.current_file().snapshot()
    return [s for s in repo.of_owner(owner) if not owner_stamp.holds(s.owner, s.owner_stamp, users)]


def _purge(records: list[StoredToken]) -> int:
    repo = repository()
    return sum(repo.delete(stored.digest) for stored in records)


def orphaned_tokens() -> list[StoredToken]:
    """Tokens whose owner is not the user they were made for any more: gone from the htpasswd
    file, or there with another entry (added again, or another password)."""
    repo = repository()
    return [stored for owner in sorted(repo.owners()) for stored in _orphaned_of(repo, owner)]


def purge_orphaned() -> tuple[int, set[str]]:
    """Delete the orphaned tokens; how many, and of which owners."""
    orphans = orphaned_tokens()
    return _purge(orphans), {stored.owner for stored in orphans}


def purge_tokens_of(owners: set[str]) -> int:
    """Delete every token of these owners; how many."""
    repo = repository()
    return _purge([stored for owner in owners for stored in repo.of_owner(owner)])


def stamp_unstamped() -> int:
    """Stamp the tokens made before stamps existed with their owner's entry now (those whose owner
    is gone stay as they are: refused); how many. The scheduled maintenance runs this, so that a
    token unused since the upgrade is bound to its owner before the entry can change."""
    repo = repository()
    users = htpasswd.current_file().snapshot()
    stamped = 0
    for stored in repo.all():
        stamp = owner_stamp.current(stored.owner, users)
        if stored.owner_stamp == owner_stamp.UNSTAMPED and stamp is not None:
            found = repo.stamp(stored.digest, stamp)
            if found is not None and found.owner_stamp == stamp:
                stamped += 1
    return stamped


def revoke_token(owner: str | None, hash_prefix: str) -> None:
    """Delete the token; ``owner`` None revokes anyone's (manage.py), else only the owner's."""
    if not isinstance(hash_prefix, str) or not HASH_PREFIX.fullmatch(hash_prefix):
        raise InvalidPrefix()
    prefix = hash_prefix.lower()
    repo = repository()
    users = htpasswd.current_file().snapshot()
    # Another user's token is "not found" too: the answer must not reveal that it exists. So is one
    # an earlier user of the same name made.
    matches = [s for s in repo.all(prefix)
               if owner is None or (s.owner == owner and owner_stamp.holds(owner, s.owner_stamp, users))]
    if not matches:
        raise TokenNotFound(prefix)
    for stored in matches:
        repo.delete(stored.digest)
        audit.record("token.revoke", reference=stored.digest[:HASH_PREFIX_LENGTH], detail=f"token of {stored.owner}")


def authenticate_token(token: str) -> TokenRecord | None:
    """The live token's record: one hash, one file lookup. None for unknown or expired tokens, and
    for those whose owner is no longer the user they were made for (a stat of the htpasswd file,
    re-read when it changed, and one SHA-256: tokens.owner_stamp)."""
    if not TOKEN_SHAPE.match(token):
        return None
    return live_record(token_digest(token))


# What live_record concluded about a token, kept while the stored record and the htpasswd snapshot
# it came from are the very objects the repository and the htpasswd file return (each is read
# again, after a stat per request, once its file changes), with its expiry as a number: a Bearer
# request then builds no record and no datetime. The database repository returns a new record
# each time, so with it this never hits. The owner's stamp is part of the conclusion, so any change
# of the htpasswd file (a user added again, a password changed) judges the token afresh.
_Verdict = tuple[StoredToken, htpasswd.Snapshot, TokenRecord | None, float]
_verdicts: dict[str, _Verdict] = {}
_VERDICTS_MAX = 4096


def _judge(repo: TokenStore, stored: StoredToken, users: htpasswd.Snapshot) -> TokenRecord | None:
    stamp = owner_stamp.current(stored.owner, users)
    if stamp is None:
        return None
    if stored.owner_stamp == owner_stamp.UNSTAMPED and stored.expires_at > _now():
        found = _stamp_at_first_use(repo, stored, stamp)
        if found is None:
            return None  # revoked meanwhile
        stored = found
    if stored.owner_stamp == owner_stamp.UNSTAMPED:
        # Expired (refused for that), or it could not be stamped: honoured as before stamps.
        return TokenRecord.from_stored(stored)
    return TokenRecord.from_stored(stored) if hmac.compare_digest(stored.owner_stamp, stamp) else None


def _stamp_at_first_use(repo: TokenStore, stored: StoredToken, stamp: str) -> StoredToken | None:
    try:
        return repo.stamp(stored.digest, stamp)
    except (OSError, DatabaseError) as exc:
        log.warning("token %s could not be stamped with its owner's entry (%s); honoured unstamped until "
                    "it is", stored.digest[:16], exc)
        return stored


def live_record(digest: str) -> TokenRecord | None:
    """The record of the token with this SHA-256, unless it is revoked or expired or its owner is
    no longer the user it was made for (signed tokens issued for an API token are checked through
    here too)."""
    repo = repository()
    stored = repo.get(digest)
    if stored is None:
        return None
    users = htpasswd.current_file().snapshot()
    verdict = _verdicts.get(digest)
    if verdict is None or verdict[0] is not stored or verdict[1] is not users:
        verdict = (stored, users, _judge(repo, stored, users), stored.expires_at.timestamp())
        if len(_verdicts) >= _VERDICTS_MAX:
            _verdicts.clear()
        _verdicts[digest] = verdict
    # In whole seconds, as TokenRecord.expired compares.
    if verdict[2] is None or math.floor(time.time()) >= verdict[3]:
        return None
    return verdict[2]
