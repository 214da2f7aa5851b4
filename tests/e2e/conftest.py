"""End-to-end fixtures: the registry under gunicorn and the skopeo client."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.support.docker import Docker, DockerUnavailable, start_docker
from tests.support.image_build import build_registry_image
from tests.support.postgres import Postgres, start_postgres
from tests.support.rgw import RGW, RGWUnavailable, start_rgw
from tests.support.server import RegistryServer


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A conftest's pytestmark is ignored, so the marker is applied to every test collected here.
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)


def require_tool(name: str) -> str:
    """The tool's path; in CI a missing tool fails the run instead of skipping it."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (scripts/install-test-deps.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def start_registry(tmp_path: Path) -> Iterator[Callable[..., RegistryServer]]:
    """Start one or more registries: ``start_registry(SVC_AUTH_ENABLED="true", workers=3)``."""
    servers: list[RegistryServer] = []

    def start(workers: int = 2, name: str = "server", copy_migrated: bool = True, port: int = 0,
              ca_file: Path | None = None, **env: str) -> RegistryServer:
        server = RegistryServer(tmp_path / name, env_overrides=env, workers=workers, copy_migrated=copy_migrated,
                                port=port, ca_file=ca_file)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def registry(start_registry: Callable[..., RegistryServer]) -> RegistryServer:
    return start_registry()


class Skopeo:
    def __init__(self, binary: str, home: Path) -> None:
        self.binary = binary
        self.env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(home / "run")}
        (home / "run").mkdir(parents=True, exist_ok=True)

    def run(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([self.binary, *args], env=self.env, capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"skopeo {' '.join(args)} failed:\n{result.stderr}")
        return result


@pytest.fixture
def skopeo(tmp_path: Path) -> Skopeo:
    return Skopeo(require_tool("skopeo"), tmp_path / "skopeo-home")


def unavailable(message: str) -> None:
    """A real component could not be started: in CI that fails the run, elsewhere it skips."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def running_rgw() -> Iterator[RGW]:
    """A Ceph RGW for a fixture's scope: the session's, or a module's own when its tests kill it or
    would keep the session's busy for minutes (it takes about 15 s to start)."""
    os.environ.pop("AWS_CA_BUNDLE", None)  # plain HTTP on loopback; botocore would still load it
    try:
        server = start_rgw()
    except RGWUnavailable as exc:
        unavailable(str(exc))
    yield server
    server.stop()


def running_postgres() -> Iterator[Postgres]:
    """A throwaway PostgreSQL cluster for a fixture's scope (the session's, or a module's own)."""
    try:
        cluster = start_postgres()
    except RuntimeError as exc:
        unavailable(str(exc))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def rgw() -> Iterator[RGW]:
    """One Ceph RGW for the whole run."""
    yield from running_rgw()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One throwaway PostgreSQL cluster for the whole run; tests take a database each."""
    yield from running_postgres()


def _engine() -> Iterator[Docker]:
    try:
        engine = start_docker()
    except DockerUnavailable as exc:
        unavailable(str(exc))
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def docker() -> Iterator[Docker]:
    """A real Docker engine for the whole run (tests/support/docker.py), for the clients' tests."""
    yield from _engine()


@pytest.fixture(scope="session")
def image_docker() -> Iterator[Docker]:
    """The engine that builds and runs the registry's image (tests/e2e/test_image.py): one of its
    own, so that the build (minutes) and the clients' tests run in two processes at once."""
    yield from _engine()


@pytest.fixture(scope="session")
def registry_image(image_docker: Docker) -> str:
    """The registry's image built from its Dockerfile in that engine, under the name the compose files
    use (tests/support/image_build.py: a stand-in base, packages from a local index)."""
    name = "svc-registry:latest"
    try:
        build_registry_image(image_docker, name)
    except DockerUnavailable as exc:
        unavailable(str(exc))
    return name
