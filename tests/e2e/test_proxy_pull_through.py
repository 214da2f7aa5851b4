"""Pull-through caches end to end, with three local upstreams and no internet:

- prefix ``a``: the CNCF registry (docker-registry 2.8) with htpasswd auth (Basic);
- prefix ``b``: a second instance of this registry under gunicorn, auth on (Basic);
- prefix ``hub`` (host docker.io): the CNCF registry with distribution's own ``auth: token``,
  tokens from the realm of tests/support/upstreams.TokenRealm (the Bearer token flow).

The cache itself runs under gunicorn with auth on; skopeo and podman pull, with a read token, a
multi-arch index and a three-layer image through each prefix and get the upstream's digests. Then
every upstream is stopped: the same pulls still succeed from the cache, and an image never pulled
gets a clean 502/503 envelope. Upstream credentials are set from the environment
(SVC_PROXY_<n>_PASSWORD) and appear in no log line, metric or answer.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.conftest import Skopeo, require_tool
from tests.support.server import RegistryServer
from tests.support.upstreams import (
    OCI_INDEX,
    OCI_MANIFEST,
    Distribution,
    Pushed,
    TokenRealm,
    UpstreamUnavailable,
    basic,
    htpasswd_file,
    push_image,
    push_multiarch,
)

pytestmark = pytest.mark.e2e
SECRETS = {"a": "a-pass-5f1e93", "b": "b-pass-0c77d2", "hub": "hub-pass-7a2b44"}
ACCEPT = ", ".join([OCI_MANIFEST, OCI_INDEX])


@dataclass
class World:
    cache: RegistryServer
    token: str
    upstreams: dict[str, Distribution | RegistryServer]
    realm: TokenRealm
    images: dict[str, dict[str, Pushed]]  # prefix -> "multi"/"three" -> pushed

    def stop_upstreams(self) -> None:
        for upstream in self.upstreams.values():
            upstream.stop()
        self.realm.stop()


def _seed(base: str, authorization: str | None, names: str = "library") -> dict[str, Pushed]:
    return {"multi": push_multiarch(base, f"{names}/multi", "latest", authorization=authorization),
            "three": push_image(base, f"{names}/three", "v1", layers=3, layer_size=200_000,
                                authorization=authorization)}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_tool("htpasswd")
    root = tmp_path_factory.mktemp("pull-through")
    realm = TokenRealm(root / "realm", "hub-user", SECRETS["hub"]).start()
    a = Distribution(root / "a", credentials=("a-user", SECRETS["a"]))
    hub = Distribution(root / "hub", realm=realm)
    b = RegistryServer(root / "b", env_overrides={"SVC_AUTH_ENABLED": "true"}, workers=1)
    (root / "b").mkdir()
    htpasswd_file(root / "b" / "users.htpasswd", "b-user", SECRETS["b"])
    started: list[Distribution | RegistryServer] = []
    cache = RegistryServer(root / "cache", env_overrides={
        "SVC_AUTH_ENABLED": "true",
        # The credentials come from the environment, as the documentation advises, not from the file.
        **{f"SVC_PROXY_{n}_PASSWORD": SECRETS[prefix] for n, prefix in enumerate(("a", "b", "hub"))},
    }, workers=2)
    try:
        for upstream in (a, hub, b):
            try:
                upstream.start()
            except UpstreamUnavailable as exc:
                pytest.skip(str(exc))
            started.append(upstream)
        images = {
            "a": _seed(a.url, a.authorization()),
            "b": _seed(b.url, basic("b-user", SECRETS["b"])),
            "hub": {"multi": push_multiarch(hub.url, "library/multi", "latest",
                                            authorization=hub.authorization("library/multi")),
                    "three": push_image(hub.url, "library/three", "v1", layers=3, layer_size=200_000,
                                        authorization=hub.authorization("library/three"))},
        }
        (root / "cache").mkdir()
        htpasswd_file(root / "cache" / "users.htpasswd", "alice", "wonderland")
        # tag_ttl_seconds = 0: every pull by tag asks the upstream, so the outage below is felt.
        (root / "cache" / "config.toml").write_text("".join(
            f'[[proxy]]\nprefix = "{prefix}"\nurl = "{upstream.url}"\nhost = "{host}"\n'
            f'username = "{prefix}-user"\ntag_ttl_seconds = 0\n\n'
            for prefix, upstream, host in (("a", a, "a.example"), ("b", b, "b.example"), ("hub", hub, "docker.io"))))
        cache.start()
        started.append(cache)
        token = cache.manage("createtoken", "--username", "alice", "--role", "read").stdout.strip()
        assert token.startswith("svc_"), token
        yield World(cache, token, {"a": a, "b": b, "hub": hub}, realm, images)
    finally:
        for server in started:
            server.stop()
        realm.stop()


def _skopeo_copy(skopeo: Skopeo, world: World, reference: str, dest: Path, *extra: str) -> str:
    """Copy into an OCI layout; the digest of what it holds (the index with --all)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    skopeo.run("copy", *extra, "--src-tls-verify=false", "--src-creds", f"token:{world.token}",
               f"docker://{world.cache.host}/{reference}", f"oci:{dest}:pulled")
    return json.loads((dest / "index.json").read_text())["manifests"][0]["digest"]


@dataclass
class Podman:
    command: list[str]
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.command, *args], capture_output=True, text=True, env=self.env, timeout=300)


@pytest.fixture
def podman() -> Iterator[Podman]:
    binary = require_tool("podman")
    root = Path(tempfile.mkdtemp(prefix="podman-", dir="/tmp"))  # its runroot path must be short
    (root / "xdg").mkdir()
    yield Podman([binary, "--root", str(root / "storage"), "--runroot", str(root / "run"), "--storage-driver", "vfs"],
                 {**os.environ, "HOME": str(root), "XDG_RUNTIME_DIR": str(root / "xdg")})
    shutil.rmtree(root, ignore_errors=True)


def _podman_pull(podman: Podman, world: World, reference: str) -> list[str]:
    """Pull; the digests podman recorded for the image (its own and its repository digests)."""
    image = f"{world.cache.host}/{reference}"
    pulled = podman.run("pull", "--tls-verify=false", "--creds", f"token:{world.token}", "--platform", "linux/amd64",
                        image)
    assert pulled.returncode == 0, pulled.stderr
    shown = podman.run("image", "inspect", "--format", "{{.Digest}} {{range .RepoDigests}}{{.}} {{end}}", image)
    return [word.rpartition("@")[2] for word in shown.stdout.split()]


def _pull_everything(skopeo: Skopeo, podman: Podman, world: World, scratch: Path) -> None:
    for prefix, images in world.images.items():
        multi, three = images["multi"], images["three"]
        raw = skopeo.run("inspect", "--raw", "--tls-verify=false", "--creds", f"token:{world.token}",
                         f"docker://{world.cache.host}/{prefix}/library/multi:latest").stdout.encode()
        assert "sha256:" + hashlib.sha256(raw).hexdigest() == multi.digest
        # skopeo re-encodes an index it copies (compact JSON), but not the images it lists.
        layout = scratch / f"{prefix}-multi"
        copied = _skopeo_copy(skopeo, world, f"{prefix}/library/multi:latest", layout, "--all")
        index = json.loads((layout / "blobs" / "sha256" / copied.split(":")[1]).read_bytes())
        assert [child["digest"] for child in index["manifests"]] == multi.children
        for child in multi.children:
            assert (layout / "blobs" / "sha256" / child.split(":")[1]).exists()
        layout = scratch / f"{prefix}-three"
        assert _skopeo_copy(skopeo, world, f"{prefix}/library/three:v1", layout) == three.digest
        for digest, data in three.blobs.items():
            assert (layout / "blobs" / "sha256" / digest.split(":")[1]).read_bytes() == data
        assert three.digest in _podman_pull(podman, world, f"{prefix}/library/three:v1")
        assert multi.digest in _podman_pull(podman, world, f"{prefix}/library/multi:latest")


def _get(world: World, path: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(world.cache.url + path, headers={
        "Authorization": f"Bearer {world.token}", "Accept": ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_pulls_through_each_prefix_then_from_the_cache_with_the_upstreams_down(
        world: World, skopeo: Skopeo, podman: Podman, tmp_path: Path) -> None:
    _pull_everything(skopeo, podman, world, tmp_path / "online")
    assert world.realm.requests, "the token-flow upstream was never asked for a token"
    for prefix in ("a", "hub"):  # skopeo and podman pulled each blob; the upstream sent it once
        upstream = world.upstreams[prefix]
        assert isinstance(upstream, Distribution)
        for digest in world.images[prefix]["three"].blobs:
            assert upstream.served("GET", f"/v2/library/three/blobs/{digest}", 200) == 1

    world.stop_upstreams()
    shutil.rmtree(skopeo.env["HOME"], ignore_errors=True)
    offline = Skopeo(skopeo.binary, tmp_path / "skopeo-offline")
    podman.run("rmi", "--all", "--force")
    _pull_everything(offline, podman, world, tmp_path / "offline")
    status, headers, _ = _get(world, "/v2/a/library/three/manifests/v1")
    assert status == 200 and headers["Warning"].startswith('299 - "the upstream could not confirm this tag')

    for path in ("/v2/a/library/never/manifests/v1", "/v2/hub/library/never/manifests/latest",
                 "/v2/b/library/never/manifests/v1", f"/v2/b/library/three/blobs/sha256:{'e' * 64}"):
        status, headers, body = _get(world, path)
        assert status in (502, 503), (path, status, body)
        assert json.loads(body)["errors"][0]["code"] == "UNAVAILABLE" and int(headers["Retry-After"]) > 0
    failed = offline.run("copy", "--src-tls-verify=false", "--src-creds", f"token:{world.token}",
                         f"docker://{world.cache.host}/a/library/never:v1", f"oci:{tmp_path / 'never'}:x",
                         check=False)
    assert failed.returncode != 0


def test_upstream_credentials_appear_nowhere(world: World) -> None:
    status, _, metrics = _get(world, "/metrics")
    assert status == 200 and b"registry_proxy_misses_total" in metrics
    texts = [metrics.decode(), world.cache.log_path.read_text(errors="replace")]
    texts += [_get(world, path)[2].decode() for path in (
        "/v2/a/library/gone/manifests/v1", "/v2/hub/library/gone/manifests/v1")]
    for prefix, secret in SECRETS.items():
        for text in texts:
            assert secret not in text
            assert basic(f"{prefix}-user", secret).split()[1] not in text
    for issued in world.realm.issued:
        assert all(issued not in text for text in texts)
