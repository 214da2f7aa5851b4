"""Database-backed token repository: the same interface as the file repository (tokens.repository),
for ``[auth] token_backend = "database"``, where every replica must see a token created or revoked
through any other on its next request. A lookup is one query by primary key (the token's SHA-256)."""
from __future__ import annotations

from typing import Any

from tokens.access import Role
from tokens.models import Token
from tokens.repository import DIGEST, StoredToken

_FIELDS = ("digest", "owner", "role", "description", "created_at", "expires_at")


class DatabaseTokenRepository:
    def ensure_directory(self) -> None:
        """Nothing to create: the table comes with the migrations."""

    def save(self, token: StoredToken) -> None:
        Token.objects.update_or_create(digest=token.digest, defaults={
            "owner": token.owner, "role": str(token.role), "description": token.description,
            "created_at": token.created_at, "expires_at": token.expires_at})

    def get(self, digest: str) -> StoredToken | None:
        if not DIGEST.match(digest):
            return None
        row = Token.objects.filter(digest=digest).values_list(*_FIELDS).first()
        return _stored(row) if row is not None else None

    def delete(self, digest: str) -> bool:
        deleted, _ = Token.objects.filter(digest=digest).delete()
        return bool(deleted)

    def all(self, prefix: str = "") -> list[StoredToken]:
        rows = Token.objects.filter(digest__startswith=prefix) if prefix else Token.objects.all()
        return [_stored(row) for row in rows.order_by("created_at", "digest").values_list(*_FIELDS)]


def _stored(row: tuple[Any, ...]) -> StoredToken:
    digest, owner, role, description, created_at, expires_at = row
    return StoredToken(digest, owner, Role(role), description, created_at, expires_at)
