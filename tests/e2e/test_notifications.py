"""Webhooks under gunicorn: a skopeo push and a delete reach a local receiver signed, and nothing is
lost while the receiver is down and the registry is killed with SIGKILL, twice (once mid-delivery)."""
from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support.auth import write_htpasswd
from tests.support.images import OCI_MANIFEST, build_image
from tests.support.rawhttp import Client
from tests.support.receiver import Receiver
from tests.support.server import RegistryServer, free_port

pytestmark = pytest.mark.e2e
SECRET = "webhook-secret"


def notifications_config(workdir: Path, *entries: str) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.toml").write_text("\n".join(entries))


def endpoint(name: str, url: str, **keys: Any) -> str:
    lines = ["[[notifications]]", f'name = "{name}"', f'url = "{url}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


def manifest_of(layout: Path, digest: str) -> dict[str, Any]:
    return json.loads((layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes())


def metric(server: RegistryServer, name: str, endpoint_name: str) -> float:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    prefix = f'{name}{{endpoint="{endpoint_name}"}} '
    found = [line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)]
    return float(found[0]) if found else 0.0


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_a_skopeo_push_and_a_delete_reach_the_receiver_signed(start_registry, skopeo, tmp_path: Path) -> None:
    receiver = Receiver().start()
    try:
        workdir = tmp_path / "server"
        notifications_config(workdir, endpoint("ci", receiver.url, secret=SECRET, repositories="team/*"))
        write_htpasswd(workdir / "users.htpasswd", {"alice": "wonderland"})
        registry = start_registry(SVC_AUTH_ENABLED="true")
        image = build_image(tmp_path / "src", layers=3)
        manifest = manifest_of(image.layout, image.digest)
        blobs = {manifest["config"]["digest"], *image.layer_digests}
        skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", "alice:wonderland",
                   f"oci:{image.layout}:v1", f"docker://{registry.host}/team/app:v1")

        events = receiver.wait_for(lambda got: any(e["target"].get("tag") == "v1" for e in got))
        pushed = [e for e in events if e["action"] == "push"]
        assert {e["target"]["digest"] for e in pushed[:-1]} == blobs and len(pushed) == len(blobs) + 1
        tagged = pushed[-1]  # the manifest comes after the blobs it refers to
        assert tagged["target"] == {
            "mediaType": OCI_MANIFEST, "digest": image.digest, "size": tagged["target"]["size"],
            "length": tagged["target"]["size"], "repository": "team/app", "tag": "v1",
            "url": f"http://{registry.host}/v2/team/app/manifests/{image.digest}",
        }
        for event in pushed:
            assert event["actor"] == {"name": "alice"}
            assert event["request"]["method"] in ("PUT", "POST") and event["request"]["useragent"]
            assert event["request"]["addr"].startswith("127.0.0.1:")
            assert event["source"]["addr"].endswith(f":{registry.port}")

        skopeo.run("delete", "--tls-verify=false", "--creds", "alice:wonderland",
                   f"docker://{registry.host}/team/app:v1")
        events = receiver.wait_for(lambda got: got[-1]["action"] == "delete")
        assert events[-1]["target"] == {"repository": "team/app", "digest": image.digest}
        assert events[-1]["request"]["method"] == "DELETE"

        assert receiver.deliveries and all(d.signed_with(SECRET) for d in receiver.deliveries)
        assert {d.headers["content-type"] for d in receiver.deliveries} == {
            "application/vnd.docker.distribution.events.v1+json"}
        assert len({e["id"] for e in events}) == len(events)  # nothing twice without a crash
    finally:
        receiver.stop()


def order_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each event once, at its first arrival: a batch sent again after a crash repeats ids."""
    seen, result = set(), []
    for event in events:
        if event["id"] not in seen:
            seen.add(event["id"])
            result.append(event)
    return result


def test_every_event_arrives_in_order_after_an_outage_and_two_kill_9s(start_registry, skopeo,
                                                                      tmp_path: Path) -> None:
    port = free_port()
    receiver = Receiver(port=port)  # down until the end
    audit = Receiver().start()      # up all along: its events do not wait for the other endpoint's
    try:
        workdir = tmp_path / "server"
        notifications_config(workdir, endpoint("ci", receiver.url, secret=SECRET),
                             endpoint("audit", audit.url, events=["delete"]))
        registry = start_registry()
        images = {tag: build_image(tmp_path / tag, tag=tag, layers=2, seed=tag) for tag in ("v1", "v2", "v3")}

        def push(tag: str) -> None:
            skopeo.run("copy", "--dest-tls-verify=false", f"oci:{images[tag].layout}:{tag}",
                       f"docker://{registry.host}/team/app:{tag}")

        push("v1")
        push("v2")
        assert Client(registry.host).request("DELETE", "/v2/team/app/manifests/v1").status == 202
        wait_until(lambda: metric(registry, "registry_notifications_failed_total", "ci") >= 1, 30,
                   "a failed delivery to the dead receiver")
        audit.wait_for(lambda got: len(got) == 1, timeout=30)
        # The receiver takes an event in before it answers: until the registry has recorded that
        # answer, a kill would rightly have the event sent again (a race a busy machine loses).
        wait_until(lambda: metric(registry, "registry_notifications_pending", "audit") == 0, 30,
                   "the registry to record the audit delivery")

        registry.kill()  # SIGKILL: no worker gets to finish anything
        registry.start()
        push("v3")
        assert metric(registry, "registry_notifications_pending", "ci") == 13

        # The receiver comes back slow: the registry is killed again while a delivery is in flight.
        receiver.delay = 5.0
        receiver.start()
        wait_until(lambda: bool(receiver.attempts), 60, "a delivery attempt to the slow receiver")
        registry.kill()
        receiver.delay = 0.0
        registry.start()

        events = order_of(receiver.wait_for(lambda got: len(order_of(got)) == 13, timeout=120))
        marks = [(e["action"], e["target"].get("tag")) for e in events if e["target"].get("tag")]
        assert marks == [("push", "v1"), ("push", "v2"), ("delete", "v1"), ("push", "v3")]
        # Each image's blobs come after the previous change and before its own manifest.
        tagged = [e for e in events if e["target"].get("tag")]
        positions = {mark: events.index(e) for mark, e in zip(marks, tagged, strict=True)}
        for tag, after in (("v1", -1), ("v2", positions[("push", "v1")]), ("v3", positions[("delete", "v1")])):
            manifest = manifest_of(images[tag].layout, images[tag].digest)
            blobs = {manifest["config"]["digest"], *images[tag].layer_digests}
            found = [i for i, e in enumerate(events) if e["target"].get("digest") in blobs and e["action"] == "push"]
            assert len(found) == 3 and all(after < i < positions[("push", tag)] for i in found), (tag, found)
        # The receiver took in the batch in flight at the kill, but the registry never saw its answer:
        # the restarted registry sends the same events again (at least once; ids tell them apart).
        wait_until(lambda: len(receiver.deliveries) >= 2, 60, "the batch in flight at the kill, sent again")
        first, again = receiver.deliveries[:2]
        assert [e["id"] for e in again.events] == [e["id"] for e in first.events]
        assert all(d.signed_with(SECRET) for d in receiver.deliveries)
        wait_until(lambda: metric(registry, "registry_notifications_pending", "ci") == 0, 10, "an empty outbox")
        assert metric(registry, "registry_notifications_expired_total", "ci") == 0
        assert [e["target"] for e in audit.events()] == [{"repository": "team/app", "tag": "v1"}]
    finally:
        receiver.stop()
        audit.stop()
