"""The registry's image, built from its Dockerfile (the ``registry_image`` fixture) and run for real by
a Docker engine: as uid 10001 on a read-only root filesystem with a volume for /data, docker logs in,
pushes and pulls through it; ``docker-compose up`` of docker-compose.yml gets it healthy."""
from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import require_tool
from tests.support.auth import write_htpasswd
from tests.support.docker import Docker
from tests.support.server import REPO, free_port

pytestmark = pytest.mark.e2e


def wait_healthy(docker: Docker, container: str, timeout: float = 120) -> None:
    """Until the image's own HEALTHCHECK says healthy (its first check runs 15 s after the start)."""
    deadline = time.monotonic() + timeout
    while True:
        state = docker.run("inspect", "--format", "{{.State.Status}} {{.State.Health.Status}}", container).stdout
        if state.split() == ["running", "healthy"]:
            return
        logs = docker.run("logs", container, check=False)
        assert state.split()[0] == "running", f"{state}\n{logs.stdout[-2000:]}{logs.stderr[-4000:]}"
        assert time.monotonic() < deadline, f"{state}\n{logs.stderr[-4000:]}"
        time.sleep(1)


def push_pull_run(docker: Docker, host: str, user: str, password: str) -> None:
    image = f"{host}/team/busybox:{uuid.uuid4().hex[:8]}"
    docker.import_busybox(image)
    docker.run("login", "-u", user, "--password-stdin", host, input=password)
    docker.run("push", image)
    docker.run("rmi", image)
    docker.run("pull", image)
    ran = docker.run("run", "--rm", "--network", "none", image, "/bin/sh", "-c", "echo pulled and ran")
    assert ran.stdout.strip() == "pulled and ran"
    docker.run("rmi", image)


def test_it_runs_as_10001_on_a_read_only_root_and_docker_pushes_and_pulls_through_it(
        docker: Docker, registry_image: str, tmp_path: Path) -> None:
    users = write_htpasswd(tmp_path / "users.htpasswd", {"alice": "wonderland"})
    users.chmod(0o644)
    name = f"registry-{uuid.uuid4().hex[:8]}"
    volume, port = f"{name}-data", free_port()
    # The engine has no default bridge (tests/support/docker.py): a network of its own to publish from.
    docker.run("network", "create", name)
    docker.run("run", "--detach", "--name", name, "--network", name, "--read-only", "--tmpfs", "/tmp",
               "--volume", f"{volume}:/data", "--volume", f"{users}:/etc/registry/users.htpasswd:ro",
               "--env", "SVC_AUTH_ENABLED=true", "--env", "SVC_AUTH_HTPASSWD_FILE=/etc/registry/users.htpasswd",
               "--publish", f"127.0.0.1:{port}:4000", registry_image)
    try:
        wait_healthy(docker, name)
        # Every process of the container (gunicorn's master and workers) runs as the image's user.
        processes = docker.run("top", name, "-eo", "pid,uid,args").stdout.splitlines()[1:]
        assert len(processes) >= 3 and {line.split()[1] for line in processes} == {"10001"}, processes
        written = docker.run("exec", name, "touch", "/app/written", check=False)
        assert written.returncode != 0 and "Read-only file system" in written.stderr

        push_pull_run(docker, f"127.0.0.1:{port}", "alice", "wonderland")

        logs = docker.run("logs", name).stderr
        assert "Traceback" not in logs and "PermissionError" not in logs, logs[-3000:]
    finally:
        docker.run("rm", "--force", name, check=False)
        docker.run("network", "rm", name, check=False)
    try:
        # What it wrote is on the volume, the service user's alone.
        modes = docker.run("run", "--rm", "--volume", f"{volume}:/data", registry_image, "sh", "-c",
                           "stat -c '%u %a %n' /data/db.sqlite3 /data/secret_key /data/registry /data/tokens "
                           "/data/registry/blobs").stdout.split("\n")
        assert [line.split()[:2] for line in modes if line] == [
            ["10001", "600"], ["10001", "600"], ["10001", "700"], ["10001", "700"], ["10001", "700"]], modes
    finally:
        docker.run("volume", "rm", volume, check=False)


def test_docker_compose_brings_the_compose_file_up_healthy_on_loopback(docker: Docker, registry_image: str,
                                                                        tmp_path: Path) -> None:
    compose = require_tool("docker-compose")
    project = tmp_path / "compose"
    project.mkdir()
    (project / "docker-compose.yml").write_text(
        (REPO / "docker-compose.yml").read_text().replace("build: .", f"build: {REPO}"))
    write_htpasswd(project / "users.htpasswd", {"alice": "wonderland"}).chmod(0o644)  # as its comment says
    port, name = free_port(), f"registry{uuid.uuid4().hex[:8]}"

    def compose_run(*args: str) -> str:
        done = subprocess.run([compose, "--project-name", name, *args], cwd=project, capture_output=True,
                              text=True, timeout=300, env={**docker.env, "REGISTRY_PORT": str(port)})
        assert done.returncode == 0, f"docker-compose {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    compose_run("up", "--detach", "--no-build")  # the image built above is what `build: .` makes
    try:
        container = compose_run("ps", "--quiet", "registry").strip()
        wait_healthy(docker, container)
        assert docker.run("port", container, "4000").stdout.split() == [f"127.0.0.1:{port}"]
        push_pull_run(docker, f"127.0.0.1:{port}", "alice", "wonderland")
    finally:
        compose_run("down", "--volumes")
