"""The Docker engine against the access rules: the three teams through the token flow (docker's own
Bearer challenge), robot accounts pushing with Basic credentials and through the token flow, refused
at their next request once disabled, a rotated secret keeping the name and killing the old one; and
the audit log holding each step in order."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.support.access import PASSWORDS, audit_steps, shared_team_server, team_server
from tests.support.docker import Docker
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


def _login(docker: Docker, host: str, user: str, password: str, check: bool = True) -> object:
    return docker.run("login", "-u", user, "--password-stdin", host, input=password, check=check)


def _image(docker: Docker, host: str, repository: str) -> str:
    image = f"{host}/{repository}:{uuid.uuid4().hex[:8]}"
    docker.import_busybox(image)
    return image


@pytest.fixture(scope="module")
def bearer_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    yield from shared_team_server(tmp_path_factory, "bearer", SVC_AUTH_CHALLENGE="bearer")


@pytest.fixture
def basic_server(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> RegistryServer:
    return team_server(start_registry, tmp_path, "basic")


def test_three_teams_with_docker_through_the_token_flow(docker: Docker, bearer_server: RegistryServer) -> None:
    host = bearer_server.host
    since = datetime.now(timezone.utc).isoformat()  # the server is the file's: its robot test may have run
    app = _image(docker, host, "team-a/app")
    _login(docker, host, "alice", PASSWORDS["alice"])
    docker.run("push", app)
    forbidden = app.replace("team-a/app", "team-b/app")
    docker.run("tag", app, forbidden)
    refused = docker.run("push", forbidden, check=False)
    assert refused.returncode != 0 and "alice has role none on team-b/*; push needs write" in refused.stderr, \
        refused.stderr
    public = app.replace("team-a/app", "public/base")
    docker.run("tag", app, public)
    docker.run("push", public)

    _login(docker, host, "carol", PASSWORDS["carol"])
    docker.run("rmi", app)
    docker.run("pull", app)  # carol reads team-a/*
    docker.run("tag", app, app + "-carol")
    refused = docker.run("push", app + "-carol", check=False)
    assert "carol has role read on team-a/*; push needs write" in refused.stderr, refused.stderr

    _login(docker, host, "bob", PASSWORDS["bob"])
    secret = app.replace("team-a/app", "team-a/secret/keys")
    docker.run("tag", app, secret)
    docker.run("push", secret)
    _login(docker, host, "alice", PASSWORDS["alice"])
    docker.run("rmi", secret)
    hidden = docker.run("pull", secret, check=False)
    absent = docker.run("pull", secret.replace("keys", "ghost"), check=False)
    assert hidden.returncode != 0 and absent.returncode != 0
    assert hidden.stderr.replace("keys", "ghost") == absent.stderr  # exactly as a repository that does not exist

    docker.run("logout", host)
    docker.run("rmi", public)
    docker.run("pull", public)  # anonymously
    assert docker.run("pull", app, check=False).returncode != 0

    steps = audit_steps(bearer_server, "--since", since, "--outcome", "success", "--action", "push")
    assert [(who, repository) for who, _action, repository, _outcome in steps] == [
        ("alice", "team-a/app"), ("alice", "public/base"), ("bob", "team-a/secret/keys")]
    denied = audit_steps(bearer_server, "--since", since, "--outcome", "denied", "--action", "push")
    assert ("alice", "push", "team-b/app", "denied") in denied and ("carol", "push", "team-a/app", "denied") in denied


def _robot_lifecycle(docker: Docker, server: RegistryServer) -> None:
    host = server.host
    created = server.manage("createrobot", "team-a-ci", "--repository", "team-a/*", "--role", "write",
                            "--ttl-days", "90")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip()
    image = _image(docker, host, "team-a/ci")
    _login(docker, host, "robot$team-a-ci", secret)
    docker.run("push", image)
    outside = image.replace("team-a/ci", "team-b/ci")
    docker.run("tag", image, outside)
    refused = docker.run("push", outside, check=False)
    assert "robot$team-a-ci has role none on team-b/ci (outside its repositories team-a/*)" in refused.stderr, \
        refused.stderr

    assert server.manage("robots", "disable", "team-a-ci").returncode == 0
    docker.run("tag", image, image + "-again")
    disabled = docker.run("push", image + "-again", check=False)
    assert disabled.returncode != 0, disabled.stdout
    assert server.manage("robots", "enable", "team-a-ci").returncode == 0
    docker.run("push", image + "-again")

    rotated = server.manage("robots", "rotate", "robot$team-a-ci")
    assert rotated.returncode == 0, rotated.stderr
    new = rotated.stdout.strip()
    assert _login(docker, host, "robot$team-a-ci", secret, check=False).returncode != 0  # type: ignore[attr-defined]
    _login(docker, host, "robot$team-a-ci", new)  # the same name
    docker.run("push", image)
    docker.run("logout", host)

    steps = [step for step in audit_steps(server, "--actor", "robot$team-a-ci") if step[1] == "push"]
    assert steps[0] == ("robot$team-a-ci", "push", "team-a/ci", "success")
    assert ("robot$team-a-ci", "push", "team-b/ci", "denied") in steps
    changes = [step[1] for step in audit_steps(server) if step[1].startswith("robot.")]
    assert changes == ["robot.create", "robot.disable", "robot.enable", "robot.rotate"]
    failed = [step for step in audit_steps(server, "--outcome", "failed") if step[0] == "robot$team-a-ci"]
    assert failed, "the disabled robot's and the old secret's refusals are audited"


def test_a_robot_pushes_from_docker_with_basic_credentials(docker: Docker, basic_server: RegistryServer) -> None:
    _robot_lifecycle(docker, basic_server)


def test_a_robot_pushes_from_docker_through_the_token_flow(docker: Docker, bearer_server: RegistryServer) -> None:
    _robot_lifecycle(docker, bearer_server)
