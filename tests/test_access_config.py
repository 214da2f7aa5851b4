"""[[access]] and the [auth] keys around it: read from the file and the environment, checked at
start-up with one line per mistake naming the rule and the key; groups no source defines are warnings."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from regsite import access_config, config
from tests.support.access import TOML

ROOT = Path(__file__).resolve().parent.parent


def _load(tmp_path: Path, text: str, **env: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return config.load({"SVC_CONFIG": str(path), **env})


def _start(tmp_path: Path, text: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "bad.toml").write_text(text)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    clean.update({"SVC_CONFIG": str(tmp_path / "bad.toml"), "SVC_STORAGE_ROOT": str(tmp_path / "registry"),
                  "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
                  "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "tokens"), **env})
    code = "from regsite import config; config.load_or_exit(); print('ok')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True,
                          timeout=60)


def test_it_reads_the_rules_and_the_auth_keys(tmp_path) -> None:
    cfg = _load(tmp_path, TOML)
    assert cfg["auth"]["default_role"] == "none" and cfg["auth"]["admins"] == ["erin"]
    assert cfg["access"][0] == {"repositories": ["team-a/*"], "users": [], "groups": ["team-a"], "role": "write",
                                "anonymous": ""}
    assert cfg["access"][4]["anonymous"] == "read"


def test_the_defaults_change_nothing(tmp_path) -> None:
    cfg = _load(tmp_path, "")
    assert (cfg["auth"]["default_role"], cfg["auth"]["groups_file"], cfg["auth"]["admins"], cfg["access"]) == \
        ("admin", "", [], [])
    assert cfg["audit"]["retention_days"] == 90


def test_the_environment_overrides_the_auth_keys(tmp_path) -> None:
    cfg = _load(tmp_path, TOML, SVC_AUTH_DEFAULT_ROLE="read", SVC_AUTH_GROUPS_FILE="/etc/registry/groups",
                SVC_AUTH_ADMINS="alice, @platform", SVC_AUDIT_RETENTION_DAYS="30")
    assert cfg["auth"]["default_role"] == "read"
    assert cfg["auth"]["groups_file"] == "/etc/registry/groups"
    assert cfg["auth"]["admins"] == ["alice", "@platform"]
    assert cfg["audit"]["retention_days"] == 30


def test_a_relative_groups_file_is_relative_to_the_project_and_empty_stays_unset() -> None:
    cfg = config.resolve_paths(config.load({"SVC_AUTH_GROUPS_FILE": "groups"}))
    assert cfg["auth"]["groups_file"] == str(config.BASE_DIR / "groups")
    assert config.resolve_paths(config.load({}))["auth"]["groups_file"] == ""


@pytest.mark.parametrize("text, lines", [
    ('[[access]]\nrepositories = ["team-a/*"]\nusers = ["carol"]\nrole = "owner"\n',
     ['[[access]] #1 "team-a/*" role: unknown role \'owner\': expected one of read, write, admin']),
    ('[[access]]\nrepositories = []\ngroups = ["team-a"]\nrole = "read"\n',
     ['[[access]] #1 repositories: empty: name at least one glob such as "team-a/*"']),
    ('[[access]]\nrepositories = ["team-a/*"]\ngroup = ["team-a"]\nrole = "read"\n',
     ['[[access]] #1 "team-a/*" group: unknown key in {path}']),
    ('[[access]]\nusers = ["carol"]\nrole = "read"\n', ['[[access]] #1 repositories: required']),
    ('[[access]]\nrepositories = ["team-a/*"]\nusers = ["carol"]\n',
     ['[[access]] #1 "team-a/*" role: required when users or groups are named: read, write or admin']),
    ('[[access]]\nrepositories = ["public/*"]\nanonymous = "write"\n',
     ['[[access]] #1 "public/*" anonymous: unknown role \'write\': expected one of read']),
    ('[auth]\ndefault_role = "guest"\n',
     ["[auth] default_role: unknown role 'guest': expected one of admin, write, read, none"]),
    # Every mistake of the table, one line each: not only the first.
    ('[[access]]\nrepositories = ["a/*"]\nrole = "owner"\nusers = ["x"]\n\n'
     '[[access]]\nrepositories = ["b/[x"]\ngroups = ["g"]\nrole = "read"\n',
     ['[[access]] #1 "a/*" role: unknown role \'owner\': expected one of read, write, admin',
      '[[access]] #2 "b/[x" repositories: invalid glob \'b/[x\': unclosed [ at position 3']),
    ('[[access]]\nrepositories = ["a/*"]\nowner = "x"\nrole = 3\n',
     ['[[access]] #1 "a/*" owner: unknown key in {path}', '[[access]] #1 "a/*" role: expected a string, got 3']),
])
def test_a_bad_rule_stops_start_up_with_one_line_per_mistake(tmp_path, text: str, lines: list[str]) -> None:
    result = _start(tmp_path, text)
    expected = "".join(f"configuration error: {line.format(path=tmp_path / 'bad.toml')}\n" for line in lines)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", expected)


def test_a_bad_admin_from_the_environment_is_named(tmp_path) -> None:
    result = _start(tmp_path, "", SVC_AUTH_ADMINS="alice,@")
    assert result.stderr == "configuration error: [auth] admins: '@' is not @ and a group name\n"


def test_groups_that_the_groups_file_does_not_define_are_warnings(tmp_path) -> None:
    groups = tmp_path / "groups"
    groups.write_text("team-a: alice bob\n")
    cfg = _load(tmp_path, TOML, SVC_AUTH_GROUPS_FILE=str(groups))
    assert access_config.undefined_groups(cfg) == [
        f'[[access]] #3 "team-b/*" groups: group \'team-b\' is not defined in {groups}: nobody is in it']
    assert _start(tmp_path, TOML, SVC_AUTH_GROUPS_FILE=str(groups)).stdout == "ok\n"  # it starts


def test_groups_named_without_a_groups_file_are_warnings(tmp_path) -> None:
    warnings = access_config.undefined_groups(_load(tmp_path, TOML))
    assert warnings[0] == ('[[access]] #1 "team-a/*", [[access]] #5 "public/*" groups: group \'team-a\' is named '
                           "but no [auth] groups_file is configured: nobody is in it")
    assert len(warnings) == 2


@pytest.mark.django_db
def test_readiness_checks_the_groups_file_when_one_is_configured(client, settings, tmp_path) -> None:
    from tests.support.auth import write_htpasswd

    settings.AUTH_ENABLED = True
    settings.AUTH_HTPASSWD_FILE = write_htpasswd(tmp_path / "users", {"alice": "wonderland"})
    settings.AUTH_TOKEN_STORAGE = tmp_path / "tokens"
    settings.AUTH_GROUPS_FILE = str(tmp_path / "groups")
    (tmp_path / "groups").write_text("team-a: alice\n")
    assert client.get("/ready").json()["checks"]["groups"] == "ok"
    (tmp_path / "groups").unlink()
    body = client.get("/ready").json()
    assert body["failing"] == ["groups"] and body["checks"]["groups"] == "groups file is not readable"
