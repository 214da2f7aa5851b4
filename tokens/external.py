"""Users of an identity source outside the htpasswd file: LDAP (tokens.directory) and OpenID Connect
(ops.ui.oidc).

Such a user has no entry for an API token to be stamped with (tokens.owner_stamp), so the registry
keeps a row per external user (tokens.models.ExternalUser): the source, the groups it gave at their
last sign-in and when, and whether an admin disabled them. Their tokens carry the stamp
``external:<source>`` and hold only while no htpasswd user of the same name exists (local accounts
win) and the user is not disabled: ``manage.py disableuser`` cuts every token of theirs at once.

A token outlives the sign-in it was made after, so the groups it acts with are the ones last
given, for ``[oidc] groups_max_age_hours`` at most: past that the token is limited to the rules
that name its owner alone, until the owner signs in again and the source says their groups anew.
"""
from __future__ import annotations

import json
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from tokens import owner_stamp
from tokens.models import ExternalUser

STAMP_PREFIX = owner_stamp.EXTERNAL_PREFIX
NONE: frozenset[str] = frozenset()


def stamp(source: str) -> str:
    return STAMP_PREFIX + source


def is_stamp(value: str) -> bool:
    return value.startswith(STAMP_PREFIX)


def signed_in(username: str, source: str, groups: frozenset[str]) -> bool:
    """Note a sign-in and the groups the source gave; False (and nothing noted) for a disabled user."""
    found = ExternalUser.objects.filter(username=username).first()
    if found is not None and found.disabled:
        return False
    ExternalUser.objects.update_or_create(username=username, defaults={
        "source": source, "groups": json.dumps(sorted(groups)), "groups_at": timezone.now()})
    return True


def disabled(username: str) -> bool:
    return ExternalUser.objects.filter(username=username, disabled=True).exists()


def token_groups(username: str) -> frozenset[str] | None:
    """The groups an external user's tokens act with; None when the user is unknown or disabled
    (their tokens are refused)."""
    found = ExternalUser.objects.filter(username=username).values_list("groups", "groups_at", "disabled").first()
    if found is None or found[2]:
        return None
    if timezone.now() - found[1] > timedelta(hours=settings.OIDC["groups_max_age_hours"]):
        return NONE
    groups = json.loads(found[0])
    return frozenset(str(group) for group in groups) if isinstance(groups, list) else NONE


def set_disabled(username: str, value: bool) -> bool:
    """Disable (or enable again) an external user; False when no such user ever signed in."""
    return ExternalUser.objects.filter(username=username).update(disabled=value) > 0


def known(username: str) -> str | None:
    """The source of an external user who may hold tokens now; None otherwise."""
    return ExternalUser.objects.filter(username=username, disabled=False).values_list("source", flat=True).first()
