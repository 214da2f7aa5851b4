"""Start-up checks for authentication: a readable htpasswd file and a private token directory."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from regsite import config


def environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "config.toml").write_text("")
    return {
        "SVC_CONFIG": str(tmp_path / "config.toml"),
        "SVC_STORAGE_ROOT": str(tmp_path / "registry"),
        "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "data" / "tokens"),
        "SVC_AUTH_HTPASSWD_FILE": str(tmp_path / "users.htpasswd"),
        **extra,
    }


def test_it_stops_the_server_with_one_line_naming_a_missing_htpasswd_file(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        config.load_or_exit(environ(tmp_path, SVC_AUTH_ENABLED="true"), serving=True)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"[auth] htpasswd_file: cannot read {tmp_path / 'users.htpasswd'}" in err


def test_it_stops_the_server_when_the_htpasswd_path_is_a_directory(tmp_path, capsys) -> None:
    (tmp_path / "users.htpasswd").mkdir()
    with pytest.raises(SystemExit):
        config.load_or_exit(environ(tmp_path, SVC_AUTH_ENABLED="true"), serving=True)
    assert "users.htpasswd" in capsys.readouterr().err


def test_it_needs_no_htpasswd_file_with_auth_off_or_for_manage_py(tmp_path) -> None:
    config.load_or_exit(environ(tmp_path), serving=True)
    config.load_or_exit(environ(tmp_path, SVC_AUTH_ENABLED="true"), serving=False)


def test_it_starts_with_a_readable_htpasswd_file(tmp_path) -> None:
    (tmp_path / "users.htpasswd").write_text("")
    cfg = config.load_or_exit(environ(tmp_path, SVC_AUTH_ENABLED="true"), serving=True)
    assert cfg["auth"]["enabled"] is True


def test_it_creates_the_token_directory_private(tmp_path) -> None:
    config.load_or_exit(environ(tmp_path))
    tokens = tmp_path / "data" / "tokens"
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o700


def test_it_tightens_an_existing_token_directory(tmp_path) -> None:
    tokens = tmp_path / "data" / "tokens"
    tokens.mkdir(parents=True)
    tokens.chmod(0o755)
    config.load_or_exit(environ(tmp_path))
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o700


def test_it_stops_when_the_token_directory_cannot_be_made(tmp_path, capsys) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tokens").write_text("a file, not a directory")
    with pytest.raises(SystemExit):
        config.load_or_exit(environ(tmp_path))
    assert "[auth] token_storage" in capsys.readouterr().err
