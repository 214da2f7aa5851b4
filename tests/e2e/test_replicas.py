"""Two replicas on PostgreSQL and S3 (Ceph RGW) behind HAProxy, round-robin per request, so that the
requests of one push alternate between replicas: nothing may depend on which one answers."""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.e2e.conftest import require_tool, running_postgres, running_rgw
from tests.faults.wire import MiB, Registry, digest
from tests.support.auth import write_htpasswd
from tests.support.cluster import Cluster
from tests.support.images import build_image
from tests.support.postgres import Postgres
from tests.support.rgw import RGW
from tests.support.server import read_access_log

pytestmark = pytest.mark.e2e
OCTET = "application/octet-stream"


# A PostgreSQL and an RGW of this module's own (not the session's, tests/e2e/conftest.py): its tests
# push for minutes, and on the session's they would run in one pytest-xdist process, one after the
# other, with every other test that uses those (tests/support/parallel.py). Starting them costs about
# 2 s of CPU (RGW's 13 s are mostly waiting for its daemons).
@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    yield from running_postgres()


@pytest.fixture(scope="module")
def rgw() -> Iterator[RGW]:
    yield from running_rgw()


@pytest.fixture
def start_cluster(postgres: Postgres, rgw: RGW, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    require_tool("haproxy")
    started: list[Cluster] = []

    def start(**env: str) -> Cluster:
        cluster = Cluster(postgres, rgw, tmp_path / "cluster")
        started.append(cluster)
        return cluster.start(**env)

    yield start
    for cluster in started:
        cluster.stop()


def fetch_blob(client: Registry, name: str, blob_digest: str, headers: dict[str, str] | None = None
               ) -> tuple[int, bytes]:
    """GET a blob as registry clients do: a 307 is followed to the store's presigned URL."""
    reply = client.request("GET", f"/v2/{name}/blobs/{blob_digest}", headers=headers)
    if reply.status != 307:
        return reply.status, reply.body
    request = urllib.request.Request(reply.header("Location"), headers=headers or {})
    with urllib.request.urlopen(request) as response:
        return response.status, response.read()


def test_skopeo_pushes_through_both_replicas_and_the_bytes_live_only_in_the_bucket(start_cluster, skopeo,
                                                                                    tmp_path) -> None:
    cluster = start_cluster()
    image = build_image(tmp_path / "src", layers=3, layer_size=256 * 1024)
    skopeo.run("copy", "--dest-tls-verify=false", f"oci:{image.layout}:v1", f"docker://{cluster.host}/team/app:v1")
    out = tmp_path / "out"
    skopeo.run("copy", "--src-tls-verify=false", f"docker://{cluster.host}/team/app:v1", f"oci:{out}:v1")
    index = json.loads((out / "index.json").read_text())
    assert index["manifests"][0]["digest"] == image.digest
    pushed = sorted(p.name for p in (image.layout / "blobs" / "sha256").iterdir())
    assert sorted(p.name for p in (out / "blobs" / "sha256").iterdir()) == pushed

    # Every blob is an object in the bucket, and no replica keeps any of it on its disk.
    # Blob data objects are blobs/<algorithm>/<xx>/<hex>/data; anything else under blobs/ is not one.
    stored = {info.path.split("/")[3] for info in cluster.driver().walk("blobs") if info.path.endswith("/data")}
    assert set(pushed) - {image.digest.split(":")[1]} <= stored
    for replica in cluster.replicas:
        assert not (replica.workdir / "registry" / "blobs").exists()
        assert not (replica.workdir / "registry" / "uploads").exists()

    # The requests of each upload session were spread over both replicas.
    served_by: dict[str, set[int]] = defaultdict(set)
    for n in range(2):
        for entry in read_access_log(cluster.access_log(n)):
            if "/blobs/uploads/" in entry.path and entry.path.rsplit("/", 1)[1]:
                served_by[entry.path.rsplit("/", 1)[1]].add(n)
    assert len(served_by) >= 4 and any(replicas == {0, 1} for replicas in served_by.values()), served_by
    assert set().union(*served_by.values()) == {0, 1}

    # The store's secret is in no log line, no /ready answer, no metric and no error body.
    client = Registry(cluster.host)
    said = [client.request("GET", path).body for path in ("/ready", "/metrics", "/v2/team/app/blobs/sha256:0")]
    said += [r.log_path.read_bytes() for r in cluster.replicas]
    assert not any(cluster.rgw.secret_key.encode() in text for text in said)


def test_an_upload_survives_its_replica_dying_between_two_chunks_without_reading_back(start_cluster) -> None:
    cluster = start_cluster()
    client = Registry(cluster.host)
    blob, chunk = os.urandom(64 * MiB), 8 * MiB

    def send(location: str, start: int) -> str:
        reply = client.request("PATCH", location, blob[start:start + chunk],
                               {"Content-Range": f"{start}-{start + chunk - 1}", "Content-Type": OCTET})
        assert reply.status == 202, reply.body
        return reply.header("Location")

    location = client.request("POST", "/v2/team/big/blobs/uploads/").header("Location")
    for start in range(0, 4 * chunk, chunk):
        location = send(location, start)
    # The session's own objects: the readiness probes write and read theirs in uploads/ too.
    uploaded = f"/registry/uploads/{location.split('?')[0].rstrip('/').rsplit('/', 1)[1]}/"
    gets_before = cluster.rgw.requests(cluster.bucket, uploaded)
    cluster.replicas[0].kill()  # kill -9 of the whole process tree, between two PATCHes
    assert cluster.balancer is not None
    cluster.balancer.wait_down(1)  # as a load balancer does before sending it nothing more
    for start in range(4 * chunk, len(blob), chunk):
        location = send(location, start)
    done = client.request("PUT", f"{location}{'&' if '?' in location else '?'}digest={digest(blob)}")
    assert done.status == 201, done.body
    # The digest was checked from the saved hash state: no GET of any uploaded byte (RGW's log).
    assert cluster.rgw.requests(cluster.bucket, uploaded) == gets_before == 0
    assert cluster.rgw.requests(cluster.bucket, uploaded, "PUT") >= 8  # its parts: the log was read right
    status, body = fetch_blob(client, "team/big", digest(blob))
    assert status == 200 and hashlib.sha256(body).hexdigest() == digest(blob).split(":")[1]


def test_a_token_made_on_one_replica_works_on_the_other_until_revoked_there(start_cluster, tmp_path) -> None:
    cluster = start_cluster(SVC_AUTH_ENABLED="true",
                            SVC_AUTH_HTPASSWD_FILE=str(write_htpasswd(tmp_path / "users", {"alice": "pw"})))
    one, two = (Registry(r.host) for r in cluster.replicas)
    alice = {"username": "alice", "password": "pw"}

    def api(replica: Registry, path: str, body: dict[str, str]) -> Any:
        reply = replica.request("POST", path, json.dumps({**alice, **body}).encode(),
                                {"Content-Type": "application/json"})
        assert reply.status in (200, 201), reply.body
        return json.loads(reply.body)

    def answers(replica: Registry) -> set[int]:
        # A new connection each: over several requests both workers of the replica judge the token
        # (and keep whatever they remember of it).
        return {replica.request("GET", "/v2/_catalog", headers=bearer).status for _ in range(6)}

    made = api(one, "/api/tokens", {"role": "write"})
    bearer = {"Authorization": f"Bearer {made['token']}"}
    assert answers(one) == answers(two) == {200}
    assert api(two, "/api/tokens/revoke", {"hash_prefix": made["hash_prefix"]}) == {"revoked": made["hash_prefix"]}
    assert answers(one) == answers(two) == {401}


# The collections the test waits for, each overlapping at least OVERLAPPING acknowledged pushes (an
# image acknowledged while it ran). Alone on two cores one collection takes 3 to 4 s; a machine busy
# with other tests stretches it and the pushes alike.
COLLECTIONS, OVERLAPPING = 3, 5
# After each push a pusher rests as long as the push took, and at least PUSH_PAUSE. Back to back, the
# three overlapped 12 to 38 pushes a collection, and on a busy machine their load on the replica, RGW
# and PostgreSQL (which the collector shares) stretched the collections until the test ran into its
# cap. Resting keeps them pushing all through each collection at half their rate or less, on any
# machine: pushes and collections slow down alike (alone, 3 to 16 pushes overlapped a collection, and
# a fourth collection ran when one of the first three overlapped fewer than OVERLAPPING).
PUSH_PAUSE = 0.3


def test_collecting_on_one_replica_while_pushing_through_the_other_loses_nothing(start_cluster) -> None:
    cluster = start_cluster()
    pusher = Registry(cluster.replicas[1].host)
    pushed: list[tuple[str, list[str]]] = []
    acknowledged: list[tuple[float, float]] = []  # when each push (kept or deleted) began and ended
    failures: list[str] = []
    stop = threading.Event()

    def push(worker: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            name = f"gc/w{worker}"
            shared = b"shared base layer" * 1000
            layers = [shared, os.urandom(64 * 1024 + random.randrange(1024))]
            began = time.monotonic()
            try:
                manifest_digest, _ = pusher.push_image(name, f"t{n}", layers)
            except AssertionError as exc:  # the collector won a race: the client pushes again
                failures.append(str(exc)[:200])
                continue
            acknowledged.append((began, time.monotonic()))
            if n % 3 == 0:  # make garbage for the collector: an image deleted as soon as pushed
                assert pusher.request("DELETE", f"/v2/{name}/manifests/{manifest_digest}").status == 202
            else:
                pushed.append((name, [manifest_digest, *(digest(layer) for layer in layers)]))
            stop.wait(max(PUSH_PAUSE, time.monotonic() - began))

    collections: list[str] = []
    spans: list[tuple[float, float]] = []

    def overlapping(span: tuple[float, float]) -> int:
        return sum(1 for began, ended in list(acknowledged) if began < span[1] and ended > span[0])

    def enough() -> bool:
        return (len(pushed) >= 10 and any("removed blob" in c for c in collections)
                and sum(overlapping(span) >= OVERLAPPING for span in spans) >= COLLECTIONS)

    def collect() -> None:
        while not stop.is_set():
            began = time.monotonic()
            done = cluster.replicas[0].manage("garbagecollect", "--delete-untagged", "--grace-hours", "0")
            spans.append((began, time.monotonic()))
            collections.append(done.stdout + done.stderr)
            if enough():  # decided here, so that no further collection starts only to be waited for
                stop.set()

    workers = [threading.Thread(target=push, args=(w,)) for w in range(3)] + [threading.Thread(target=collect)]
    for thread in workers:
        thread.start()
    # Pushing goes on until COLLECTIONS whole collections have each overlapped OVERLAPPING pushes (the
    # collector stops everything then); a collection can take most of a minute on a busy machine.
    stop.wait(180)
    stop.set()
    for thread in workers:
        thread.join()

    overlaps = [overlapping(span) for span in spans]
    assert sum(n >= OVERLAPPING for n in overlaps) >= COLLECTIONS, (overlaps, len(pushed), len(failures))
    assert len(pushed) >= 10 and len(collections) >= 2, (len(pushed), len(collections))
    print(f"\n{len(collections)} collections overlapping {overlaps} acknowledged pushes; {len(pushed)} images kept, "
          f"{len(failures)} pushes lost a race to the collector and were pushed again")
    assert any("removed blob" in c for c in collections), collections[-1]
    reader = Registry(cluster.host)
    for name, (manifest_digest, *blob_digests) in pushed:
        assert reader.request("GET", f"/v2/{name}/manifests/{manifest_digest}").status == 200
        for blob_digest in blob_digests:
            status, body = fetch_blob(reader, name, blob_digest)
            assert status == 200 and digest(body) == blob_digest, (name, blob_digest, status)
    scrub = cluster.replicas[0].manage("scrub")
    assert scrub.returncode == 0 and "corrupt" not in scrub.stdout and "missing" not in scrub.stdout, scrub.stdout


def test_blob_gets_redirect_to_the_store_and_clients_follow_with_ranges(start_cluster, skopeo, tmp_path) -> None:
    cluster = start_cluster()
    image = build_image(tmp_path / "src", layers=2, layer_size=300 * 1024)
    skopeo.run("copy", "--dest-tls-verify=false", f"oci:{image.layout}:v1",
               f"docker://{cluster.host}/team/redirect:v1")
    layer_digest = json.loads((image.layout / "blobs" / "sha256" / image.digest.split(":")[1]).read_bytes()
                              )["layers"][0]["digest"]
    layer = (image.layout / "blobs" / "sha256" / layer_digest.split(":")[1]).read_bytes()
    client = Registry(cluster.host)
    reply = client.request("GET", f"/v2/team/redirect/blobs/{layer_digest}")
    assert reply.status == 307 and reply.header("Docker-Content-Digest") == layer_digest
    assert reply.header("Location").startswith(cluster.rgw.endpoint + "/")

    assert fetch_blob(client, "team/redirect", layer_digest, {"Range": "bytes=1000-1999"}) == (206, layer[1000:2000])
    curl = subprocess.run(["curl", "-sSfL", "-H", "Range: bytes=-10",
                           f"http://{cluster.host}/v2/team/redirect/blobs/{layer_digest}"],
                          capture_output=True, timeout=60)
    assert curl.returncode == 0 and curl.stdout == layer[-10:]
    out = tmp_path / "out"
    skopeo.run("copy", "--src-tls-verify=false", f"docker://{cluster.host}/team/redirect:v1", f"oci:{out}:v1")
    assert (out / "blobs" / "sha256" / layer_digest.split(":")[1]).read_bytes() == layer

    podman = require_tool("podman")
    root = Path(tempfile.mkdtemp(prefix="podman-", dir="/tmp"))  # its runroot must be short
    (root / "xdg").mkdir(parents=True)
    env = {**os.environ, "HOME": str(root), "XDG_RUNTIME_DIR": str(root / "xdg")}
    base = [podman, "--root", str(root / "storage"), "--runroot", str(root / "run"), "--storage-driver", "vfs"]
    pulled = subprocess.run([*base, "pull", "--tls-verify=false", f"{cluster.host}/team/redirect:v1"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert pulled.returncode == 0, pulled.stderr
    inspected = subprocess.run([*base, "image", "inspect", "--format", "{{.Digest}}",
                                f"{cluster.host}/team/redirect:v1"], capture_output=True, text=True, env=env)
    assert inspected.stdout.strip() == image.digest
    shutil.rmtree(root, ignore_errors=True)
