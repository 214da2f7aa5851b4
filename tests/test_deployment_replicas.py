"""deploy/replicas: every replica's environment, as docker-compose resolves it from an .env like
example.env's, is a valid configuration for S3, PostgreSQL and database tokens with one session key;
migrations run once, not in each replica; the load balancer spreads requests without affinity and
health-checks /ready; nothing is published beyond loopback, no secret has a default, nothing
unpinned runs. tests/e2e/test_image.py runs it (deploy/kubernetes: tests/test_kubernetes.py)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from regsite import config
from tests.e2e.conftest import require_tool
from tests.support.server import REPO

REPLICAS = REPO / "deploy" / "replicas"
# What a user puts in .env (example.env) for stores.yml's PostgreSQL and MinIO.
TRIAL_ENV = {"COMPOSE_FILE": "docker-compose.yml:stores.yml", "POSTGRES_PASSWORD": "db-secret",
             "DATABASE_URL": "postgresql://registry:db-secret@postgres:5432/registry",
             "S3_ENDPOINT": "http://minio:9000", "S3_BUCKET": "registry", "S3_ACCESS_KEY": "registry",
             "S3_SECRET_KEY": "s3-secret", "SECRET_KEY": "a-long-random-key"}


def resolved(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``docker-compose config`` of a copy of deploy/replicas with ``env`` as its .env."""
    compose = require_tool("docker-compose")
    copy = tmp_path / "replicas"
    shutil.copytree(REPLICAS, copy, dirs_exist_ok=True)
    (copy / ".env").write_text("".join(f"{key}={value}\n" for key, value in env.items()))
    (copy / "users.htpasswd").write_text("")
    return subprocess.run([compose, "config"], capture_output=True, text=True, cwd=copy,
                          env={k: v for k, v in os.environ.items() if k not in env})


def _services(tmp_path: Path) -> dict[str, Any]:
    done = resolved(tmp_path, TRIAL_ENV)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)["services"]


def _valid(env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    monkeypatch.chdir(tmp_path)
    cfg = config.load({k: str(v) for k, v in env.items()})
    assert cfg["storage"]["backend"] == "s3" and cfg["storage"]["s3_bucket"]
    assert cfg["database"]["url"].startswith("postgresql://")
    assert cfg["auth"]["token_backend"] == "database"
    return cfg


def test_compose_runs_two_replicas_on_postgres_and_s3_behind_a_balancer(tmp_path, monkeypatch) -> None:
    services = _services(tmp_path)
    assert {"postgres", "minio", "bucket", "migrate", "registry1", "registry2", "lb"} <= set(services)
    for name in ("registry1", "registry2"):
        replica = services[name]
        assert replica["command"] == ["gunicorn", "-c", "gunicorn.conf.py"]  # no migrate at start
        assert replica["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert replica["read_only"] is True and replica["tmpfs"] == ["/tmp"]
        cfg = _valid(replica["environment"], tmp_path, monkeypatch)
        # Blob pulls are not sent to an address only this machine has (the store's, on its network).
        assert cfg["storage"]["redirect"] is False and "localhost" not in cfg["storage"]["redirect_endpoint"]
    assert services["registry1"]["environment"] == services["registry2"]["environment"]
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "ports" not in services["registry1"]
    assert services["lb"]["ports"] == ["127.0.0.1:4000:4000/tcp"]
    # The replicas believe X-Forwarded-For from the balancer alone, which sends it.
    balancer = services["lb"]["networks"]["default"]["ipv4_address"]
    assert services["registry1"]["environment"]["SVC_SERVER_TRUSTED_PROXIES"] == balancer
    assert "option forwardfor" in (REPLICAS / "haproxy.cfg").read_text()


def test_the_stores_publish_nothing_and_every_image_is_pinned(tmp_path) -> None:
    services = _services(tmp_path)
    for name in ("postgres", "minio", "bucket"):
        assert "ports" not in services[name], name
    for name, service in services.items():
        if "build" in service:
            continue  # the registry's own image, built here
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), (name, image)
    assert services["minio"]["environment"]["MINIO_ROOT_PASSWORD"] == TRIAL_ENV["S3_SECRET_KEY"]


@pytest.mark.parametrize("missing", ["DATABASE_URL", "S3_SECRET_KEY", "SECRET_KEY", "POSTGRES_PASSWORD"])
def test_no_secret_has_a_default(tmp_path, missing: str) -> None:
    done = resolved(tmp_path, {**TRIAL_ENV, missing: ""})
    assert done.returncode != 0 and f"set {missing} in .env" in done.stderr, done.stderr


def test_example_env_names_every_variable_the_files_need() -> None:
    named = {line.split("=")[0] for line in (REPLICAS / "example.env").read_text().splitlines()
             if line and not line.startswith("#")}
    used = set()
    for name in ("docker-compose.yml", "stores.yml"):
        used |= set(re.findall(r"\$\{(\w+):\?", (REPLICAS / name).read_text()))
    assert used <= named, used - named


def test_the_balancer_spreads_requests_without_affinity_and_checks_ready() -> None:
    text = (REPLICAS / "haproxy.cfg").read_text()
    assert "balance roundrobin" in text and "option httpchk GET /ready" in text
    assert "registry1:4000" in text and "registry2:4000" in text
    assert "cookie" not in text and "stick" not in text and "source" not in text.split("balance")[1][:20]


def test_the_balancer_config_validates() -> None:
    haproxy = require_tool("haproxy")
    checked = subprocess.run([haproxy, "-c", "-f", str(REPLICAS / "haproxy.cfg")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
