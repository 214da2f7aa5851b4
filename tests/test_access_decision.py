"""The one access decision (tokens.authz): roles by rule, group, default, admin, token and robot."""
from __future__ import annotations

import pytest

from registry.visibility import EVERYTHING
from tests.support.access import teams  # noqa: F401  (fixture)
from tests.support.auth import auth_on, auth_paths  # noqa: F401  (fixtures)
from tokens import authz
from tokens.access import Action, Role
from tokens.principal import ANONYMOUS, Mechanism, Principal, user
from tokens.rules import RulesInvalid, build, specificity

pytestmark = pytest.mark.django_db


def _token(owner: str, role: str, repositories: tuple[str, ...] | None = None) -> Principal:
    return Principal(owner, Mechanism.BASIC_TOKEN, Role(role), "0123456789abcdef", repositories)


def _robot(role: str, *repositories: str) -> Principal:
    return Principal("robot$ci", Mechanism.ROBOT, Role(role), None, repositories)


@pytest.mark.parametrize("who, repository, role", [
    ("alice", "team-a/app", "write"),
    ("bob", "team-a/app", "write"),
    ("carol", "team-a/app", "read"),
    ("carol", "team-b/app", "write"),
    ("alice", "team-b/app", None),
    ("dave", "team-a/app", None),
    ("dave", "elsewhere/app", None),  # default_role = "none"
    ("bob", "team-a/secret/keys", "admin"),
    ("alice", "team-a/secret/keys", None),  # the more specific rule narrows team-a/*
    ("carol", "team-a/secret/keys", None),
    ("dave", "public/base", "read"),  # anonymous read: every signed-in principal may as much
    ("alice", "public/base", "admin"),
    ("erin", "team-b/app", "admin"),  # [auth] admins
    ("erin", "anything/at/all", "admin"),
])
def test_it_gives_each_user_the_role_the_governing_rules_give(teams, who: str, repository: str,
                                                               role: str | None) -> None:
    assert authz.role_on(user(who), repository)[0] == (Role(role) if role else None)


def test_a_refused_write_names_the_glob_and_the_role(teams) -> None:
    decision = authz.decide(user("carol"), "team-a/app", Action.PUSH)
    assert not decision.allowed
    assert decision.message == "carol has role read on team-a/*; push needs write"
    assert authz.decide(user("bob"), "team-a/app", Action.DELETE).message == \
        "bob has role write on team-a/*; delete needs admin"
    assert authz.decide(user("dave"), "elsewhere/app", Action.PULL).message == \
        "dave has role none on elsewhere/app ([auth] default_role); pull needs read"


def test_a_token_gets_the_least_of_its_role_its_repositories_and_its_owners_role(teams) -> None:
    assert authz.role_on(_token("alice", "admin"), "team-a/app")[0] is Role.WRITE  # the owner's
    assert authz.role_on(_token("alice", "read"), "team-a/app")[0] is Role.READ  # its own
    limited = _token("alice", "write", ("team-a/app",))
    assert authz.role_on(limited, "team-a/app")[0] is Role.WRITE
    assert authz.role_on(limited, "team-a/other")[0] is None
    assert authz.role_on(limited, "public/base")[0] is Role.READ  # what anonymous may, anyone may
    assert authz.decide(limited, "team-b/app", Action.PUSH).message == (
        "token 0123456789abcdef has role none on team-b/app (outside its repositories team-a/app); push needs write")


def test_a_robot_has_its_own_scope_whatever_the_rules(teams) -> None:
    robot = _robot("write", "team-b/*")
    assert authz.role_on(robot, "team-b/app")[0] is Role.WRITE
    assert authz.role_on(robot, "team-a/app")[0] is None
    assert authz.role_on(robot, "public/base")[0] is Role.READ


def test_anonymous_callers_read_only_where_a_rule_says(teams) -> None:
    assert authz.decide(ANONYMOUS, "public/base", Action.PULL).allowed
    assert not authz.decide(ANONYMOUS, "public/base", Action.PUSH).allowed
    assert not authz.decide(ANONYMOUS, "team-a/app", Action.PULL).allowed
    assert authz.decide(ANONYMOUS, None, Action.PULL).allowed  # the catalog, of what it may read


def test_without_rules_every_user_is_an_admin_and_tokens_keep_their_role(auth_on) -> None:
    assert authz.role_on(user("alice"), "any/thing")[0] is Role.ADMIN
    assert authz.role_on(_token("alice", "read"), "any/thing")[0] is Role.READ
    assert not authz.decide(ANONYMOUS, "any/thing", Action.PULL).allowed
    assert not authz.decide(ANONYMOUS, None, Action.PULL).allowed
    assert authz.visible(user("alice")) is EVERYTHING
    assert authz.is_admin(user("alice"))
    assert authz.decide(_token("alice", "read"), "any/thing", Action.PUSH).message == \
        "token 0123456789abcdef has role read; push needs write"


def test_only_named_admins_are_admins_once_rules_exist(teams) -> None:
    assert authz.is_admin(user("erin"))
    assert not authz.is_admin(user("alice"))
    assert not authz.is_admin(_token("erin", "admin"))  # a token is no admin: it cannot manage robots


def test_groups_in_admins_make_their_members_admins(teams, settings) -> None:
    settings.AUTH_ADMINS = ["@team-b"]
    assert authz.is_admin(user("carol")) and authz.role_on(user("carol"), "team-a/secret/x")[0] is Role.ADMIN


def test_the_answer_is_kept_for_the_request(teams, monkeypatch) -> None:
    principal = user("alice")
    assert authz.role_on(principal, "team-a/app")[0] is Role.WRITE
    teams.set_groups("team-a: bob\n")
    assert authz.role_on(principal, "team-a/app")[0] is Role.WRITE  # the same request
    assert authz.role_on(user("alice"), "team-a/app")[0] is None  # the next one


@pytest.mark.parametrize("who", ["alice", "carol", "dave", "erin"])
def test_what_listings_show_is_what_the_decision_lets_read(teams, who: str) -> None:
    names = ["team-a/app", "team-a/secret/keys", "team-a/deep/er", "team-b/app", "public/base", "other/app",
             "team-ab/app"]
    principal = user(who)
    visible = authz.visible(principal)
    assert [name for name in names if visible.allows(name)] == \
        [name for name in names if authz.allows(user(who), name, Action.PULL)]


def test_specificity_counts_literal_characters() -> None:
    assert specificity("team-a/*") == 7
    assert specificity("team-a/secret/*") == 14
    assert specificity("**") == 0
    assert specificity("team-[ab]/app?") == 9


def test_the_most_specific_glob_governs_and_globs_as_specific_govern_together() -> None:
    rules = build([{"repositories": ["team/*"], "users": ["a"], "role": "read"},
                   {"repositories": ["*/app"], "users": ["b"], "role": "write"},
                   {"repositories": ["team/*"], "users": ["b"], "role": "read"}], "none", [])
    governing = rules.governing("team/app")  # "team/*" has 5 literal characters, "*/app" 4
    assert governing.glob == "team/*"
    assert governing.role_of("b", frozenset()) is Role.READ
    tied = build([{"repositories": ["team/*"], "users": ["a"], "role": "read"},
                  {"repositories": ["*/apps"], "users": ["a"], "role": "write"}], "none", [])
    assert tied.governing("team/apps").glob == "team/* | */apps"
    assert tied.governing("team/apps").role_of("a", frozenset()) is Role.WRITE


def test_every_mistake_is_named_with_its_entry_and_key() -> None:
    with pytest.raises(RulesInvalid) as caught:
        build([{"repositories": [], "users": ["carol"], "role": "owner"},
               {"repositories": ["team/[a"], "anonymous": "write"},
               {"repositories": ["ok/*"], "groups": ["team a"], "role": "read"}], "root", ["@"])
    assert str(caught.value).splitlines() == [
        "[[access]] #1 repositories: empty: name at least one glob such as \"team-a/*\"",
        "[[access]] #1 role: unknown role 'owner': expected one of read, write, admin",
        '[[access]] #2 "team/[a" repositories: invalid glob \'team/[a\': unclosed [ at position 6',
        "[[access]] #2 \"team/[a\" anonymous: unknown role 'write': expected one of read",
        "[[access]] #3 \"ok/*\" groups: 'team a' is not a group name (letters, digits, . _ -)",
        "[auth] default_role: unknown role 'root': expected one of admin, write, read, none",
        "[auth] admins: '@' is not @ and a group name",
    ]
