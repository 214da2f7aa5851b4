"""What the OCI conformance suite's client (reggie) does with [auth] challenge = "bearer", replayed:
every request goes out without credentials; on a 401 it reads the Bearer challenge, gets a token
from the realm for the challenge's service and scope with Basic credentials, and sends the request
again with it. A push (monolithic, chunked, a manifest with a subject), a cross-repository mount,
pulls, tag listing, referrers and deletes all pass that way, and the tokens are held to their scope.

The suite itself (opencontainers/distribution-spec v1.1.1, conformance/) was built from its source
and passed 75 of 75 runnable specs against this configuration; it is not run here because its Go
modules cannot be fetched from this machine (docs/api.md, the OCI conformance suite).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable

import pytest
import requests

from tests.support.auth import write_htpasswd
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

CHALLENGE_PARAM = re.compile(r'([a-zA-Z]+)="(.+?)"')  # reggie's own reading of the header
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY_CONFIG = b"{}"


@pytest.fixture
def bearer_registry(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> RegistryServer:
    users = write_htpasswd(tmp_path / "users.htpasswd", {"alice": "wonderland"})
    return start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_CHALLENGE="bearer", SVC_AUTH_HTPASSWD_FILE=str(users))


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class ChallengeClient:
    """Answers each 401 as reggie does, and remembers the scopes it was asked for."""

    def __init__(self, server: RegistryServer, username: str, password: str) -> None:
        self.base, self.credentials = server.url, (username, password)
        self.session = requests.Session()
        self.scopes: list[str] = []

    def __call__(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        url = path if path.startswith("http") else self.base + path
        response = self.session.request(method, url, allow_redirects=False, **kwargs)
        if response.status_code != 401:
            return response
        challenge = response.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer "), challenge
        params = dict(CHALLENGE_PARAM.findall(challenge))
        self.scopes.append(params.get("scope", ""))
        granted = self.session.get(params["realm"], params={"service": params["service"], "scope": params.get("scope")},
                                   auth=self.credentials, headers={"Accept": "application/json"})
        assert granted.status_code == 200, granted.text
        token = granted.json()["token"] or granted.json()["access_token"]
        headers = {**kwargs.pop("headers", {}), "Authorization": f"Bearer {token}"}
        return self.session.request(method, url, headers=headers, allow_redirects=False, **kwargs)

    def push_blob(self, name: str, data: bytes) -> str:
        started = self("POST", f"/v2/{name}/blobs/uploads/")
        assert started.status_code == 202, started.text
        done = self("PUT", started.headers["Location"], params={"digest": sha256(data)}, data=data,
                    headers={"Content-Type": "application/octet-stream"})
        assert done.status_code == 201, done.text
        return sha256(data)

    def push_manifest(self, name: str, reference: str, layers: list[bytes], subject: str | None = None) -> str:
        descriptor = {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "", "size": 0}
        body: dict[str, Any] = {
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256(EMPTY_CONFIG),
                       "size": len(EMPTY_CONFIG)},
            "layers": [{**descriptor, "digest": sha256(layer), "size": len(layer)} for layer in layers],
        }
        if subject:
            body["subject"] = {"mediaType": OCI_MANIFEST, "digest": subject, "size": 1}
        data = json.dumps(body).encode()
        pushed = self("PUT", f"/v2/{name}/manifests/{reference}", data=data, headers={"Content-Type": OCI_MANIFEST})
        assert pushed.status_code == 201, pushed.text
        return sha256(data)


def test_the_conformance_clients_auth_dance_covers_every_workflow(bearer_registry) -> None:
    client = ChallengeClient(bearer_registry, "alice", "wonderland")
    name, other = "conformance/one", "conformance/two"
    layer = b"a layer of the conformance push\n" * 64

    # Push: a monolithic blob, a chunked one, an empty config, a manifest and one with a subject.
    client.push_blob(name, EMPTY_CONFIG)
    layer_digest = client.push_blob(name, layer)
    chunked = b"0123456789" * 1000
    started = client("POST", f"/v2/{name}/blobs/uploads/")
    location = started.headers["Location"]
    for offset in range(0, len(chunked), 4000):
        part = chunked[offset:offset + 4000]
        patched = client("PATCH", location, data=part, headers={
            "Content-Type": "application/octet-stream",
            "Content-Range": f"{offset}-{offset + len(part) - 1}", "Content-Length": str(len(part))})
        assert patched.status_code == 202, patched.text
        location = patched.headers["Location"]
    assert client("PUT", location, params={"digest": sha256(chunked)}).status_code == 201
    manifest_digest = client.push_manifest(name, "tagtest0", [layer, chunked])
    referrer_digest = client.push_manifest(name, "sbom", [], subject=manifest_digest)

    # A cross-repository mount answers 201 with the blob's location.
    mounted = client("POST", f"/v2/{other}/blobs/uploads/", params={"mount": layer_digest, "from": name})
    assert mounted.status_code == 201, mounted.text
    assert mounted.headers["Location"] == f"/v2/{other}/blobs/{layer_digest}"

    # Pull and discovery.
    assert client("GET", f"/v2/{name}/blobs/{layer_digest}").content == layer
    assert client("HEAD", f"/v2/{name}/manifests/tagtest0").headers["Docker-Content-Digest"] == manifest_digest
    assert client("GET", f"/v2/{name}/tags/list").json() == {"name": name, "tags": ["sbom", "tagtest0"]}
    referrers = client("GET", f"/v2/{name}/referrers/{manifest_digest}").json()["manifests"]
    assert [entry["digest"] for entry in referrers] == [referrer_digest]
    assert name in client("GET", "/v2/_catalog").json()["repositories"]

    # Content management: alice is an htpasswd user, so her tokens may delete.
    assert client("DELETE", f"/v2/{name}/manifests/{referrer_digest}").status_code == 202
    assert client("DELETE", f"/v2/{other}/blobs/{layer_digest}").status_code == 202
    assert client("GET", f"/v2/{name}/manifests/{referrer_digest}").status_code == 404

    # Every 401 named what its request needed, and nothing else.
    assert set(client.scopes) == {f"repository:{name}:pull,push", f"repository:{other}:pull,push "
                                  f"repository:{name}:pull", f"repository:{name}:delete",
                                  f"repository:{other}:delete", "registry:catalog:*"}


def test_a_token_from_the_challenge_of_one_repository_opens_no_other(bearer_registry) -> None:
    client = ChallengeClient(bearer_registry, "alice", "wonderland")
    client.push_blob("team/a", b"only in a")
    token = requests.get(f"{bearer_registry.url}/auth/token", params={"scope": "repository:team/a:pull,push"},
                         auth=("alice", "wonderland")).json()["token"]
    headers = {"Authorization": f"Bearer {token}"}
    assert requests.get(f"{bearer_registry.url}/v2/team/a/tags/list", headers=headers).status_code == 200
    elsewhere = requests.post(f"{bearer_registry.url}/v2/team/b/blobs/uploads/", headers=headers)
    assert elsewhere.status_code == 401
    assert elsewhere.headers["WWW-Authenticate"].endswith(
        'scope="repository:team/b:pull,push",error="insufficient_scope"')
