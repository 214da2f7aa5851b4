"""Replication under gunicorn, to real registries: the CNCF registry 2.8.2 (htpasswd) and a second
instance of this one. Event pushes arrive within seconds with the same digests, deletes too; an
outage of the destination loses nothing and keeps each tag's order; a kill -9 in the middle of a
large layer resumes the job without sending again what the destination already had."""
from __future__ import annotations

import hashlib
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support.auth import write_htpasswd
from tests.support.counting_proxy import CountingProxy
from tests.support.images import OCI_INDEX, OCI_MANIFEST, build_multiarch
from tests.support.ports import free_port
from tests.support.receiver import Receiver
from tests.support.relay import relay
from tests.support.proxy_fixtures import start_upstream  # noqa: F401  (a fixture)
from tests.support.upstreams import basic, layer, push_blob, push_image, \
    push_manifest

pytestmark = pytest.mark.e2e
USER, PASSWORD = "replicator", "dest-secret-1"
ACCEPT = f"{OCI_MANIFEST}, {OCI_INDEX}"


def policy(name: str, url: str, **keys: Any) -> str:
    lines = ["[[replication]]", f'name = "{name}"', f'url = "{url}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


def configure(workdir: Path, *tables: str) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.toml").write_text("\n".join(tables))


def digest_at(base: str, name: str, reference: str, authorization: str | None = None) -> str | None:
    headers = {"Accept": ACCEPT} | ({"Authorization": authorization} if authorization else {})
    request = urllib.request.Request(f"{base}/v2/{name}/manifests/{reference}", method="HEAD", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.headers["Docker-Content-Digest"]
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_config(manifest: bytes) -> bytes:
    return b"x" * json.loads(manifest)["config"]["size"]


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - started


def test_a_skopeo_push_with_a_signature_and_a_delete_reach_both_registries(start_registry, start_upstream, skopeo,
                                                                           tmp_path: Path) -> None:
    cncf = start_upstream("cncf", credentials=(USER, PASSWORD))
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    write_htpasswd(other_dir / "users.htpasswd", {USER: PASSWORD})
    other = start_registry(name="other", SVC_AUTH_ENABLED="true")
    configure(tmp_path / "server",
              policy("to-cncf", cncf.url, repositories=["team/*"], deletes=True),
              policy("to-other", other.url, repositories=["team/*"], deletes=True, username=USER))
    # The credentials from the environment, as a deployment's secrets come.
    source = start_registry(SVC_REPLICATION_0_USERNAME=USER, SVC_REPLICATION_0_PASSWORD=PASSWORD,
                            SVC_REPLICATION_1_PASSWORD=PASSWORD)
    image = build_multiarch(tmp_path / "image", tag="v1")
    index = json.loads((image.layout / "blobs" / "sha256" / image.digest.split(":")[1]).read_bytes())
    skopeo.run("copy", "--all", "--dest-tls-verify=false", f"oci:{image.layout}:v1",
               f"docker://{source.host}/team/app:v1")
    push_blob(source.url, "team/app", b"{}")
    index_size = len((image.layout / "blobs" / "sha256" / image.digest.split(":")[1]).read_bytes())
    signature = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2, "digest": sha256(b"{}")},
        "layers": [], "subject": {"mediaType": OCI_INDEX, "digest": image.digest, "size": index_size},
        "annotations": {"dev.cosignproject.cosign/signature": "MEUCIQ..."}}).encode()
    signed = push_manifest(source.url, "team/app", sha256(signature), signature, OCI_MANIFEST)
    expected = [image.digest, signed] + [child["digest"] for child in index["manifests"]]
    targets = [(cncf.url, basic(USER, PASSWORD)), (other.url, basic(USER, PASSWORD))]

    def arrived() -> bool:
        return all(digest_at(base, "team/app", digest, auth) == digest
                   for base, auth in targets for digest in expected) \
            and all(digest_at(base, "team/app", "v1", auth) == image.digest for base, auth in targets)

    took = wait_until(arrived, 30, "the image, its platform images and its signature at both registries")
    print(f"a skopeo push with a signature at both registries after {took:.1f} s")
    assert took < 10, f"arrived after {took:.1f} s"

    request = urllib.request.Request(f"{source.url}/v2/team/app/manifests/v1", method="DELETE")
    assert urllib.request.urlopen(request, timeout=10).status == 202
    wait_until(lambda: all(digest_at(base, "team/app", "v1", auth) is None for base, auth in targets), 30,
               "the tag delete at both registries")
    # The registry logs a request once it has answered it: the tag can be gone before its line is there.
    wait_until(lambda: cncf.served("DELETE", f"/v2/team/app/manifests/{image.digest}") > 0, 10,
               "the delete by digest in the CNCF registry's log")
    assert cncf.served("DELETE", "/v2/team/app/manifests/v1", 400) == 1  # it deletes no tag alone
    assert cncf.served("DELETE", f"/v2/team/app/manifests/{image.digest}", 202) == 1
    log = source.log_path.read_text()
    assert PASSWORD not in log and basic(USER, PASSWORD).split()[1] not in log
    assert source.metric("registry_replication_items_total", policy="to-cncf") >= 2
    assert source.metric("registry_replication_failures_total", policy="to-other") == 0


def test_an_outage_of_the_destination_loses_nothing_and_keeps_each_tags_order(start_registry,
                                                                              tmp_path: Path) -> None:
    receiver = Receiver().start()  # the destination's own webhook: the order changes arrive in
    try:
        configure(tmp_path / "dest", f'[[notifications]]\nname = "order"\nurl = "{receiver.url}"\nevents = ["push"]\n')
        dest = start_registry(name="dest")
        # The destination is reached through a port where nothing listens during the outage, and a
        # relay to it afterwards: it is back at once, not after a server's start-up on a loaded machine
        # (which the backoff, doubling meanwhile, would make tens of seconds).
        port = free_port()
        configure(tmp_path / "server", policy("dr", f"http://127.0.0.1:{port}"))
        source = start_registry()
        pushed: dict[str, list[str]] = {}
        with ThreadPoolExecutor(5) as pool:  # the five tags at once, each tag's pushes in turn
            for round_ in range(4):
                seeds = [f"{tag}{round_}" for tag in "abcde"]
                images = pool.map(lambda seed: push_image(source.url, "team/app", seed[0], layers=1, layer_size=1024,
                                                          seed=seed), seeds)
                for seed, image in zip(seeds, images, strict=True):
                    pushed.setdefault(seed[0], []).append(image.digest)
        wait_until(lambda: source.metric("registry_replication_failures_total", policy="dr") >= 1, 30,
                   "a failed attempt against the unreachable destination")
        assert source.metric("registry_replication_pending", policy="dr") == 20
        assert source.metric("registry_replication_lag_seconds", policy="dr") > 0
        with relay(("127.0.0.1", port), ("127.0.0.1", dest.port)):
            # The backoff doubles while the pushes go on: up to 16 s or so of it here, more when loaded.
            took = wait_until(lambda: source.metric("registry_replication_pending", policy="dr") == 0, 120,
                              "the 20 pushes at the destination")
        print(f"the 20 pushes at the destination {took:.1f} s after it came back")
        for tag, digests in pushed.items():
            assert digest_at(dest.url, "team/app", tag) == digests[-1]
        events = receiver.wait_for(lambda got: sum(1 for e in got if e["target"].get("tag")) >= 20, timeout=30)
        arrived: dict[str, list[str]] = {}
        for event in events:
            if event["target"].get("tag"):
                arrived.setdefault(event["target"]["tag"], []).append(event["target"]["digest"])
        assert arrived == pushed
    finally:
        receiver.stop()


def test_a_kill_9_mid_layer_resumes_without_sending_again(start_registry, start_upstream, tmp_path: Path) -> None:
    cncf = start_upstream("cncf")
    proxy = CountingProxy(cncf.port).start()
    try:
        # The bandwidth limit, not the size, keeps the layer in flight (about five seconds at 8 MiB/s)
        # so that the kill lands in its middle; over 32 MiB, it goes in recorded pieces.
        configure(tmp_path / "server", policy("dr", proxy.url, max_bytes_per_second=8 * 1024 * 1024))
        source = start_registry()
        small = [layer(256 * 1024) for _ in range(3)]
        big = bytes(40 * 1024 * 1024)  # zeros: random bytes cost the loaded machine more than they show
        from tests.support.upstreams import image_manifest

        manifest, blobs = image_manifest([*small, big], "resume")
        for data in blobs.values():
            push_blob(source.url, "team/big", data)
        total = sum(len(data) for data in blobs.values())
        del big, blobs
        digest = push_manifest(source.url, "team/big", "v1", manifest, OCI_MANIFEST)
        wait_until(lambda: proxy.sent > total // 2, 60, "half of the image at the destination")
        source.kill()
        at_kill = proxy.sent
        source.start()
        wait_until(lambda: digest_at(cncf.url, "team/big", "v1") == digest, 90, "the image at the destination")
        # What went twice is part of the layer in flight, never a blob the destination had taken
        # (distribution drops an upload whose PATCH was cut midway, so that layer starts again).
        completed = sum(len(data) for data in small) + len(manifest_config(manifest))
        resent = proxy.sent - total
        assert resent < at_kill - completed + 64 * 1024, (proxy.sent, total, at_kill)
        for digest_ in [*(sha256(data) for data in small), json.loads(manifest)["config"]["digest"]]:
            uploads = [line for line in cncf.log_path.read_text().splitlines()
                       if '"PUT /v2/team/big/blobs/uploads/' in line and digest_.replace(":", "%3A") in line]
            assert len(uploads) == 1, (digest_, uploads)
        # The tag is visible before the registry logs the PUT that set it (it logs once it has answered).
        wait_until(lambda: cncf.served("PUT", "/v2/team/big/manifests/v1") > 0, 10, "the manifest PUT's log line")
        assert cncf.served("PUT", "/v2/team/big/manifests/v1", 201) == 1
    finally:
        proxy.stop()
