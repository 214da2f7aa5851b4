"""deploy/kubernetes: plain manifests (listed by a kustomization) that the Kubernetes API would accept
(validated offline against its JSON schemas by kubernetes-validate) and that pass the Pod Security
"restricted" profile; secrets in mounted files, never in the environment; migrations once per
release; probes, resources, an Ingress for layer-sized bodies and a tight trusted_proxies."""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Iterator

import kubernetes_validate
import pytest
import tomli
import yaml

from regsite import config
from regsite.version import version
from tests.support.server import REPO

KUBERNETES = REPO / "deploy" / "kubernetes"
MANIFESTS = sorted(p for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")
# The oldest release still commonly run (Pod Security admission is stable since 1.25), and the newest
# kubernetes-validate knows.
VERSIONS = ("1.27.0", kubernetes_validate.latest_version())


def _documents() -> list[dict[str, Any]]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


DOCUMENTS = _documents()


def _one(kind: str) -> dict[str, Any]:
    [found] = [doc for doc in DOCUMENTS if doc["kind"] == kind]
    return found


def pod_templates() -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in DOCUMENTS:
        spec = doc.get("spec", {})
        if doc["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if "template" in spec:
            yield f"{doc['kind']}/{doc['metadata']['name']}", spec["template"]


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


@pytest.mark.parametrize("version_", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_matches_the_kubernetes_schemas(path: Path, version_: str) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        kubernetes_validate.validate(doc, version_, strict=True)  # strict: an unknown field fails


def test_the_kustomization_lists_every_manifest_but_the_secret_example() -> None:
    listed = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in MANIFESTS if p.name != "secret.example.yaml")


def test_there_are_pod_templates_to_check() -> None:
    assert {name.split("/")[0] for name, _ in pod_templates()} == {"Deployment", "Job"}


@pytest.mark.parametrize("name,pod", list(pod_templates()), ids=[name for name, _ in pod_templates()])
def test_every_pod_template_passes_the_restricted_profile(name: str, pod: dict[str, Any]) -> None:
    """The checks of https://kubernetes.io/docs/concepts/security/pod-security-standards/ (baseline and
    restricted), plus a read-only root filesystem."""
    spec = pod["spec"]
    context = spec.get("securityContext", {})
    assert not (spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"))
    allowed_volumes = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                       "projected", "secret"}
    for volume in spec.get("volumes", []):
        assert set(volume) - {"name"} <= allowed_volumes, volume
    assert context.get("seccompProfile", {}).get("type") in ("RuntimeDefault", "Localhost")
    assert context.get("runAsUser", 1) != 0
    for container in containers(pod):
        own = container.get("securityContext", {})
        assert own.get("runAsNonRoot", context.get("runAsNonRoot")) is True, container["name"]
        assert own.get("runAsUser", context.get("runAsUser", 1)) != 0
        assert own.get("allowPrivilegeEscalation") is False, container["name"]
        assert not own.get("privileged")
        assert "ALL" in own.get("capabilities", {}).get("drop", []), container["name"]
        assert set(own.get("capabilities", {}).get("add", [])) <= {"NET_BIND_SERVICE"}
        assert own.get("seccompProfile", context.get("seccompProfile", {})).get("type") in (
            "RuntimeDefault", "Localhost")
        assert own.get("readOnlyRootFilesystem") is True, container["name"]
        assert not any("hostPort" in port for port in container.get("ports", []))


@pytest.mark.parametrize("name,pod", list(pod_templates()), ids=[name for name, _ in pod_templates()])
def test_secrets_are_mounted_files_never_environment_variables(name: str, pod: dict[str, Any]) -> None:
    for container in containers(pod):
        assert all("secretRef" not in source for source in container.get("envFrom", [])), container["name"]
        assert all("secretKeyRef" not in var.get("valueFrom", {}) for var in container.get("env", []))
        mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
        secret_volumes = [v for v in pod["spec"]["volumes"] if "secret" in v]
        assert [v["secret"]["secretName"] for v in secret_volumes] == ["registry"]
        mount = mounts[secret_volumes[0]["name"]]
        assert mount["readOnly"] is True and "subPath" not in mount  # a subPath mount is never refreshed
        settings = _one("ConfigMap")["data"]
        for key in ("SVC_CONFIG", "SVC_SERVER_SECRET_KEY_FILE", "SVC_AUTH_HTPASSWD_FILE"):
            assert settings[key].startswith(mount["mountPath"] + "/"), key


def test_the_settings_and_the_secret_files_make_a_valid_replica_configuration(tmp_path: Path, monkeypatch) -> None:
    secret = _one("Secret")["stringData"]
    assert set(secret) == {"users.htpasswd", "secret-key", "secrets.toml"}
    (tmp_path / "secrets.toml").write_text(secret["secrets.toml"])
    env = {**_one("ConfigMap")["data"], "SVC_CONFIG": str(tmp_path / "secrets.toml")}
    monkeypatch.chdir(tmp_path)
    cfg = config.load(env)
    assert cfg["storage"]["backend"] == "s3" and cfg["storage"]["s3_secret_key"]
    assert cfg["database"]["url"].startswith("postgresql://")
    assert cfg["auth"]["token_backend"] == "database"
    # Nothing secret in the ConfigMap: the file holds exactly the secret keys.
    with (tmp_path / "secrets.toml").open("rb") as fh:
        assert tomli.load(fh) == {"database": {"url": cfg["database"]["url"]}, "storage": {
            "s3_access_key": cfg["storage"]["s3_access_key"], "s3_secret_key": cfg["storage"]["s3_secret_key"]}}


def test_trusted_proxies_are_the_ingress_controllers_not_the_pod_network() -> None:
    networks = config.proxy_networks(_one("ConfigMap")["data"]["SVC_SERVER_TRUSTED_PROXIES"].split(","))
    assert networks and all(network.prefixlen >= 20 for network in networks), networks
    assert ipaddress.ip_network("10.0.0.0/8") not in networks
    policy = _one("NetworkPolicy")
    [rule] = policy["spec"]["ingress"]
    assert [peer["namespaceSelector"]["matchLabels"] for peer in rule["from"]] == [
        {"kubernetes.io/metadata.name": "ingress-nginx"}]


def test_migrations_run_once_per_release_in_a_job_named_after_it() -> None:
    job, deployment = _one("Job"), _one("Deployment")
    assert job["metadata"]["name"] == f"registry-migrate-{version()}"
    [migrate] = job["spec"]["template"]["spec"]["containers"]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert job["spec"]["ttlSecondsAfterFinished"] > 0  # old releases' Jobs do not pile up
    [server] = deployment["spec"]["template"]["spec"]["containers"]
    assert server["command"] == ["gunicorn", "-c", "gunicorn.conf.py"]  # replicas never migrate
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_the_image_names_a_registry_and_the_release() -> None:
    images = {c["image"] for _, pod in pod_templates() for c in containers(pod)}
    assert images == {f"registry.example.com/svc-registry:{version()}"}


def test_probes_resources_and_spread_are_set() -> None:
    deployment = _one("Deployment")
    assert deployment["spec"]["replicas"] >= 2
    [server] = deployment["spec"]["template"]["spec"]["containers"]
    assert server["livenessProbe"]["httpGet"]["path"] == "/health"
    assert server["startupProbe"]["httpGet"]["path"] == "/health"
    assert server["readinessProbe"]["httpGet"]["path"] == "/ready"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert server[probe]["timeoutSeconds"] >= 3, probe  # 1 s fails a busy but healthy pod
    for _, pod in pod_templates():
        for container in containers(pod):
            for side in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container["resources"][side]), (container["name"], side)
    service, pdb = _one("Service"), _one("PodDisruptionBudget")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"] == labels and "sessionAffinity" not in service["spec"]
    assert pdb["spec"]["selector"]["matchLabels"] == labels


def test_the_ingress_lets_layers_through() -> None:
    ingress = _one("Ingress")
    notes = {k.removeprefix("nginx.ingress.kubernetes.io/"): v for k, v in ingress["metadata"]["annotations"].items()}
    assert notes["proxy-body-size"] == "0"  # ingress-nginx's default 1m fails every layer push with 413
    assert notes["proxy-request-buffering"] == "off" and notes["proxy-buffering"] == "off"
    assert int(notes["proxy-read-timeout"]) >= 600 and int(notes["proxy-send-timeout"]) >= 600
    assert ingress["spec"]["tls"] and ingress["spec"]["ingressClassName"] == "nginx"
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == _one("Service")["metadata"]["name"]
