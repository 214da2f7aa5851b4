"""Configuration: defaults < TOML file < SVC_* environment; a bad value stops start-up in one line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from regsite import config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def toml(tmp_path: Path):
    def write(text: str) -> dict[str, str]:
        path = tmp_path / "config.toml"
        path.write_text(text)
        return {"SVC_CONFIG": str(path)}

    return write


def test_it_uses_the_defaults_without_a_file_or_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = config.load({})
    assert cfg == config.defaults()
    assert cfg["registry"]["delete_enabled"] is True
    assert cfg["registry"]["max_manifest_bytes"] == 4 * 1024 * 1024
    assert cfg["storage"]["root"] == "data/registry"
    assert cfg["database"]["url"] == "sqlite:///data/db.sqlite3"
    assert cfg["auth"]["enabled"] is False


def test_it_reads_config_toml_from_the_project_directory_wherever_it_runs(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(config, "BASE_DIR", tmp_path / "project")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "config.toml").write_text("[server]\nworkers = 7\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert config.load({})["server"]["workers"] == 7


def test_it_resolves_relative_paths_against_the_project_directory(tmp_path) -> None:
    cfg = config.resolve_paths({table: dict(keys) for table, keys in config.DEFAULTS.items()}, tmp_path)
    assert cfg["storage"]["root"] == str(tmp_path / "data/registry")
    assert cfg["auth"]["htpasswd_file"] == str(tmp_path / "users.htpasswd")
    assert cfg["auth"]["token_storage"] == str(tmp_path / "data/tokens")
    assert cfg["server"]["secret_key_file"] == str(tmp_path / "data/secret_key")
    assert cfg["database"]["url"] == f"sqlite:///{tmp_path}/data/db.sqlite3"
    absolute = config.resolve_paths({**cfg, "storage": {**cfg["storage"], "root": "/srv/registry"}}, tmp_path)
    assert absolute["storage"]["root"] == "/srv/registry"


def test_it_reads_the_file_named_by_svc_config(toml) -> None:
    env = toml('[server]\nbind = "127.0.0.1:5000"\n[registry]\ndelete_enabled = false\nupload_expiry_hours = 2\n')
    cfg = config.load(env)
    assert cfg["server"]["bind"] == "127.0.0.1:5000"
    assert cfg["registry"]["delete_enabled"] is False
    assert cfg["registry"]["upload_expiry_hours"] == 2
    assert cfg["server"]["workers"] == config.DEFAULTS["server"]["workers"]


def test_it_lets_the_environment_win_over_the_file(toml) -> None:
    env = toml("[server]\nworkers = 3\n[registry]\ndelete_enabled = true\n")
    cfg = config.load({**env, "SVC_SERVER_WORKERS": "9", "SVC_REGISTRY_DELETE_ENABLED": "false",
                       "SVC_STORAGE_ROOT": "/srv/registry", "SVC_AUTH_ENABLED": "yes"})
    assert cfg["server"]["workers"] == 9
    assert cfg["registry"]["delete_enabled"] is False
    assert cfg["storage"]["root"] == "/srv/registry"
    assert cfg["auth"]["enabled"] is True


@pytest.mark.parametrize("raw, expected", [("1", True), ("TRUE", True), ("on", True), ("0", False),
                                           ("False", False), ("off", False), ("", False)])
def test_it_parses_booleans_from_the_environment(tmp_path, monkeypatch, raw, expected) -> None:
    monkeypatch.chdir(tmp_path)
    assert config.load({"SVC_AUTH_ENABLED": raw})["auth"]["enabled"] is expected


def test_it_ignores_environment_variables_that_are_not_keys(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert config.load({"SVC_SECRET_KEY": "x", "OTHER": "y"}) == config.defaults()


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[nope]\nkey = 1\n", "[nope]"),
        ("[server]\nworker = 2\n", "[server] worker: unknown key"),
        ('[server]\nworkers = "four"\n', "[server] workers: expected an integer"),
        ("[server]\nworkers = true\n", "[server] workers: expected an integer"),
        ('[registry]\ndelete_enabled = "yes"\n', "[registry] delete_enabled: expected true or false"),
        ("[storage]\nroot = 5\n", "[storage] root: expected a string"),
        ("[registry]\nmax_manifest_bytes = 0\n", "[registry] max_manifest_bytes: must be a positive integer"),
        ('[server]\nlog_level = "loud"\n', "[server] log_level"),
        ('[database]\nurl = "mysql://x/y"\n', "[database] url"),
        ("server = 1\n", "[server]: expected a table"),
        ("[server\n", "cannot read configuration file"),
    ],
)
def test_it_refuses_a_bad_file_naming_the_key(toml, text, needle) -> None:
    with pytest.raises(config.ConfigError) as error:
        config.load(toml(text))
    assert needle in str(error.value)


@pytest.mark.parametrize(
    "name, value, needle",
    [
        ("SVC_SERVER_WORKERS", "many", "SVC_SERVER_WORKERS: expected an integer"),
        ("SVC_AUTH_ENABLED", "maybe", "SVC_AUTH_ENABLED: expected true or false"),
        ("SVC_SERVER_THREADS", "-1", "[server] threads: must be a positive integer"),
    ],
)
def test_it_refuses_a_bad_environment_value_naming_the_variable(tmp_path, monkeypatch, name, value, needle) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(config.ConfigError) as error:
        config.load({name: value})
    assert needle in str(error.value)


def test_it_refuses_a_missing_file_named_by_svc_config(tmp_path) -> None:
    with pytest.raises(config.ConfigError, match="SVC_CONFIG"):
        config.load({"SVC_CONFIG": str(tmp_path / "absent.toml")})


def _start(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    (tmp_path / "empty.toml").write_text("")
    base.update({
        "SVC_CONFIG": str(tmp_path / "empty.toml"),
        "SVC_STORAGE_ROOT": str(tmp_path / "registry"),
        "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "tokens"),
        **env,
    })
    code = "from regsite import config; config.load_or_exit(); print('ok')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=base, capture_output=True, text=True,
                          timeout=60)


def test_it_starts_with_a_good_configuration(tmp_path) -> None:
    result = _start(tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok\n", "")
    assert (tmp_path / "registry").is_dir()


def _assert_stopped(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("configuration error: ")
    assert needle in result.stderr


def test_it_stops_with_exit_code_2_on_an_unknown_key(tmp_path) -> None:
    (tmp_path / "bad.toml").write_text("[registry]\ndelete_enable = false\n")
    _assert_stopped(_start(tmp_path, SVC_CONFIG=str(tmp_path / "bad.toml")), "[registry] delete_enable: unknown key")


def test_it_stops_with_exit_code_2_on_a_wrong_type(tmp_path) -> None:
    _assert_stopped(_start(tmp_path, SVC_REGISTRY_MAX_MANIFEST_BYTES="big"),
                    "SVC_REGISTRY_MAX_MANIFEST_BYTES: expected an integer, got 'big'")


def test_it_stops_with_exit_code_2_on_an_unusable_storage_root(tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    _assert_stopped(_start(tmp_path, SVC_STORAGE_ROOT=str(blocker / "registry")), "[storage] root: cannot create")


@pytest.mark.parametrize("bind", ["nonsense", "4000", "host:", ":4000", "0.0.0.0:99999", "a b:4000", "unix:"])
def test_it_refuses_a_bind_address_gunicorn_cannot_use(tmp_path, monkeypatch, bind) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(config.ConfigError, match="^\\[server\\] bind: expected host:port"):
        config.load({"SVC_SERVER_BIND": bind})


@pytest.mark.parametrize("bind", ["0.0.0.0:4000", "127.0.0.1:1", "[::1]:4000", "[::]:80", "registry:4000",
                                  "unix:/run/registry.sock"])
def test_it_takes_the_bind_addresses_gunicorn_takes(tmp_path, monkeypatch, bind) -> None:
    monkeypatch.chdir(tmp_path)
    assert config.load({"SVC_SERVER_BIND": bind})["server"]["bind"] == bind


def test_gunicorn_stops_at_once_on_a_nonsense_bind(tmp_path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    base.update({"SVC_SERVER_BIND": "nonsense", "SVC_STORAGE_ROOT": str(tmp_path / "registry"),
                 "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
                 "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "tokens"),
                 "SVC_SERVER_SECRET_KEY_FILE": str(tmp_path / "key")})
    gunicorn = Path(sys.executable).parent / "gunicorn"
    result = subprocess.run([str(gunicorn), "-c", str(ROOT / "gunicorn.conf.py")], cwd=ROOT, env=base,
                            capture_output=True, text=True, timeout=30)
    _assert_stopped(result, "[server] bind: expected host:port")
