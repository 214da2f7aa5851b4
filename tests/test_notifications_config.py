"""[[notifications]] configuration: defaults, and a bad URL, event, glob or header stops start-up
with one line naming the entry and the key (never showing a secret)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from notifications.endpoints import BadGlob, compile_glob
from regsite import config

ROOT = Path(__file__).resolve().parents[1]
GOOD = '[[notifications]]\nname = "ci"\nurl = "https://ci.example.internal/hooks/registry"\n'


def _load(tmp_path: Path, text: str, **env: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return config.load({"SVC_CONFIG": str(path), **env})


def _refused(tmp_path: Path, text: str, **env: str) -> str:
    with pytest.raises(config.ConfigError) as caught:
        _load(tmp_path, text, **env)
    return str(caught.value)


def test_an_entry_gets_the_documented_defaults(tmp_path) -> None:
    (entry,) = _load(tmp_path, GOOD)["notifications"]
    assert entry == {"name": "ci", "url": "https://ci.example.internal/hooks/registry",
                     "events": ["push", "delete"], "repositories": "**", "headers": {}, "secret": "",
                     "timeout_seconds": 5, "max_age_hours": 72, "max_pending": 100000}


def test_the_issue_example_loads(tmp_path) -> None:
    (entry,) = _load(tmp_path, GOOD + 'events = ["push", "delete", "pull"]\nrepositories = "team/*"\n'
                     'headers = { Authorization = "Bearer abc" }\nsecret = "s3"\ntimeout_seconds = 5\n'
                     'max_age_hours = 24\n')["notifications"]
    assert (entry["events"], entry["repositories"], entry["max_age_hours"]) == (["push", "delete", "pull"],
                                                                               "team/*", 24)


def test_the_secret_can_come_from_the_environment(tmp_path) -> None:
    (entry,) = _load(tmp_path, GOOD, SVC_NOTIFICATIONS_0_SECRET="from-env")["notifications"]
    assert entry["secret"] == "from-env"


@pytest.mark.parametrize("extra, message", [
    ('url = "ftp://ci.example/x"\n', '[[notifications]] #1 "ci" url: expected an http:// or https:// URL'),
    ('url = "ci.example.internal/hooks"\n', '[[notifications]] #1 "ci" url: expected an http:// or https://'),
    ('url = "http://"\n', '[[notifications]] #1 "ci" url: expected an http:// or https:// URL with a host'),
    ('url = "http://ci:99999/"\n', '[[notifications]] #1 "ci" url: expected an http:// or https:// URL'),
    ('url = "http://ci/a b"\n', '[[notifications]] #1 "ci" url: expected an http:// or https:// URL without'),
    ('events = ["push", "tag"]\n', '''[[notifications]] #1 "ci" events: unknown event 'tag': expected push, '''),
    ('events = []\n', '[[notifications]] #1 "ci" events: expected at least one of push, delete, pull'),
    ('events = "push"\n', '[[notifications]] #1 "ci" events: expected a list of strings'),
    ('repositories = "team/[ab"\n', '''[[notifications]] #1 "ci" repositories: invalid glob 'team/[ab': unclosed ['''),
    ('repositories = "Team/*"\n', '''[[notifications]] #1 "ci" repositories: invalid glob 'Team/*': 'T' cannot'''),
    ('repositories = "team/***"\n', '[[notifications]] #1 "ci" repositories: invalid glob'),
    ('repositories = ""\n', '[[notifications]] #1 "ci" repositories: invalid glob'),
    ('repositories = "/team"\n', '[[notifications]] #1 "ci" repositories: invalid glob'),
    ('headers = { "Bad Name" = "x" }\n', '''[[notifications]] #1 "ci" headers: 'Bad Name' is not a valid header'''),
    ('headers = { Content-Type = "text/plain" }\n', '[[notifications]] #1 "ci" headers: Content-Type is set by'),
    ('timeout_seconds = 0\n', '[[notifications]] #1 "ci" timeout_seconds: expected 1 to 300, got 0'),
    ('max_age_hours = 0\n', '[[notifications]] #1 "ci" max_age_hours: must be a positive integer'),
    ('max_pending = 0\n', '[[notifications]] #1 "ci" max_pending: must be a positive integer'),
    ('colour = "red"\n', '[[notifications]] #1 "ci" colour: unknown key'),
])
def test_a_bad_entry_is_refused_naming_the_entry_and_key(tmp_path, extra, message) -> None:
    text = GOOD.replace('url = "https://ci.example.internal/hooks/registry"\n', "") if "url =" in extra else GOOD
    assert _refused(tmp_path, text + extra).startswith(message)


def test_names_are_required_and_unique(tmp_path) -> None:
    assert _refused(tmp_path, '[[notifications]]\nurl = "http://a/"\n') == "[[notifications]] #1 name: required"
    assert _refused(tmp_path, GOOD + GOOD).startswith('[[notifications]] #2 "ci" name: used by an earlier entry')
    assert _refused(tmp_path, GOOD.replace('"ci"', '"c i"')).startswith('[[notifications]] #1 "c i" name: expected')


@pytest.mark.parametrize("extra", [
    'headers = { Authorization = "Bearer top-secret-value\\n" }\n',
    'headers = { Authorization = 12345678 }\n',
    "secret = 12345678\n",
])
def test_an_error_never_shows_a_header_value_or_the_secret(tmp_path, extra) -> None:
    message = _refused(tmp_path, GOOD + extra)
    assert message.startswith('[[notifications]] #1 "ci" ')
    assert "top-secret-value" not in message and "12345678" not in message


def test_credentials_in_the_url_are_refused_without_showing_them(tmp_path) -> None:
    message = _refused(tmp_path, GOOD.replace("https://", "https://ci:hunter2@"))
    assert message.startswith('[[notifications]] #1 "ci" url: credentials in the URL') and "hunter2" not in message


@pytest.mark.parametrize("glob, matching, not_matching", [
    ("**", ["app", "team/app", "a/b/c"], []),
    ("team/*", ["team/app", "team/x-y"], ["team", "team/a/b", "other/app", "teamx/app"]),
    ("team/**", ["team/app", "team/a/b"], ["team", "other/team/app"]),
    ("*/app", ["team/app", "x/app"], ["app", "a/b/app"]),
    ("app-?", ["app-1", "app-b"], ["app-", "app-12", "app-/"]),
    ("app-[0-9]", ["app-3"], ["app-a"]),
    ("app-[!0-9]", ["app-a"], ["app-3"]),
    ("team.x/app", ["team.x/app"], ["teamyx/app"]),
])
def test_globs_match_repository_names(glob, matching, not_matching) -> None:
    pattern = compile_glob(glob)
    assert all(pattern.fullmatch(name) for name in matching)
    assert not any(pattern.fullmatch(name) for name in not_matching)


@pytest.mark.parametrize("glob", ["", "[", "a[]", "***", "a//b", "team/", "A", "a b", "a\\b", "[a/b]"])
def test_bad_globs_are_refused(glob) -> None:
    with pytest.raises(BadGlob):
        compile_glob(glob)


def _gunicorn(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "config.toml").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    env.update({"SVC_CONFIG": str(tmp_path / "config.toml"), "SVC_SERVER_BIND": "127.0.0.1:0",
                "SVC_STORAGE_ROOT": str(tmp_path / "registry"),
                "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
                "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "tokens"),
                "SVC_SERVER_SECRET_KEY_FILE": str(tmp_path / "key")})
    gunicorn = Path(sys.executable).parent / "gunicorn"
    return subprocess.run([str(gunicorn), "-c", str(ROOT / "gunicorn.conf.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("extra, needle", [
    ('url = "htp://ci.example/x"\n', '[[notifications]] #1 "ci" url: expected an http:// or https:// URL'),
    ('events = ["push", "pushed"]\n', '''[[notifications]] #1 "ci" events: unknown event 'pushed\''''),
    ('repositories = "team/[a-"\n', '''[[notifications]] #1 "ci" repositories: invalid glob 'team/[a-\''''),
])
def test_gunicorn_stops_with_one_line_on_a_bad_entry(tmp_path, extra, needle) -> None:
    text = GOOD.replace('url = "https://ci.example.internal/hooks/registry"\n', "") if "url =" in extra else GOOD
    result = _gunicorn(tmp_path, text + extra)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("configuration error: ") and needle in result.stderr
