"""The several-replica examples (deploy/replicas for compose, deploy/kubernetes) describe a working set-up:
every replica's environment is a valid configuration for S3, PostgreSQL and database tokens with one
session key; migrations run once, not in each replica; the load balancer spreads requests without
affinity and health-checks /ready; Kubernetes probes /health and /ready. No engine runs here, so the
files are parsed (and validated by docker-compose and haproxy where those are installed)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from regsite import config
from tests.e2e.conftest import require_tool
from tests.support.server import REPO

REPLICAS = REPO / "deploy" / "replicas"
COMPOSE = yaml.safe_load((REPLICAS / "docker-compose.yml").read_text())
KUBERNETES = [doc for doc in yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "registry.yaml").read_text()) if doc]


def _valid(env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    monkeypatch.chdir(tmp_path)
    cfg = config.load({k: str(v) for k, v in env.items()})
    assert cfg["storage"]["backend"] == "s3" and cfg["storage"]["s3_bucket"]
    assert cfg["database"]["url"].startswith("postgresql://")
    assert cfg["auth"]["token_backend"] == "database"
    return cfg


def test_compose_runs_two_replicas_on_postgres_and_s3_behind_a_balancer(tmp_path, monkeypatch) -> None:
    services = COMPOSE["services"]
    assert {"postgres", "minio", "bucket", "migrate", "registry1", "registry2", "lb"} <= set(services)
    for name in ("registry1", "registry2"):
        replica = services[name]
        assert replica["command"] == ["gunicorn", "-c", "gunicorn.conf.py"]  # no migrate at start
        assert replica["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        _valid(replica["environment"], tmp_path, monkeypatch)
    assert services["registry1"]["environment"]["SVC_SECRET_KEY"] == services["registry2"]["environment"][
        "SVC_SECRET_KEY"]
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert services["lb"]["ports"] == ["4000:4000"] and "ports" not in services["registry1"]
    # The replicas believe X-Forwarded-For from the balancer alone, which sends it.
    balancer = services["lb"]["networks"]["default"]["ipv4_address"]
    assert services["registry1"]["environment"]["SVC_SERVER_TRUSTED_PROXIES"] == balancer
    assert "option forwardfor" in (REPLICAS / "haproxy.cfg").read_text()


def test_the_balancer_spreads_requests_without_affinity_and_checks_ready() -> None:
    text = (REPLICAS / "haproxy.cfg").read_text()
    assert "balance roundrobin" in text and "option httpchk GET /ready" in text
    assert "registry1:4000" in text and "registry2:4000" in text
    assert "cookie" not in text and "stick" not in text and "source" not in text.split("balance")[1][:20]


def test_the_compose_file_and_balancer_config_validate(tmp_path) -> None:
    haproxy = require_tool("haproxy")
    checked = subprocess.run([haproxy, "-c", "-f", str(REPLICAS / "haproxy.cfg")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    compose = require_tool("docker-compose")
    copy = tmp_path / "replicas"
    copy.mkdir()
    (copy / "docker-compose.yml").write_text((REPLICAS / "docker-compose.yml").read_text().replace("../..", str(REPO)))
    (copy / "users.htpasswd").write_text("")
    validated = subprocess.run([compose, "-f", str(copy / "docker-compose.yml"), "config", "-q"],
                               capture_output=True, text=True, cwd=copy)
    assert validated.returncode == 0, validated.stderr


def _kind(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in KUBERNETES if doc["kind"] == kind]


def test_kubernetes_runs_replicas_with_probes_and_migrates_in_a_job(tmp_path, monkeypatch) -> None:
    [deployment], [service], [job] = _kind("Deployment"), _kind("Service"), _kind("Job")
    [secret], [config_map] = _kind("Secret"), _kind("ConfigMap")
    assert deployment["spec"]["replicas"] >= 2
    pod = deployment["spec"]["template"]
    [container] = pod["spec"]["containers"]
    assert container["command"] == ["gunicorn", "-c", "gunicorn.conf.py"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert {"configMapRef": {"name": config_map["metadata"]["name"]}} in container["envFrom"]
    assert {"secretRef": {"name": secret["metadata"]["name"]}} in container["envFrom"]
    env = {**config_map["data"], **{k: v for k, v in secret["stringData"].items() if k.startswith("SVC_")}}
    _valid(env, tmp_path, monkeypatch)
    assert service["spec"]["selector"] == pod["metadata"]["labels"] and "sessionAffinity" not in service["spec"]
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["python", "manage.py", "migrate",
                                                                           "--noinput"]
