"""Users of an identity source outside the htpasswd file: LDAP (tokens.directory) and OpenID Connect
(ops.ui.oidc).

Such a user has no entry for an API token to be stamped with (tokens.owner_stamp), so the registry
keeps a row per external user (tokens.models.ExternalUser): the source, the groups it gave at their
last sign-in and when, and whether an admin disabled them. Their tokens carry the stamp
``external:<source>`` and hold only while no htpasswd user of the same name exists (local accounts
win) and the user is not disabled: ``manage.py disableuser`` cuts every token of theirs at once (within a
second on every worker).

A token outlives the sign-in it was made after, so the groups it acts with are the ones last
given, for ``[oidc] groups_max_age_hours`` at most: past that the token is limited to the rules
that name its owner alone, until the owner signs in again and the source says their groups anew.
"""
from __future__ import annotations

import json
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from tokens import owner_stamp, queries

STAMP_PREFIX = owner_stamp.EXTERNAL_PREFIX
NONE: frozenset[str] = frozenset()


def stamp(source: str) -> str:
    return STAMP_PREFIX + source


def is_stamp(value: str) -> bool:
    return value.startswith(STAMP_PREFIX)


def signed_in(username: str, source: str, groups: frozenset[str]) -> bool:
    """Note a sign-in and the groups the source gave; False (and nothing noted) for a disabled user."""
    found = queries.external_user(username)
    if found is not None and found[2]:
        return False
    queries.save_external_sign_in(username, source, json.dumps(sorted(groups)), timezone.now())
    _looked.pop(username, None)
    return True


# Every request of an external user asks whether they are disabled: the answer is kept a second per
# process (as the groups file is looked at once a second), so a pull storm is not a query storm and
# disableuser still takes effect on every worker within a second.
LOOK_SECONDS = 1.0
_Row = queries.ExternalRow | None
_looked: dict[str, tuple[float, _Row]] = {}


def _row(username: str) -> _Row:
    now = time.monotonic()
    found = _looked.get(username)
    if found is not None and found[0] > now:
        return found[1]
    row = queries.external_user(username)
    if len(_looked) >= 4096:
        _looked.clear()
    _looked[username] = (now + LOOK_SECONDS, row)
    return row


def disabled(username: str) -> bool:
    row = _row(username)
    return row is not None and row[2]


def token_groups(username: str) -> frozenset[str] | None:
    """The groups an external user's tokens act with; None when the user is unknown or disabled
    (their tokens are refused)."""
    found = _row(username)
    if found is None or found[2]:
        return None
    if timezone.now() - found[1] > timedelta(hours=settings.OIDC["groups_max_age_hours"]):
        return NONE
    groups = json.loads(found[0])
    return frozenset(str(group) for group in groups) if isinstance(groups, list) else NONE


def set_disabled(username: str, value: bool) -> bool:
    """Disable (or enable again) an external user; False when no such user ever signed in."""
    _looked.pop(username, None)
    return queries.set_external_user_disabled(username, value)


def known(username: str) -> str | None:
    """The source of an external user who may hold tokens now; None otherwise."""
    return queries.enabled_external_user_source(username)
