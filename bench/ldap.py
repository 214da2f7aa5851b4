"""``--ldap``: the auth workloads' server with ``[ldap]`` against a throwaway slapd (tests/support/slapd.py).

The directory holds one person, USER, in the bench's groups (group-17 governs bench/* under
``--access-rules``). The manifest-ldap workload sends Basic credentials as USER on one side and as
the htpasswd user on the other, to the same server, A B B A: issue 24 wants the LDAP figure within
10% of the htpasswd one (a bind per user per ``cache_seconds`` and worker, then the cache).
"""
from __future__ import annotations

import base64
from pathlib import Path

from tests.support.slapd import GROUPS, PEOPLE, Slapd, start_slapd  # noqa: F401  (GROUPS, PEOPLE: bench.ldap_cpu)

USER = "bench-ldap"
PASSWORD = "bench-ldap-password"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
MEMBERS = {"group-3": [USER], "group-17": [USER], "group-41": [USER]}  # as bench/access.py's user


def start(workdir: Path) -> Slapd:
    print("  starting slapd for --ldap", flush=True)
    return start_slapd(workdir, {USER: PASSWORD}, MEMBERS)


def config_toml(server: Slapd) -> str:
    """The ``[ldap]`` table for ``server``: binds by DN template, groups by group search, defaults else."""
    return (f'[ldap]\nurl = "{server.url}"\nuser_dn_template = "uid={{username}},{PEOPLE}"\n'
            f'group_search_base = "{GROUPS}"\n')
