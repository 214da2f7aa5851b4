"""The ORAS Python SDK with its default auth backend (the token flow) and authentication on: it
logs in, pushes an artifact, pushes an SBOM whose subject is that artifact, finds the SBOM through
the referrers API and pulls both back byte for byte. Basic credentials are accepted under the
bearer challenge too, so the test holds oras to the token flow: every authenticated request it made
carried a token signed by /auth/token."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import oras.client
import oras.oci
import pytest

from tests.support.auth import write_htpasswd
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

SBOM_TYPE = "application/spdx+json"
INDEX = "application/vnd.oci.image.index.v1+json"


@pytest.fixture
def bearer_registry(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> RegistryServer:
    users = write_htpasswd(tmp_path / "users.htpasswd", {"alice": "wonderland"})
    return start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_CHALLENGE="bearer", SVC_AUTH_HTPASSWD_FILE=str(users))


def client_for(server: RegistryServer, config: Path, username: str, password: str) -> oras.client.OrasClient:
    client = oras.client.OrasClient(hostname=server.host, insecure=True)  # default auth_backend: "token"
    client.login(username=username, password=password, hostname=server.host, config_path=str(config))
    return client


def test_oras_pushes_an_artifact_with_a_subject_and_finds_it_as_a_referrer(
        bearer_registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = bearer_registry.host
    monkeypatch.chdir(tmp_path)  # oras pushes only files below the working directory
    config = tmp_path / "docker-config.json"
    Path("artifact.txt").write_bytes(b"the artifact itself\n" * 100)
    Path("sbom.spdx.json").write_text(json.dumps({"spdxVersion": "SPDX-2.3", "name": "artifact"}))

    pusher = client_for(bearer_registry, config, "alice", "wonderland")
    pushed = pusher.push(files=["artifact.txt"], target=f"{host}/team/artifacts:v1", config_path=str(config))
    assert pushed.status_code == 201
    subject_digest = pushed.headers["Docker-Content-Digest"]
    manifest = pusher.do_request(f"http://{host}/v2/team/artifacts/manifests/{subject_digest}", "GET",
                                 headers={"Accept": oras.oci.EmptyManifest["mediaType"]})
    subject = oras.oci.Subject(manifest.headers["Content-Type"], subject_digest, len(manifest.content))

    referrer = pusher.push(files=[f"sbom.spdx.json:{SBOM_TYPE}"], target=f"{host}/team/artifacts:sbom",
                           subject=subject, config_path=str(config),
                           manifest_annotations={"org.example.kind": "sbom"})
    assert referrer.status_code == 201
    assert referrer.headers["OCI-Subject"] == subject_digest
    referrer_digest = referrer.headers["Docker-Content-Digest"]

    # Another client, logged in with a read token, reads it all back.
    token = bearer_registry.manage("createtoken", "--username", "alice", "--role", "read").stdout.strip()
    reader = client_for(bearer_registry, tmp_path / "reader-config.json", "token", token)
    listing = reader.do_request(f"http://{host}/v2/team/artifacts/referrers/{subject_digest}", "GET")
    assert listing.status_code == 200, listing.text
    assert listing.headers["Content-Type"] == INDEX
    [descriptor] = listing.json()["manifests"]
    assert descriptor["digest"] == referrer_digest
    assert descriptor["annotations"]["org.example.kind"] == "sbom"

    out = tmp_path / "pulled"
    files = reader.pull(target=f"{host}/team/artifacts@{referrer_digest}", outdir=str(out))
    assert [Path(f).read_bytes() for f in files] == [Path("sbom.spdx.json").read_bytes()]
    files = reader.pull(target=f"{host}/team/artifacts:v1", outdir=str(out))
    assert [Path(f).read_bytes() for f in files] == [Path("artifact.txt").read_bytes()]

    # Both clients went to the realm with their credentials (alice's password, the API token)...
    grants = bearer_registry.request_lines("/auth/token")
    assert [(g["method"], g["status"], g["user_agent"]) for g in grants] == [("GET", 200, "oras-py")] * 2, grants
    checked = {mechanism: bearer_registry.metric("registry_auth_attempts_total", mechanism=mechanism)
               for mechanism in ("basic", "token", "bearer", "signed")}
    assert checked["basic"] == 1 and checked["token"] == 1 and checked["bearer"] == 0, checked
    # ...and sent only the signed tokens they got to /v2/: a request with credentials is one with a principal.
    registry_calls = [line for line in bearer_registry.request_lines() if line["path"].startswith("/v2/team/")]
    assert checked["signed"] == sum(line["principal"] is not None for line in registry_calls) >= 15, checked
