"""Where groups come from: the groups file (Apache AuthGroupFile), re-read when it changes, failing
closed when unreadable; and other identity sources plugged in beside it, which the decision sees
only as more groups."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.access import teams  # noqa: F401  (fixture)
from tests.support.auth import auth_on, auth_paths  # noqa: F401  (fixtures)
from tokens import authz, groups
from tokens.access import Role
from tokens.principal import user


def test_it_parses_apache_group_files() -> None:
    parsed = groups.parse("# comment\nteam-a: alice bob\n\nteam-a: carol\nops:\nnot a group line\nteam b: x\n")
    assert parsed == {"team-a": frozenset({"alice", "bob", "carol"}), "ops": frozenset()}


def test_it_reads_the_file_again_within_a_second_of_a_change(tmp_path: Path) -> None:
    import time

    path = tmp_path / "groups"
    path.write_text("team-a: alice\n")
    watched = groups.GroupsFile(path)
    assert watched.groups_of("alice") == {"team-a"}
    staged = tmp_path / "groups.new"
    staged.write_text("team-b: alice\nteam-c: alice\n")
    staged.replace(path)
    changed = time.monotonic()
    while watched.groups_of("alice") == {"team-a"}:  # looked at no more than once a second
        assert time.monotonic() - changed < groups.STAT_SECONDS + 0.5
        time.sleep(0.05)
    assert watched.groups_of("alice") == {"team-b", "team-c"}


def test_an_unreadable_file_puts_nobody_in_any_group(tmp_path: Path, caplog) -> None:
    watched = groups.GroupsFile(tmp_path / "missing")
    assert watched.groups_of("alice") == frozenset()
    assert "groups file" in caplog.text and "nobody is in any group" in caplog.text


@pytest.mark.django_db
def test_another_identity_source_adds_groups_the_decision_uses(teams) -> None:
    def directory(username: str) -> frozenset[str]:  # what an LDAP or OIDC source would give
        return frozenset({"team-b"}) if username == "dave" else frozenset()

    assert authz.role_on(user("dave"), "team-b/app")[0] is None
    groups.register(directory)
    try:
        assert authz.role_on(user("dave"), "team-b/app")[0] is Role.WRITE
        assert authz.role_on(user("alice"), "team-b/app")[0] is None
    finally:
        groups.unregister(directory)
    assert authz.role_on(user("dave"), "team-b/app")[0] is None


@pytest.mark.django_db
def test_groups_an_identity_gave_at_sign_in_count_too(teams) -> None:
    from tokens.principal import Mechanism, Principal

    signed_in = Principal("dave", Mechanism.BASIC_USER, Role.ADMIN, groups=frozenset({"team-a"}))
    assert authz.role_on(signed_in, "team-a/app")[0] is Role.WRITE
