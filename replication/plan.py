"""What a scheduled or manual run of a policy covers: one item per tag, found a page at a time.

A push run walks this registry's repositories that the policy's globs hold and their tags; a pull
run the remote's (its catalog, or the names the globs spell out when none has a wildcard: Docker
Hub, for one, lists no catalog). Either way the tags are those the policy's regexes (and, with
referrers on, cosign's signature tags) select. Nothing is held whole: a registry of many thousands
of tags is walked, and its items written, in pages.
"""
from __future__ import annotations

from typing import Iterator

from registry import queries as local
from replication import queries
from replication.feed import travels
from replication.policies import Policy
from replication.remote import Remote

PAGE = 500


def items(policy: Policy, remote: Remote) -> Iterator[queries.NewItem]:
    if policy.direction == "push":
        yield from _local(policy)
    else:
        yield from _remote(policy, remote)


def _local(policy: Policy) -> Iterator[queries.NewItem]:
    after = ""
    while True:
        names = local.catalog_names(after or None, PAGE)
        for name in names:
            if policy.covers(name):
                yield from _local_tags(policy, name)
        if len(names) < PAGE:
            return
        after = names[-1]


def _local_tags(policy: Policy, name: str) -> Iterator[queries.NewItem]:
    repository = local.find_repository(name)
    if repository is None:
        return
    after = ""
    while True:
        page = queries.tag_page(repository.id, after, PAGE)
        for tag, digest in page:
            if travels(policy, tag):
                yield queries.NewItem(policy.name, "copy", name, tag, digest)
        if len(page) < PAGE:
            return
        after = page[-1][0]


def _remote(policy: Policy, remote: Remote) -> Iterator[queries.NewItem]:
    listed = policy.listed_names()
    names = iter(listed) if listed is not None else (name for name in remote.catalog() if policy.covers(name))
    for name in names:
        for tag in remote.tags(name):
            if travels(policy, tag):
                yield queries.NewItem(policy.name, "copy", name, tag, "")
