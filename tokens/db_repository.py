"""Database-backed token repository: the same interface as the file repository (tokens.repository),
for ``[auth] token_backend = "database"``, where every replica must see a token created or revoked
through any other on its next request. A lookup is one query by primary key (the token's SHA-256);
one user's tokens, one query on the owner index.

Counting the live tokens by role (for /metrics) is one query whose cost grows with the tokens
(9 ms for 10,000 on SQLite), so each process keeps its answer for ``COUNTS_SECONDS``, and forgets it
when it writes a token itself: a scrape costs the same with 10 or 10,000 tokens, and the gauge may
lag other replicas' changes by that long."""
from __future__ import annotations

import json
import time
from datetime import datetime

from tokens import queries
from tokens.access import Role
from tokens.repository import DIGEST, StoredToken


def _stored(row: queries.TokenRow) -> StoredToken:
    return StoredToken(row.digest, row.owner, Role(row.role), row.description, row.created_at, row.expires_at,
                       row.owner_stamp, tuple(json.loads(row.repositories)) if row.repositories else ())


COUNTS_SECONDS = 30.0


class DatabaseTokenRepository:
    def __init__(self) -> None:
        self._counts: tuple[float, datetime, dict[Role, int]] | None = None

    def ensure_directory(self) -> None:
        """Nothing to create: the table comes with the migrations."""

    def save(self, token: StoredToken) -> None:
        self._counts = None
        queries.save_token(queries.TokenRow(token.digest, token.owner, str(token.role), token.description,
                                            token.created_at, token.expires_at, token.owner_stamp,
                                            json.dumps(list(token.repositories)) if token.repositories else ""))

    def get(self, digest: str) -> StoredToken | None:
        if not DIGEST.match(digest):
            return None
        row = queries.token(digest)
        return _stored(row) if row is not None else None

    def delete(self, digest: str) -> bool:
        self._counts = None
        return queries.delete_token(digest)

    def stamp(self, digest: str, owner_stamp: str) -> StoredToken | None:
        queries.stamp_token(digest, owner_stamp)
        return self.get(digest)

    def all(self, prefix: str = "") -> list[StoredToken]:
        return [_stored(row) for row in queries.tokens(prefix)]

    def of_owner(self, owner: str) -> list[StoredToken]:
        return [_stored(row) for row in queries.tokens_of(owner)]

    def live_count_of(self, owner: str, now: datetime) -> int:
        return queries.live_token_count_of(owner, now)

    def live_counts(self, now: datetime) -> dict[Role, int]:
        cached = self._counts
        if cached is not None and time.monotonic() - cached[0] < COUNTS_SECONDS \
                and abs((now - cached[1]).total_seconds()) < COUNTS_SECONDS:
            return cached[2]
        found = queries.live_tokens_by_role(now)
        counts = {role: found.get(role.value, 0) for role in Role}
        self._counts = (time.monotonic(), now, counts)
        return counts

    def owners(self) -> set[str]:
        return queries.token_owners()

    def delete_expired(self, before: datetime) -> int:
        self._counts = None
        return queries.delete_tokens_expired_before(before)
