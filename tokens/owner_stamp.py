"""What ties an API token to its owner: a stamp of the owner's htpasswd entry as it was when the
token was made, kept in the token's record.

A name alone is not an identity: a user removed from the htpasswd file and added again by editing
it (not through ``manage.py adduser``, which purges) would find the old user's tokens working
again, and a password changed because it leaked would leave working every token minted with it.
The entry (the bcrypt hash, salted afresh whenever a password is set) is what changes in both
cases, so a token is honoured only while its owner's entry is the one it was stamped with, as
Django ends a session when the user's password hash changes (``get_session_auth_hash``).

The stamp is a SHA-256 over the name and the entry, not keyed by the secret key: it never leaves
the server, and the entry's 128-bit salt makes it useless for guessing the password, while a key
would tie every API token to ``[server] secret_key_file`` (replacing it, or restoring a backup
without it, would revoke them all). Checking it is one SHA-256, no bcrypt.

Records made before stamps existed carry none (``UNSTAMPED``): such a token is stamped with its
owner's entry at its first successful use, or by the scheduled maintenance, whichever comes first.
"""
from __future__ import annotations

import hashlib
import hmac
import re

from tokens.htpasswd import Snapshot

UNSTAMPED = ""
EXTERNAL_PREFIX = "external:"  # tokens.external's stamps: no htpasswd entry stands behind them
STAMP = re.compile(r"^([0-9a-f]{64}|external:(ldap|oidc))$")  # external: tokens.external
_DOMAIN = b"svc-registry api token owner\x00"


def of(owner: str, entry: str) -> str:
    """The stamp of ``owner`` whose htpasswd entry (its bcrypt hash) is ``entry``: of the line
    ``owner:entry``, which is unambiguous (a name in the file cannot hold a colon)."""
    return hashlib.sha256(_DOMAIN + f"{owner}:{entry}".encode("utf-8", errors="surrogateescape")).hexdigest()


# The stamps of the users of one htpasswd snapshot, worked out as they are asked for: with the
# database token backend every request asks (nothing else of the verdict is kept between requests).
_known: tuple[Snapshot, dict[str, str]] = (Snapshot(stamp=None), {})


def current(owner: str, users: Snapshot) -> str | None:
    """The owner's stamp now; None when the owner is not in the htpasswd file."""
    global _known
    known = _known
    if known[0] is not users:
        known = _known = (users, {})
    found = known[1].get(owner)
    if found is None:
        entry = users.users.get(owner)
        if entry is None:
            return None
        found = known[1][owner] = of(owner, entry)
    return found


def holds(owner: str, stamp: str, users: Snapshot) -> bool:
    """Whether a record of ``owner`` stamped ``stamp`` still belongs to the user of that name: the
    owner is in the file, and with the entry it was stamped with (an unstamped record: either)."""
    if stamp.startswith(EXTERNAL_PREFIX):
        # An LDAP or OIDC user's (tokens.external): theirs while no local account takes the name.
        return owner not in users.users
    now = current(owner, users)
    if now is None:
        return False
    return stamp == UNSTAMPED or hmac.compare_digest(now, stamp)
