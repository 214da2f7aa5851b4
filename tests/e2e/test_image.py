"""The registry's image, built from its Dockerfile (the ``registry_image`` fixture) and run for real by
a Docker engine: as uid 10001 on a read-only root filesystem with a volume for /data, docker logs in,
pushes and pulls through it; ``docker-compose up`` of docker-compose.yml gets it healthy; the
replicas of deploy/replicas share PostgreSQL and an S3 store (Ceph RGW in place of MinIO, whose
image cannot be pulled here), so what is pushed through one is pulled from the other."""
from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest

from registry.storage.s3 import S3Driver
from tests.e2e.conftest import Skopeo, require_tool, unavailable
from tests.support.auth import write_htpasswd
from tests.support.docker import Docker
from tests.support.images import build_image
from tests.support.postgres import start_postgres
from tests.support.relay import relay
from tests.support.rgw import RGWUnavailable, start_rgw
from tests.support.server import REPO, free_port

pytestmark = pytest.mark.e2e


@pytest.fixture
def docker(image_docker: Docker) -> Docker:
    """The engine the image was built in (``image_docker``), not the clients' tests' one."""
    return image_docker


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


def request_lines(log: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("logger") == "ops.requests"]


def composer(docker: Docker, project: Path, name: str, **env: str):  # type: ignore[no-untyped-def]
    """docker-compose run in ``project`` as project ``name``, on the tests' engine."""
    compose = require_tool("docker-compose")

    def run(*args: str, check: bool = True) -> str:
        done = subprocess.run([compose, "--project-name", name, *args], cwd=project, capture_output=True,
                              text=True, timeout=300, env={**docker.env, **env})
        if check and done.returncode != 0:
            logs = run("logs", "--tail", "30", check=False)
            raise AssertionError(f"docker-compose {' '.join(args)}:\n{done.stdout}\n{done.stderr}\n{logs}")
        return done.stdout

    return run


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
    project = tmp_path / "compose"
    project.mkdir()
    (project / "docker-compose.yml").write_text(
        (REPO / "docker-compose.yml").read_text().replace("build: .", f"build: {REPO}"))
    write_htpasswd(project / "users.htpasswd", {"alice": "wonderland"}).chmod(0o644)  # as its comment says
    port, name = free_port(), f"registry{uuid.uuid4().hex[:8]}"

    compose_run = composer(docker, project, name, REGISTRY_PORT=str(port))
    compose_run("up", "--detach", "--no-build")  # the image built above is what `build: .` makes
    try:
        container = compose_run("ps", "--quiet", "registry").strip()
        wait_healthy(docker, container)
        assert docker.run("port", container, "4000").stdout.split() == [f"127.0.0.1:{port}"]
        push_pull_run(docker, f"127.0.0.1:{port}", "alice", "wonderland")
    finally:
        compose_run("down", "--volumes")


# deploy/replicas/docker-compose.yml's network, and the address its containers reach this machine at.
REPLICAS_GATEWAY = "172.28.0.1"


def test_the_replicas_example_shares_postgres_and_s3_so_a_push_through_one_pulls_from_the_other(
        docker: Docker, registry_image: str, skopeo: Skopeo, tmp_path: Path) -> None:
    project = tmp_path / "replicas"
    shutil.copytree(REPO / "deploy" / "replicas", project)
    compose_file = project / "docker-compose.yml"
    compose_file.write_text(compose_file.read_text().replace("build: ../..", f"build: {REPO}"))
    write_htpasswd(project / "users.htpasswd", {"alice": "wonderland"}).chmod(0o644)
    with ExitStack() as stack:
        # A PostgreSQL and an RGW of this test's own: the session's would put this test in one process
        # with every other test using them (tests/support/parallel.py).
        try:
            postgres = start_postgres()
            stack.callback(postgres.stop)
            rgw = start_rgw()
            stack.callback(rgw.stop)
        except (RuntimeError, RGWUnavailable) as exc:
            unavailable(str(exc))
        bucket = f"registry-{uuid.uuid4().hex[:8]}"
        S3Driver(bucket, endpoint=rgw.endpoint, access_key=rgw.access_key, secret_key=rgw.secret_key
                 ).client.create_bucket(Bucket=bucket)
        database = postgres.new_database().rsplit("/", 1)[1]
        pg_port, s3_port = free_port(), free_port()
        # .env as example.env says, with this machine's database and store instead of stores.yml's.
        (project / ".env").write_text("\n".join([
            f"DATABASE_URL=postgresql://registry@{REPLICAS_GATEWAY}:{pg_port}/{database}",
            f"S3_ENDPOINT=http://{REPLICAS_GATEWAY}:{s3_port}", f"S3_BUCKET={bucket}",
            f"S3_ACCESS_KEY={rgw.access_key}", f"S3_SECRET_KEY={rgw.secret_key}",
            f"SECRET_KEY={uuid.uuid4().hex}", ""]))
        name = f"replicas{uuid.uuid4().hex[:8]}"
        compose_run = composer(docker, project, name)
        services = ("migrate", "registry1", "registry2")  # the balancer's image cannot be pulled here
        stack.callback(compose_run, "down", "--volumes")
        compose_run("up", "--no-start", "--no-build", "migrate")  # makes the network (the others wait for it)
        stack.enter_context(relay((REPLICAS_GATEWAY, pg_port), ("127.0.0.1", postgres.port)))
        stack.enter_context(relay((REPLICAS_GATEWAY, s3_port), ("127.0.0.1", rgw.port)))
        compose_run("up", "--detach", "--no-build", *services)

        replicas = [compose_run("ps", "--quiet", service).strip() for service in ("registry1", "registry2")]
        for container in replicas:
            wait_healthy(docker, container)
        one, other = (docker.run("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                                 container).stdout.strip() + ":4000" for container in replicas)
        image = build_image(tmp_path / "src", layers=2, layer_size=128 * 1024)
        skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", "alice:wonderland",
                   f"oci:{image.layout}:v1", f"docker://{one}/team/app:v1")
        pulled = tmp_path / "pulled"
        skopeo.run("copy", "--src-tls-verify=false", "--src-creds", "alice:wonderland",
                   f"docker://{other}/team/app:v1", f"oci:{pulled}:v1")
        assert json.loads((pulled / "index.json").read_text())["manifests"][0]["digest"] == image.digest
        # The push's requests went to one replica, the pull's to the other (their request logs).
        methods = [{line["method"] for line in request_lines(docker.run("logs", container).stderr)}
                   for container in replicas]
        assert "PUT" in methods[0] and "PUT" not in methods[1] and "GET" in methods[1], methods
        stored = S3Driver(bucket, endpoint=rgw.endpoint, access_key=rgw.access_key, secret_key=rgw.secret_key)
        assert [info for info in stored.walk("blobs") if info.path.endswith("/data")]
