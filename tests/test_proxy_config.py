"""[[proxy]] tables: the keys and defaults, overrides from the environment (credentials), and a bad
entry stopping start-up with one line naming it and the key, never showing a password."""
from __future__ import annotations

from pathlib import Path

import pytest

from regsite import config

HUB = '[[proxy]]\nprefix = "hub"\nurl = "https://registry-1.docker.io"\nhost = "docker.io"\n'
X = '[[proxy]]\nprefix = "hub"\nurl = "https://x.io"\n'


def load(tmp_path: Path, text: str, **env: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return config.load({"SVC_CONFIG": str(path), **env})


def refused(tmp_path: Path, text: str, **env: str) -> str:
    with pytest.raises(config.ConfigError) as caught:
        load(tmp_path, text, **env)
    return str(caught.value)


def test_it_reads_several_caches_with_defaults(tmp_path) -> None:
    cfg = load(tmp_path, HUB + '[[proxy]]\nprefix = "mirrors/ghcr"\nurl = "https://ghcr.io"\ntag_ttl_seconds = 60\n')
    hub, ghcr = cfg["proxy"]
    assert hub == {"prefix": "hub", "url": "https://registry-1.docker.io", "host": "docker.io", "username": "",
                   "password": "", "tag_ttl_seconds": 300, "evict_after_days": 30, "timeout_seconds": 10,
                   "total_timeout_seconds": 30, "max_concurrent_fetches": 4, "negative_ttl_seconds": 30,
                   "realm_hosts": []}
    assert (ghcr["prefix"], ghcr["tag_ttl_seconds"], ghcr["host"]) == ("mirrors/ghcr", 60, "")


def test_none_by_default(tmp_path) -> None:
    assert load(tmp_path, "")["proxy"] == []


def test_credentials_come_from_the_environment(tmp_path) -> None:
    cfg = load(tmp_path, HUB, SVC_PROXY_0_USERNAME="me", SVC_PROXY_0_PASSWORD="s3cret")
    assert (cfg["proxy"][0]["username"], cfg["proxy"][0]["password"]) == ("me", "s3cret")


@pytest.mark.parametrize("text, message", [
    ('[[proxy]]\nurl = "https://x.io"\n', "[[proxy]] #1 prefix: required"),
    ('[[proxy]]\nprefix = "hub"\n', '[[proxy]] #1 "hub" url: required'),
    ('[[proxy]]\nprefix = "Hub"\nurl = "https://x.io"\n', '[[proxy]] #1 "Hub" prefix: expected a repository name'),
    ('[[proxy]]\nprefix = "hub/"\nurl = "https://x.io"\n', '[[proxy]] #1 "hub/" prefix: expected a repository name'),
    (HUB + '[[proxy]]\nprefix = "hub/library"\nurl = "https://x.io"\n',
     '[[proxy]] #2 "hub/library" prefix: overlaps the prefix \'hub\''),
    (HUB + '[[proxy]]\nprefix = "hub"\nurl = "https://x.io"\n', '[[proxy]] #2 "hub" prefix: overlaps'),
    ('[[proxy]]\nprefix = "hub"\nurl = "registry-1.docker.io"\n', '[[proxy]] #1 "hub" url: expected an http://'),
    ('[[proxy]]\nprefix = "hub"\nurl = "https://me:pw@x.io"\n', '[[proxy]] #1 "hub" url: credentials go in'),
    (HUB + '[[proxy]]\nprefix = "docker"\nurl = "https://x.io"\nhost = "docker.io"\n',
     '[[proxy]] #2 "docker" host: expected a registry host name used by no earlier entry'),
    (X + 'password = "pw"\n', '[[proxy]] #1 "hub" password: given without'),
    (X + 'tag_ttl_seconds = -1\n', 'tag_ttl_seconds: must not be negative'),
    (X + 'evict_after_days = -3\n', 'evict_after_days: must not be negative'),
    (X + 'timeout_seconds = 0\n', 'timeout_seconds: must be a positive'),
    (X + 'total_timeout_seconds = 0\n', 'total_timeout_seconds: must be a positive'),
    (X + 'max_concurrent_fetches = 0\n', 'max_concurrent_fetches: must be a positive'),
    (X + 'negative_ttl_seconds = -1\n', 'negative_ttl_seconds: must not be negative'),
    (X + 'realm_hosts = "auth.docker.io"\n', 'realm_hosts: expected a list of strings'),
    (X + 'realm_hosts = ["https://auth.docker.io"]\n', 'realm_hosts: expected host names'),
    (X + 'realm_hosts = ["auth.docker.io/token"]\n', 'realm_hosts: expected host names'),
    (X + 'ttl = 5\n', '[[proxy]] #1 "hub" ttl: unknown key'),
])
def test_a_bad_entry_is_named_with_its_key(tmp_path, text, message) -> None:
    assert message in refused(tmp_path, text)


def test_realm_hosts_and_limits_are_read(tmp_path) -> None:
    cfg = load(tmp_path, X + 'realm_hosts = ["auth.docker.io", "http://auth.internal"]\nmax_concurrent_fetches = 3\n',
               SVC_PROXY_0_TOTAL_TIMEOUT_SECONDS="600")
    entry = cfg["proxy"][0]
    assert entry["realm_hosts"] == ["auth.docker.io", "http://auth.internal"]
    assert (entry["max_concurrent_fetches"], entry["total_timeout_seconds"]) == (3, 600)


def test_a_password_is_never_shown_in_an_error(tmp_path) -> None:
    message = refused(tmp_path, '[[proxy]]\nprefix = "hub"\nurl = "https://x.io"\nusername = "u"\npassword = 98765\n')
    assert message.startswith('[[proxy]] #1 "hub" password: expected a string') and "98765" not in message


@pytest.mark.parametrize("text, secret", [
    (X + 'username = 12345\npassword = "pw"\n', "12345"),
    ('[[proxy]]\nprefix = "hub"\nurl = "me:hunter2@x.io"\n', "hunter2"),
    ('[[proxy]]\nprefix = "hub"\nurl = "ftp://me:hunter2@x.io"\n', "hunter2"),
    ('[[proxy]]\nprefix = "hub"\nurl = "https://me:hunter2@x.io/?a=b"\n', "hunter2"),
])
def test_credentials_are_never_shown_in_an_error(tmp_path, text, secret) -> None:
    message = refused(tmp_path, text)
    assert message.startswith('[[proxy]] #1 "hub" ') and secret not in message


def test_an_environment_override_of_a_missing_entry_shows_no_value(tmp_path) -> None:
    message = refused(tmp_path, HUB, SVC_PROXY_1_PASSWORD="hunter2")
    assert "SVC_PROXY_1_PASSWORD" in message and "hunter2" not in message


def test_the_server_stops_with_one_line(tmp_path, capsys) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[proxy]]\nprefix = "hub"\nurl = "ftp://x.io"\n')
    with pytest.raises(SystemExit) as stopped:
        config.load_or_exit({"SVC_CONFIG": str(path), "SVC_STORAGE_ROOT": str(tmp_path / "r"),
                             "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db'}",
                             "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "t")})
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and '[[proxy]] #1 "hub" url' in err
