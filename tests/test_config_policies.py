"""[[retention]], [[immutable]] and [[quota]] rules: typed keys with defaults, and a bad rule (an
invalid glob or regular expression, an unknown unit, a negative number, a clashing name) stops
start-up with one line naming the rule and the key."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from registry.policies.globs import glob_regex, parse_size
from registry.policies.rules import Policies
from regsite import config

ROOT = Path(__file__).resolve().parents[1]

GOOD = '''
[[retention]]
repositories = "team/*"
keep_last = 10
keep_tags = ["^v[0-9]+\\\\.[0-9]+\\\\.[0-9]+$", "^latest$"]
pulled_within_days = 30
untagged_after_hours = 72

[[immutable]]
repositories = "prod/*"
tags = ["^v.*"]

[[quota]]
name = "team"
repositories = "team/**"
max_bytes = "50GiB"
'''


def _load(tmp_path: Path, text: str, **env: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return config.load({"SVC_CONFIG": str(path), **env})


def _refused(tmp_path: Path, text: str, **env: str) -> str:
    with pytest.raises(config.ConfigError) as caught:
        _load(tmp_path, text, **env)
    return str(caught.value)


def test_it_reads_the_rules_of_the_issue_with_defaults_filled_in(tmp_path) -> None:
    cfg = _load(tmp_path, GOOD)
    assert cfg["retention"] == [{"name": "", "repositories": "team/*", "keep_last": 10,
                                 "keep_tags": ["^v[0-9]+\\.[0-9]+\\.[0-9]+$", "^latest$"],
                                 "pulled_within_days": 30, "untagged_after_hours": 72}]
    assert cfg["immutable"] == [{"name": "", "repositories": "prod/*", "tags": ["^v.*"]}]
    assert cfg["quota"] == [{"name": "team", "repositories": "team/**", "max_bytes": "50GiB"}]
    policies = Policies.from_config(cfg["retention"], cfg["immutable"], cfg["quota"])
    assert policies.quotas[0].max_bytes == 50 * 1024**3
    assert policies.retention_for("team/app").keep_last == 10
    assert policies.retention_for("team/app/debug") is None  # * stays within one component
    assert policies.quota_for("team/app/debug").name == "team"  # ** does not
    assert policies.immutable_for("prod/app").covers("v1") == "^v.*"
    assert policies.immutable_for("prod/app").covers("latest") is None
    minimal = _load(tmp_path, '[[retention]]\nrepositories = "a/*"\n')["retention"][0]
    assert (minimal["keep_last"], minimal["pulled_within_days"], minimal["untagged_after_hours"]) == (0, 0, 24)


def test_the_first_matching_rule_of_a_kind_applies(tmp_path) -> None:
    cfg = _load(tmp_path, '[[quota]]\nrepositories = "team/special"\nmax_bytes = "1MiB"\n'
                          '[[quota]]\nrepositories = "team/*"\nmax_bytes = "1GiB"\n')
    policies = Policies.from_config([], [], cfg["quota"])
    assert policies.quota_for("team/special").max_bytes == 1024**2
    assert policies.quota_for("team/other").max_bytes == 1024**3
    assert policies.quota_for("other/app") is None


@pytest.mark.parametrize("text, message", [
    ('[[retention]]\nrepositories = "team/["\nkeep_last = 1\n',
     '[[retention]] #1 "team/[" repositories: invalid glob \'team/[\': unclosed ['),
    ('[[retention]]\nrepositories = "Team/*"\n', '[[retention]] #1 "Team/*" repositories: invalid glob'),
    ('[[retention]]\nrepositories = ""\n', "[[retention]] #1 repositories: invalid glob '': empty glob"),
    ('[[retention]]\nrepositories = "team/*"\nkeep_tags = ["^v(1"]\n',
     '[[retention]] #1 "team/*" keep_tags: invalid regular expression \'^v(1\''),
    ('[[retention]]\nrepositories = "team/*"\nkeep_last = -1\n',
     '[[retention]] #1 "team/*" keep_last: must not be negative, got -1'),
    ('[[retention]]\nrepositories = "team/*"\npulled_within_days = -30\n',
     '[[retention]] #1 "team/*" pulled_within_days: must not be negative'),
    ('[[retention]]\nrepositories = "team/*"\nuntagged_after_hours = -72\n',
     '[[retention]] #1 "team/*" untagged_after_hours: must not be negative, got -72'),
    ('[[retention]]\nrepositories = "team/*"\nkeep_last = "ten"\n',
     '[[retention]] #1 "team/*" keep_last: expected an integer'),
    ('[[retention]]\nkeep_last = 3\n', "[[retention]] #1 repositories: required"),
    ('[[retention]]\nrepositories = "a/*"\n[[retention]]\nrepositories = "a/*"\n',
     '[[retention]] #2 "a/*" name: \'a/*\' already names [[retention]] #1'),
    ('[[immutable]]\nrepositories = "prod/*"\ntags = ["[v"]\n',
     '[[immutable]] #1 "prod/*" tags: invalid regular expression \'[v\''),
    ('[[immutable]]\nrepositories = "prod/*"\ntags = []\n', '[[immutable]] #1 "prod/*" tags: at least one'),
    ('[[immutable]]\nrepositories = "prod/*"\n', '[[immutable]] #1 "prod/*" tags: required'),
    ('[[immutable]]\nrepositories = "prod/**]"\ntags = ["^v"]\n',
     '[[immutable]] #1 "prod/**]" repositories: invalid glob'),
    ('[[quota]]\nrepositories = "team/*"\nmax_bytes = "50GB5"\n',
     '[[quota]] #1 "team/*" max_bytes: expected a size such as "50GiB"'),
    ('[[quota]]\nrepositories = "team/*"\nmax_bytes = "50 gigs"\n',
     '[[quota]] #1 "team/*" max_bytes: unknown unit \'gigs\''),
    ('[[quota]]\nrepositories = "team/*"\nmax_bytes = "-5GiB"\n',
     '[[quota]] #1 "team/*" max_bytes: must not be negative'),
    ('[[quota]]\nrepositories = "team/*"\nmax_bytes = "0"\n',
     '[[quota]] #1 "team/*" max_bytes: expected at least 1 byte'),
    ('[[quota]]\nrepositories = "team/*"\nmax_bytes = 1024\n', '[[quota]] #1 "team/*" max_bytes: expected a string'),
    ('[[quota]]\nname = "q"\nrepositories = "a/*"\nmax_bytes = "1MB"\n'
     '[[quota]]\nname = "q"\nrepositories = "b/*"\nmax_bytes = "1MB"\n', '[[quota]] #2 "q" name: \'q\' already names'),
])
def test_it_refuses_a_bad_rule_naming_it_and_the_key(tmp_path, text, message) -> None:
    assert _refused(tmp_path, text).startswith(message)


def test_the_environment_sets_a_key_of_a_rule_and_is_checked_too(tmp_path) -> None:
    text = '[[quota]]\nrepositories = "team/*"\nmax_bytes = "1GiB"\n'
    assert _load(tmp_path, text, SVC_QUOTA_0_MAX_BYTES="2GiB")["quota"][0]["max_bytes"] == "2GiB"
    assert _refused(tmp_path, text, SVC_QUOTA_0_MAX_BYTES="2 GiBs").startswith(
        '[[quota]] #1 "team/*" max_bytes: unknown unit')


@pytest.mark.parametrize("glob, matches, misses", [
    ("team/*", ["team/app", "team/a.b-c_d"], ["team", "team/app/x", "teams/app", "xteam/app"]),
    ("team/**", ["team/app", "team/app/x/y"], ["team", "other/team/app"]),
    ("**", ["a", "a/b/c"], []),
    ("team/app-?", ["team/app-1"], ["team/app-10", "team/app-/"]),
    ("team/[ab]*", ["team/a", "team/bx"], ["team/c"]),
    ("team/[!ab]*", ["team/c"], ["team/a"]),
    ("a.b/*", ["a.b/c"], ["axb/c"]),
    ("team[!x]app", ["team-app"], ["team/app"]),  # a set, like ?, stays within one component
])
def test_globs_match_whole_names(glob, matches, misses) -> None:
    import re

    pattern = re.compile(glob_regex(glob))
    assert all(pattern.match(name) for name in matches)
    assert not any(pattern.match(name) for name in misses)


@pytest.mark.parametrize("glob", ["team/", "/team", "team//app", "team/***", "team/[a/b]"])
def test_globs_with_an_empty_component_a_triple_star_or_a_slash_in_a_set_are_refused(glob) -> None:
    with pytest.raises(ValueError):
        glob_regex(glob)


@pytest.mark.parametrize("text, size", [("50GiB", 50 * 1024**3), ("1.5 KiB", 1536), ("500MB", 500 * 10**6),
                                        ("1048576", 1048576), ("2TB", 2 * 10**12), ("7 B", 7)])
def test_sizes_take_decimal_and_binary_units(text, size) -> None:
    assert parse_size(text) == size


def _start(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "bad.toml").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    env.update({"SVC_CONFIG": str(tmp_path / "bad.toml"), "SVC_STORAGE_ROOT": str(tmp_path / "registry"),
                "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
                "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "tokens")})
    code = "from regsite import config; config.load_or_exit(); print('ok')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("text, line", [
    ('[[retention]]\nrepositories = "team/*"\nkeep_tags = ["(unclosed"]\n',
     'configuration error: [[retention]] #1 "team/*" keep_tags: invalid regular expression \'(unclosed\': '
     'missing ), unterminated subpattern at position 0\n'),
    ('[[immutable]]\nrepositories = "prod/[a"\ntags = ["^v"]\n',
     'configuration error: [[immutable]] #1 "prod/[a" repositories: invalid glob \'prod/[a\': unclosed [ at '
     'position 6\n'),
    ('[[quota]]\nrepositories = "team/*"\nmax_bytes = "50GiG"\n',
     'configuration error: [[quota]] #1 "team/*" max_bytes: unknown unit \'GiG\' in \'50GiG\' (one of B, kB, '
     'KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)\n'),
])
def test_start_up_stops_with_one_line_and_exit_code_2(tmp_path, text, line) -> None:
    result = _start(tmp_path, text)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line)
