"""Dockerfile, docker-compose.yml and .dockerignore say what the seed says, read from the files (in
milliseconds). tests/e2e/test_image.py builds the image and runs it for real, with docker and with
docker-compose.
"""
from __future__ import annotations

import json
import os
import re
import shlex

import yaml

from regsite import config
from tests.support.server import REPO

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICE = COMPOSE["services"]["registry"]


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, args = line.partition(" ")
            pairs.append((instruction.upper(), args.strip()))
    return pairs


def instructions(name: str) -> list[str]:
    return [args for instruction, args in dockerfile() if instruction == name]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for args in instructions("ENV"):
        for item in shlex.split(args):
            key, _, value = item.partition("=")
            env[key] = value
    return env


def exec_form(args: str) -> list[str]:
    return json.loads(args)


def test_it_builds_from_python_3_11_slim() -> None:
    assert [args.split()[0] for args in instructions("FROM")] == ["python:3.11-slim"] * 2  # build, then the image


def test_it_runs_as_a_non_root_user() -> None:
    users = instructions("USER")
    assert users, "no USER instruction: the container would run as root"
    uid = users[-1].split(":")[0]
    assert uid not in ("0", "root")
    kinds = [instruction for instruction, _ in dockerfile()]
    assert kinds.index("USER") > max(i for i, kind in enumerate(kinds) if kind == "RUN")


def test_the_data_volume_belongs_to_the_user_and_group_it_runs_as() -> None:
    [user] = instructions("USER")
    uid, _, gid = user.partition(":")
    setup = " ".join(instructions("RUN"))
    assert f"groupadd --system --gid {gid} registry" in setup
    assert f"useradd --system --uid {uid} --gid {gid}" in setup
    assert "chown registry:registry /data" in setup


def test_its_entry_migrates_then_execs_gunicorn_on_4000() -> None:
    command = exec_form(instructions("CMD")[-1])
    assert command[:2] == ["sh", "-c"]
    script = command[2]
    assert "make" not in script.split()
    assert script.index("manage.py migrate --noinput") < script.index("exec gunicorn -c gunicorn.conf.py")
    assert image_env()["SVC_SERVER_BIND"] == "0.0.0.0:4000"
    assert instructions("EXPOSE") == ["4000"]


def test_it_keeps_state_and_the_session_key_on_the_data_volume() -> None:
    env = image_env()
    assert exec_form(instructions("VOLUME")[0]) == ["/data"]
    for key in ("SVC_STORAGE_ROOT", "SVC_AUTH_TOKEN_STORAGE", "SVC_AUTH_HTPASSWD_FILE", "SVC_SERVER_SECRET_KEY_FILE"):
        assert env[key].startswith("/data/"), key
    assert env["SVC_DATABASE_URL"] == "sqlite:////data/db.sqlite3"


def test_it_copies_only_paths_that_exist() -> None:
    for args in instructions("COPY"):
        if args.startswith("--from="):
            continue  # from the build stage
        for source in args.split()[:-1]:
            assert (REPO / source).exists(), source


def test_it_copies_and_packages_every_app_of_the_project() -> None:
    import tomli
    from django.conf import settings

    copied = {args.split()[0] for args in instructions("COPY")}
    with (REPO / "pyproject.toml").open("rb") as fh:
        packaged = set(tomli.load(fh)["tool"]["setuptools"]["packages"]["find"]["include"])
    for app in settings.INSTALLED_APPS:
        if (REPO / app).is_dir():  # the project's own apps, not Django's or a library's
            assert app in copied, f"the Dockerfile does not COPY {app}"
            assert f"{app}*" in packaged, f"pyproject.toml does not package {app}"


def test_compose_publishes_port_4000_on_loopback_only() -> None:
    assert SERVICE["ports"] == ["127.0.0.1:${REGISTRY_PORT:-4000}:4000"]
    assert SERVICE["build"] == "."


def test_compose_runs_it_with_a_read_only_root_filesystem() -> None:
    assert SERVICE["read_only"] is True and SERVICE["tmpfs"] == ["/tmp"]


def test_compose_mounts_the_credential_file_read_only_and_a_data_volume() -> None:
    mounts = [volume.split(":") for volume in SERVICE["volumes"]]
    assert [m for m in mounts if m[1:] == ["/data/users.htpasswd", "ro"]], mounts
    data = [m for m in mounts if m[1] == "/data"]
    assert len(data) == 1 and data[0][0] in COMPOSE["volumes"], mounts


def test_compose_sets_the_auth_variables_to_paths_on_the_volume() -> None:
    env = SERVICE["environment"]
    assert env["SVC_AUTH_ENABLED"] == "true"
    assert env["SVC_AUTH_HTPASSWD_FILE"] == "/data/users.htpasswd"
    assert env["SVC_AUTH_TOKEN_STORAGE"] == "/data/tokens"
    assert env["SVC_STORAGE_ROOT"] == "/data/registry"
    assert env["SVC_DATABASE_URL"] == "sqlite:////data/db.sqlite3"


def test_compose_and_image_variables_are_valid_configuration() -> None:
    cfg = config.load({**image_env(), **SERVICE["environment"], "SVC_CONFIG": os.devnull})
    assert cfg["auth"] | {"enabled": True, "htpasswd_file": "/data/users.htpasswd", "token_storage": "/data/tokens",
                          "token_backend": "files", "challenge": "basic", "token_realm": "",
                          "bearer_ttl_seconds": 300, "refresh_ttl_days": 30} == cfg["auth"]
    assert cfg["server"]["bind"] == "0.0.0.0:4000"


def test_compose_health_check_probes_health() -> None:
    check = SERVICE["healthcheck"]
    assert check["test"][0] == "CMD"
    assert "http://127.0.0.1:4000/health" in " ".join(check["test"])
    assert exec_form(instructions("HEALTHCHECK")[0].split("CMD", 1)[1].strip()) == check["test"][1:]


def test_dockerignore_keeps_secrets_and_local_state_out_of_the_image() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", "data", "staticfiles", "config.toml", "users.htpasswd"} <= ignored
