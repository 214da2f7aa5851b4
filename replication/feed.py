"""Event items: what a push or a delete gives each push policy with ``trigger = "event"`` to do.

Called by the event outbox (notifications.outbox) inside the transaction of the change, so an item
exists exactly when the change does (a rolled-back push leaves none, a registry killed after the
commit still has it) and items are numbered in the order the changes committed: the runner takes
them in that order per tag. Nothing is asked of the database when no policy wants the change.
"""
from __future__ import annotations

from typing import Any, Sequence

from django.conf import settings
from django.utils import timezone

from replication import queries
from replication.policies import COSIGN_TAG, Policy

_policies: tuple[object, list[Policy]] | None = None


def configured() -> list[Policy]:
    """The [[replication]] policies of the current settings (built once per settings list)."""
    global _policies
    entries: Any = settings.REPLICATION
    if _policies is None or _policies[0] is not entries:
        _policies = (entries, [Policy.of(entry) for entry in entries])
    return _policies[1]


def find(name: str) -> Policy | None:
    return next((policy for policy in configured() if policy.name == name), None)


def _listening(repository: str) -> list[Policy]:
    if not settings.REPLICATION:
        return []
    return [policy for policy in configured()
            if policy.direction == "push" and policy.trigger == "event" and policy.covers(repository)]


def travels(policy: Policy, tag: str) -> bool:
    """Whether the policy replicates ``tag``: its filter says so, or it is a cosign signature,
    attestation or SBOM tag, which goes with its subject when the policy carries referrers."""
    return policy.wants_tag(tag) or (policy.referrers and COSIGN_TAG.fullmatch(tag) is not None)


def manifest_pushed(repository: str, digest: str, tags: Sequence[str], subject: str = "") -> None:
    """A manifest PUT: an item per tag a policy wants; a referrer (``subject``) pushed without a
    tag is an item of its own for the policies that carry referrers. Other untagged manifests (an
    index's platform images) travel with the tag that holds them."""
    items = []
    for policy in _listening(repository):
        items += [queries.NewItem(policy.name, "copy", repository, tag, digest) for tag in tags if travels(policy, tag)]
        if not tags and subject and policy.referrers:
            items.append(queries.NewItem(policy.name, "copy", repository, "", digest))
    if items:
        queries.add_items(items, timezone.now())


def tags_deleted(repository: str, tags: Sequence[str]) -> None:
    items = [queries.NewItem(policy.name, "delete", repository, tag)
             for policy in _listening(repository) if policy.deletes for tag in tags if travels(policy, tag)]
    if items:
        queries.add_items(items, timezone.now())


def manifest_deleted(repository: str, digest: str) -> None:
    """A delete by digest (which removes every tag on it) is one by digest at the destination."""
    items = [queries.NewItem(policy.name, "delete", repository, "", digest)
             for policy in _listening(repository) if policy.deletes]
    if items:
        queries.add_items(items, timezone.now())
