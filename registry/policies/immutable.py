"""Immutable tags: once pushed, a tag an ``[[immutable]]`` rule names never points elsewhere and is
never deleted (pushing the same digest again is fine: pushes are retried and repeated).

Moving is refused inside the manifest PUT's transaction: an immutable tag is created with INSERT
... ON CONFLICT DO NOTHING and then read back, so of two pushes racing to create it with different
digests one wins and the other is refused, on SQLite and PostgreSQL alike (an upsert would let the
second overwrite the first).
"""
from __future__ import annotations

from django.utils import timezone

from registry import queries as q
from registry.policies.rules import ImmutableRule, current
from registry.services.exceptions import ImmutableTag


def _rule(rule: ImmutableRule) -> str:
    return f"{rule.title} (tags {', '.join(rule.tags)})"


def _protected(rule: ImmutableRule, tag: str) -> str:
    return f"tag {tag!r} is immutable under {_rule(rule)}"


def guard(repository: q.RepositoryRow, manifest_id: int, tags: list[str]) -> list[str]:
    """Point the immutable ones of ``tags`` at the manifest, or refuse to move them; returns the
    others, for the ordinary upsert. Inside the PUT's transaction."""
    rule = current().immutable_for(repository.name)
    fixed = [tag for tag in tags if rule is not None and rule.covers(tag)]
    if not fixed:
        return tags
    assert rule is not None
    q.insert_tags_if_absent(repository.id, manifest_id, fixed, timezone.now())
    for tag, (target, digest) in sorted(q.tag_targets(repository.id, fixed).items()):
        if target != manifest_id:
            raise ImmutableTag(
                f"{_protected(rule, tag)} in {repository.name}: it points to {digest} and no push may "
                "move it; push under a new tag",
                {"tag": tag, "rule": rule.name, "digest": digest},
            )
    return [tag for tag in tags if tag not in fixed]


def check_delete(repository: q.RepositoryRow, tag: str | None = None, digest: str | None = None) -> None:
    """Refuse deleting an immutable tag, a manifest (by digest) that carries one, or a manifest an
    immutable tag's image needs (a platform image of an index). Inside the deleting transaction,
    with the digest locked (manifest PUTs lock what they reference)."""
    rule = current().immutable_for(repository.name)
    if rule is None:
        return
    if tag is not None and rule.covers(tag):
        raise ImmutableTag(f"{_protected(rule, tag)} in {repository.name}: it is never deleted",
                           {"tag": tag, "rule": rule.name})
    if digest is not None:
        for name in sorted(q.tags_of_digest(repository.id, digest)):
            if rule.covers(name):
                raise ImmutableTag(f"manifest {digest} carries tag {name!r} in {repository.name}, immutable under "
                                   f"{_rule(rule)}: it is never deleted",
                                   {"tag": name, "rule": rule.name, "digest": digest})
        _check_needed(rule, repository, "manifest", digest, q.tags_reaching(repository.id, digest, blob=False))


def check_blob_delete(repository: q.RepositoryRow, digest: str) -> None:
    """Refuse unlinking a blob (a config or a layer) that an immutable tag's image needs."""
    rule = current().immutable_for(repository.name)
    if rule is not None:
        _check_needed(rule, repository, "blob", digest, q.tags_reaching(repository.id, digest, blob=True))


def _check_needed(rule: ImmutableRule, repository: q.RepositoryRow, kind: str, digest: str, tags: list[str]) -> None:
    held = sorted(tag for tag in tags if rule.covers(tag))
    if held:
        raise ImmutableTag(f"{kind} {digest} is needed by tag {held[0]!r} of {repository.name}, immutable under "
                           f"{rule.title} (tags {', '.join(rule.tags)}): it is never deleted",
                           {"tag": held[0], "rule": rule.name, "digest": digest})


def check_repository_delete(repository: q.RepositoryRow) -> None:
    rule = current().immutable_for(repository.name)
    if rule is None:
        return
    held = [tag for tag in q.tag_names(repository.name, None, None) if rule.covers(tag)]
    if held:
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        raise ImmutableTag(f"repository {repository.name} holds immutable tags ({shown}) under {rule.title}: "
                           "it cannot be deleted while the rule covers them", {"rule": rule.name})


def applies(repository: str) -> bool:
    return current().immutable_for(repository) is not None


def immutable_tags(repository: str, tags: list[str]) -> set[str]:
    """Which of ``tags`` of ``repository`` are immutable (for pages)."""
    rule = current().immutable_for(repository)
    return {tag for tag in tags if rule is not None and rule.covers(tag)}
