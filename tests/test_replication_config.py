"""[[replication]] tables: checked at start-up with one line naming the entry and the key, and the
credentials never repeated in it; SVC_REPLICATION_<n>_USERNAME / _PASSWORD set them."""
from __future__ import annotations

from pathlib import Path

import pytest

from regsite import config


def load(tmp_path: Path, table: str, **env: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(table)
    return config.load({"SVC_CONFIG": str(path), **env})


BASE = '[[replication]]\nname = "dr"\nurl = "https://dr.example.org"\n'


def test_the_defaults_of_a_policy(tmp_path: Path) -> None:
    entry = load(tmp_path, BASE)["replication"][0]
    assert entry["direction"] == "push" and entry["trigger"] == "event" and entry["repositories"] == ["**"]
    assert entry["tags"] == [] and entry["referrers"] is True and entry["deletes"] is False
    assert entry["concurrency"] == 4 and entry["max_bytes_per_second"] == 0


def test_credentials_come_from_the_environment(tmp_path: Path) -> None:
    entry = load(tmp_path, BASE, SVC_REPLICATION_0_USERNAME="robot", SVC_REPLICATION_0_PASSWORD="pw")["replication"][0]
    assert (entry["username"], entry["password"]) == ("robot", "pw")


@pytest.mark.parametrize("extra, message", [
    ('direction = "sideways"', '[[replication]] #1 "dr" direction: expected one of push, pull'),
    ('trigger = "cron"', "trigger: expected one of event, schedule, manual"),
    ('direction = "pull"', "trigger: a pull policy runs on \"schedule\" or \"manual\""),
    ('repositories = ["Team/*"]', "repositories: invalid glob 'Team/*'"),
    ('tags = ["v[0-"]', "tags: invalid regular expression 'v[0-'"),
    ("concurrency = 0", "concurrency: expected 1 to 64, got 0"),
    ("max_bytes_per_second = -1", "max_bytes_per_second: must not be negative"),
    ("schedule_minutes = 0", "schedule_minutes: must be a positive integer"),
    ('destination_prefix = "Bad Prefix"', "destination_prefix: expected a repository name"),
    ('password = "hunter2"', "password: given without a username"),
])
def test_a_bad_entry_is_named_with_its_key(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(config.ConfigError) as raised:
        load(tmp_path, BASE + extra + "\n")
    assert message in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_credentials_in_the_url_are_refused_without_repeating_them(tmp_path: Path) -> None:
    with pytest.raises(config.ConfigError) as raised:
        load(tmp_path, '[[replication]]\nname = "dr"\nurl = "https://robot:hunter2@dr.example.org"\n')
    assert "credentials go in username and password" in str(raised.value) and "hunter2" not in str(raised.value)


def test_a_secret_of_the_wrong_type_is_not_shown(tmp_path: Path) -> None:
    with pytest.raises(config.ConfigError) as raised:
        load(tmp_path, BASE + "password = 12345678\n")
    assert "12345678" not in str(raised.value)


def test_names_are_unique(tmp_path: Path) -> None:
    with pytest.raises(config.ConfigError, match="#2 \"dr\" name: used by an earlier entry"):
        load(tmp_path, BASE + "\n" + BASE)
