"""manage.py createtoken, listtokens, revoketoken and adduser, called as Django calls them."""
from __future__ import annotations

import io
import json
import re

import bcrypt
import pytest
from django.core.management import CommandError, call_command

from tests.support.auth import auth_paths  # noqa: F401  (fixture)
from tokens import htpasswd, services


def run(*args: str, stdin: io.StringIO | None = None) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    extra = {"stdin": stdin} if stdin is not None else {}
    call_command(*args, stdout=out, stderr=err, **extra)
    return out.getvalue(), err.getvalue()


def test_it_prints_a_new_token_once_on_stdout(auth_paths) -> None:
    out, err = run("createtoken", "--username", "alice", "--role", "write", "--ttl-days", "7",
                   "--description", "ci runner")
    token = out.strip()
    assert re.fullmatch(r"svc_[A-Za-z0-9_-]{43}", token)
    record = services.authenticate_token(token)
    assert (record.owner, record.role, record.description) == ("alice", "write", "ci runner")
    assert record.hash_prefix in err and "not shown again" in err
    assert token not in err


@pytest.mark.parametrize("role,said", [("read", "a read"), ("write", "a write"), ("admin", "an admin")])
def test_it_says_which_role_it_made_in_english(auth_paths, role: str, said: str) -> None:
    _, err = run("createtoken", "--username", "alice", "--role", role)
    assert err.startswith(f"Created {said} token for alice,"), err


@pytest.mark.parametrize(("args", "message"), [
    (("--role", "owner"), "role must be one of read, write, admin"),
    (("--ttl-days", "0"), "ttl_days must be between 1 and 3650"),
    (("--ttl-days", "3651"), "ttl_days must be between 1 and 3650"),
    (("--ttl-days", "soon"), "invalid int value"),
    (("--description", "x" * 257), "description must be at most 256"),
])
def test_it_refuses_bad_token_options(auth_paths, args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("createtoken", "--username", "alice", *args)
    assert services.list_tokens() == []


def test_it_requires_a_username(auth_paths) -> None:
    with pytest.raises(CommandError, match="--username"):
        run("createtoken")


def test_it_lists_tokens_as_a_table_and_as_json(auth_paths) -> None:
    first = services.create_token("alice", "admin", description="deploy")
    services.create_token("bob", "read")
    out, _ = run("listtokens")
    lines = out.splitlines()
    assert lines[0].split() == ["HASH_PREFIX", "OWNER", "ROLE", "CREATED", "EXPIRES", "STATE", "DESCRIPTION"]
    assert len(lines) == 3
    assert first.hash_prefix in out and "deploy" in out and "active" in out
    assert first.token not in out
    mine, _ = run("listtokens", "--username", "alice", "--json")
    assert [t["hash_prefix"] for t in json.loads(mine)["tokens"]] == [first.hash_prefix]


def test_it_says_when_there_are_no_tokens(auth_paths) -> None:
    out, err = run("listtokens")
    assert out == "" and "No tokens" in err


def test_it_revokes_by_prefix(auth_paths) -> None:
    created = services.create_token("bob", "write")
    out, _ = run("revoketoken", created.hash_prefix)
    assert created.hash_prefix in out
    assert services.authenticate_token(created.token) is None


@pytest.mark.parametrize(("prefix", "message"), [
    ("xyz", "16 hexadecimal characters"),
    ("0123456789abcdef", "no token with hash_prefix 0123456789abcdef"),
])
def test_it_refuses_bad_or_unknown_prefixes(auth_paths, prefix: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("revoketoken", prefix)


def test_it_adds_a_user_from_stdin(auth_paths) -> None:
    out, _ = run("adduser", "carol", "--password-stdin", "--cost", "4", stdin=io.StringIO("tea-party\n"))
    assert "Added user carol" in out
    assert htpasswd.check_password("carol", "tea-party")
    assert htpasswd.check_password("alice", "wonderland")


def test_it_changes_an_existing_users_password(auth_paths) -> None:
    out, _ = run("adduser", "alice", "--password-stdin", "--cost", "4", stdin=io.StringIO("rabbit-hole"))
    assert "Changed the password of alice" in out
    assert not htpasswd.check_password("alice", "wonderland")
    assert htpasswd.check_password("alice", "rabbit-hole")
    assert auth_paths.htpasswd_file.read_text().count("alice:") == 1


def test_it_creates_the_file_named_by_file(auth_paths, tmp_path) -> None:
    target = tmp_path / "new" / "users.htpasswd"
    run("adduser", "dan", "--password-stdin", "--cost", "4", "--file", str(target), stdin=io.StringIO("pw\n"))
    username, hashed = target.read_text().strip().split(":", 1)
    assert username == "dan" and bcrypt.checkpw(b"pw", hashed.encode())


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_it_prompts_twice_on_a_terminal(auth_paths, monkeypatch) -> None:
    answers = iter(["queen-of-hearts", "queen-of-hearts"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    run("adduser", "erin", "--cost", "4", stdin=Terminal())
    assert htpasswd.check_password("erin", "queen-of-hearts")


def test_it_refuses_mismatched_prompts(auth_paths, monkeypatch) -> None:
    answers = iter(["one", "two"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    with pytest.raises(CommandError, match="do not match"):
        run("adduser", "erin", "--cost", "4", stdin=Terminal())


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (("erin",), io.StringIO("pw"), "use --password-stdin"),
    (("erin", "--password-stdin"), io.StringIO(""), "no password on standard input"),
    (("bad:name", "--password-stdin"), io.StringIO("pw"), "without ':'"),
    (("erin", "--password-stdin", "--cost", "3"), io.StringIO("pw"), "--cost"),
    (("erin", "--password-stdin"), io.StringIO("x" * 73), "72 bytes"),
])
def test_it_refuses_to_add_a_user_without_a_usable_password(auth_paths, args, stdin, message) -> None:
    before = auth_paths.htpasswd_file.read_text()
    with pytest.raises(CommandError, match=message):
        run("adduser", *args, stdin=stdin)
    assert auth_paths.htpasswd_file.read_text() == before


def test_createtoken_refuses_a_user_that_is_not_in_the_htpasswd_file(auth_paths) -> None:
    with pytest.raises(CommandError, match="no user 'nosuchuser' in .*users.htpasswd"):
        call_command("createtoken", "--username", "nosuchuser", stdout=io.StringIO(), stderr=io.StringIO())


@pytest.mark.parametrize("command", ["createtoken", "listtokens", "revoketoken", "adduser", "copytokens"])
def test_the_commands_say_how_they_find_the_configuration(command, capsys) -> None:
    with pytest.raises(SystemExit):
        call_command(command, "--help")
    assert "resolves relative paths" in " ".join(capsys.readouterr().out.split())
