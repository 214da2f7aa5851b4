"""Replicas share the key that signs /auth/token's tokens through their secret key ([server]
secret_key_file): a token, or docker's refresh token, issued by one replica is taken by another
whose key file holds the same key, and refused by one with a key of its own. Three gunicorn servers
on one SQLite database and one storage root, as replicas on a shared filesystem would run."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable
from urllib.parse import urlencode

import pytest

from tests.support.auth import basic, bearer, write_htpasswd
from tests.support.rawhttp import Client, Reply, sha256_digest
from tests.support.registry_client import OCI_CONFIG, OCI_MANIFEST
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

SCOPE = "repository:team/app:pull,push"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def replicas(start_registry: Callable[..., RegistryServer],
             tmp_path: Path) -> tuple[RegistryServer, RegistryServer, RegistryServer]:
    users = write_htpasswd(tmp_path / "users.htpasswd", {"alice": "wonderland"})
    auth = {"SVC_AUTH_ENABLED": "true", "SVC_AUTH_CHALLENGE": "bearer", "SVC_AUTH_HTPASSWD_FILE": str(users)}
    one = start_registry(workers=1, name="one", **auth)
    shared = {"SVC_STORAGE_ROOT": str(one.workdir / "registry"),
              "SVC_DATABASE_URL": f"sqlite:///{one.workdir / 'db.sqlite3'}",
              "SVC_AUTH_TOKEN_STORAGE": str(one.workdir / "tokens"), **auth}
    # The same key in a file of its own (a copy, as on another host); the third makes its own.
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "secret_key").write_bytes((one.workdir / "secret_key").read_bytes())
    two = start_registry(workers=1, name="two", **shared,
                         SVC_SERVER_SECRET_KEY_FILE=str(tmp_path / "two" / "secret_key"))
    other = start_registry(workers=1, name="other", **shared)
    assert (other.workdir / "secret_key").read_bytes() != (one.workdir / "secret_key").read_bytes()
    return one, two, other


def token_from(server: RegistryServer, **params: str) -> dict[str, str]:
    reply = Client(server.host).request("GET", f"/auth/token?{urlencode({'service': 'svc-registry', **params})}",
                                        headers={"Authorization": basic("alice", "wonderland")})
    assert reply.status == 200, reply
    return reply.json()


def refreshed(server: RegistryServer, refresh_token: str) -> Reply:
    form = urlencode({"grant_type": "refresh_token", "refresh_token": refresh_token, "service": "svc-registry",
                      "client_id": "docker", "scope": SCOPE})
    return Client(server.host).request("POST", "/auth/token", body=form.encode(), headers=FORM)


def push_image(server: RegistryServer, token: str) -> str:
    client, auth = Client(server.host), {"Authorization": bearer(token)}
    config = b'{"architecture":"amd64","os":"linux"}'
    reply = client.request("POST", f"/v2/team/app/blobs/uploads/?digest={sha256_digest(config)}", body=config,
                           headers={**auth, "Content-Type": "application/octet-stream"})
    assert reply.status == 201, reply
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [],
                       "config": {"mediaType": OCI_CONFIG, "digest": sha256_digest(config), "size": len(config)}})
    reply = client.request("PUT", "/v2/team/app/manifests/v1", body=body.encode(),
                           headers={**auth, "Content-Type": OCI_MANIFEST})
    assert reply.status == 201, reply
    return reply.header("Docker-Content-Digest")


def manifest(server: RegistryServer, token: str) -> Reply:
    return Client(server.host).request("GET", "/v2/team/app/manifests/v1",
                                       headers={"Authorization": bearer(token), "Accept": OCI_MANIFEST})


def test_a_signed_token_is_taken_by_a_replica_with_the_same_key_and_refused_by_another(replicas) -> None:
    one, two, other = replicas
    token = token_from(one, scope=SCOPE)["token"]

    digest = push_image(two, token)  # issued by one, pushed through two
    assert manifest(one, token).header("Docker-Content-Digest") == digest
    assert manifest(two, token).status == 200

    refused = manifest(other, token)
    assert refused.status == 401, refused
    assert "not one this registry issued" in refused.json()["error"]
    assert refused.header("WWW-Authenticate").startswith(f'Bearer realm="{other.url}/auth/token"'), refused.headers
    # The other replica's own token works there, and only there: the data is the same, the key is not.
    own = token_from(other, scope="repository:team/app:pull")["token"]
    assert manifest(other, own).header("Docker-Content-Digest") == digest
    assert manifest(one, own).status == manifest(two, own).status == 401


def test_a_refresh_token_from_one_replica_is_refreshed_by_another_with_the_same_key(replicas) -> None:
    one, two, other = replicas
    refresh = token_from(one, offline_token="true", client_id="docker")["refresh_token"]

    granted = refreshed(two, refresh)
    assert granted.status == 200, granted
    push_image(one, granted.json()["access_token"])  # and what two signed is taken by one

    refused = refreshed(other, refresh)
    assert refused.status == 401, refused
    assert "refresh token refused: the token is not one this registry issued" in refused.json()["error"]
