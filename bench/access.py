"""``--access-rules``: the auth workloads' server (manifest-basic, manifest-bearer) with access rules as
a registry of many teams has them: RULES ``[[access]]`` entries naming users and groups over as many
namespaces (some narrowed by a more specific glob, a few with ``**``), GROUPS groups of 20 users in a
groups file, ``default_role = "none"``. The bench user is in three of the groups; the bench repository
(bench/manifest) is governed by one entry among them, which names one of its groups. Every request then
asks the whole decision (groups, the governing glob, the role) that the seed's configuration skips.
"""
from __future__ import annotations

from pathlib import Path

RULES = 200
GROUPS = 50
USERS_PER_GROUP = 20


def groups_text(user: str, groups: int = GROUPS) -> str:
    lines = []
    for g in range(groups):
        members = [f"user-{(g * 7 + i) % 400}" for i in range(USERS_PER_GROUP)]
        if g in (3, 17, 41):
            members.append(user)
        lines.append(f"group-{g}: {' '.join(members)}")
    return "\n".join(lines) + "\n"


def config_toml(groups_file: Path, rules: int = RULES, groups: int = GROUPS) -> str:
    entries = []
    for n in range(rules - 1):
        if n % 10 == 9:
            glob = f"team-{n // 10}/secret/*"  # narrows team-<n // 10>/*
        elif n % 25 == 24:
            glob = f"org-{n}/**"
        else:
            glob = f"team-{n}/*"
        entries.append(f'[[access]]\nrepositories = ["{glob}"]\nusers = ["user-{n % 400}"]\n'
                       f'groups = ["group-{n % groups}", "group-{(n + 11) % groups}"]\nrole = "write"\n')
    entries.append('[[access]]\nrepositories = ["bench/*"]\ngroups = ["group-17"]\nrole = "write"\n')
    return f'[auth]\ndefault_role = "none"\ngroups_file = "{groups_file}"\n\n' + "\n".join(entries)


def configure(workdir: Path, user: str) -> str:
    """Write the groups file into ``workdir``; the config.toml text that uses it."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "groups"
    path.write_text(groups_text(user))
    return config_toml(path)
