"""The bounds on a listing's page are configuration keys: the referrers list's page (descriptors,
annotation bytes per page and per descriptor) in [registry], the UI's manifest page in [ui]. Each is
read from the file and the environment, and a value that is not a positive integer stops start-up
in one line naming the key."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from regsite import config

ROOT = Path(__file__).resolve().parents[1]
KEYS = [
    ("registry", "referrers_per_page", 100),
    ("registry", "referrers_page_annotation_bytes", 1024 * 1024),
    ("registry", "referrer_annotation_bytes", 64 * 1024),
    ("ui", "manifest_entries_per_page", 100),
    ("ui", "manifest_json_bytes", 256 * 1024),
]


def _env(table: str, key: str) -> str:
    return f"SVC_{table.upper()}_{key.upper()}"


@pytest.mark.parametrize("table, key, default", KEYS)
def test_it_has_a_default_and_takes_the_file_and_the_environment(tmp_path, table, key, default) -> None:
    (tmp_path / "empty.toml").write_text("")
    assert config.load({"SVC_CONFIG": str(tmp_path / "empty.toml")})[table][key] == default
    (tmp_path / "config.toml").write_text(f"[{table}]\n{key} = 7\n")
    env = {"SVC_CONFIG": str(tmp_path / "config.toml")}
    assert config.load(env)[table][key] == 7
    assert config.load({**env, _env(table, key): "9"})[table][key] == 9


@pytest.mark.parametrize("table, key, default", KEYS)
@pytest.mark.parametrize("value, needle", [("0", "must be a positive integer, got 0"),
                                           ("-4", "must be a positive integer, got -4"),
                                           ("many", "expected an integer, got 'many'")])
def test_it_refuses_a_value_that_is_not_a_positive_integer(tmp_path, table, key, default, value, needle) -> None:
    (tmp_path / "empty.toml").write_text("")
    with pytest.raises(config.ConfigError) as error:
        config.load({"SVC_CONFIG": str(tmp_path / "empty.toml"), _env(table, key): value})
    where = _env(table, key) if value == "many" else f"[{table}] {key}"
    assert str(error.value) == f"{where}: {needle}"


def test_a_bad_value_stops_start_up_in_one_line(tmp_path) -> None:
    (tmp_path / "bad.toml").write_text("[ui]\nmanifest_json_bytes = 0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    env.update({"SVC_CONFIG": str(tmp_path / "bad.toml"), "SVC_STORAGE_ROOT": str(tmp_path / "registry"),
                "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
                "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "tokens")})
    result = subprocess.run([sys.executable, "-c", "from regsite import config; config.load_or_exit()"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "configuration error: [ui] manifest_json_bytes: must be a positive integer, got 0\n"
