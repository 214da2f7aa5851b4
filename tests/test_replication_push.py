"""Push replication to a real CNCF registry (htpasswd): exact copies, referrers after their subject,
deletes by digest where tags cannot be deleted, nothing sent twice, items in order per tag."""
from __future__ import annotations

import hashlib
import json
import logging
import urllib.request

import pytest
from django.test import Client
from django.utils import timezone

from replication import queries
from replication.models import Item, Job, PolicyState
from tests.support.proxy_fixtures import start_upstream  # noqa: F401
from tests.support.registry_client import (
    OCI_INDEX,
    OCI_MANIFEST,
    digest_of,
    make_index,
    make_manifest,
    push_blob,
    push_image,
    push_manifest,
)
from tests.support.replication import policy_entry, run_until_idle
from tests.support.upstreams import Distribution, basic

pytestmark = pytest.mark.django_db(transaction=True)
USER, PASSWORD = "replicator", "s3cret-pass"


@pytest.fixture(autouse=True)
def forget_credentials() -> None:
    from replication import remote

    remote._CREDENTIALS._headers.clear()


@pytest.fixture
def dest(start_upstream) -> Distribution:  # noqa: F811
    return start_upstream("dest", credentials=(USER, PASSWORD))


@pytest.fixture
def policy(settings, dest: Distribution):  # type: ignore[no-untyped-def]
    def configure(**keys: object) -> dict[str, object]:
        entry = policy_entry(**({"url": dest.url, "username": USER, "password": PASSWORD} | keys))
        settings.REPLICATION = [entry]
        return entry
    return configure


def remote_digest(dest: Distribution, name: str, reference: str) -> str | None:
    request = urllib.request.Request(f"{dest.url}/v2/{name}/manifests/{reference}", method="GET", headers={
        "Authorization": basic(USER, PASSWORD), "Accept": f"{OCI_MANIFEST}, {OCI_INDEX}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return "sha256:" + hashlib.sha256(response.read()).hexdigest()
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


def test_it_pushes_a_tagged_image_byte_for_byte(client: Client, dest: Distribution, policy) -> None:
    policy(repositories=["team/*"])
    _body, digest = push_image(client, "team/app", "v1", layers=[b"a" * 3000, b"b" * 5000])
    push_image(client, "other/app", "v1")  # not the policy's
    run_until_idle()
    assert remote_digest(dest, "team/app", "v1") == digest
    assert remote_digest(dest, "other/app", "v1") is None
    state = PolicyState.objects.get(name="dr")
    assert state.items == 1 and state.bytes > 8000 and state.failures == 0
    assert Job.objects.get().state == "succeeded"


def test_a_tag_filter_and_a_prefix(client: Client, dest: Distribution, policy) -> None:
    policy(tags=["^v[0-9]"], destination_prefix="mirror/dc1")
    _body, release = push_image(client, "team/app", "v2")
    push_image(client, "team/app", "latest")
    run_until_idle()
    assert remote_digest(dest, "mirror/dc1/team/app", "v2") == release
    assert remote_digest(dest, "mirror/dc1/team/app", "latest") is None


def test_an_index_its_images_and_a_signature_referrer(client: Client, dest: Distribution, policy) -> None:
    policy()
    children = []
    for arch in ("amd64", "arm64"):
        config = json.dumps({"architecture": arch, "os": "linux"}).encode()
        layer = arch.encode() * 1000
        push_blob(client, "team/multi", config)
        push_blob(client, "team/multi", layer)
        child = make_manifest(config, [layer])
        push_manifest(client, "team/multi", digest_of(child), child)
        children.append(child)
    index = make_index(children)
    index_digest = push_manifest(client, "team/multi", "v1", index, OCI_INDEX)
    push_blob(client, "team/multi", b"{}")
    signature = make_manifest(b"{}", [], subject=None, artifact_type="application/vnd.dev.cosign.artifact.sig.v1+json",
                              config_media_type="application/vnd.oci.empty.v1+json")
    doc = json.loads(signature)
    doc["subject"] = {"mediaType": OCI_INDEX, "digest": index_digest, "size": len(index)}
    signature = json.dumps(doc).encode()
    signature_digest = push_manifest(client, "team/multi", digest_of(signature), signature)
    run_until_idle()
    assert remote_digest(dest, "team/multi", "v1") == index_digest
    for child in children:
        assert remote_digest(dest, "team/multi", digest_of(child)) == digest_of(child)
    assert remote_digest(dest, "team/multi", signature_digest) == signature_digest
    # distribution 2.8 has no referrers API: the referrer is listed under the spec's fallback tag.
    fallback = index_digest.replace(":", "-")
    request = urllib.request.Request(f"{dest.url}/v2/team/multi/manifests/{fallback}",
                                     headers={"Authorization": basic(USER, PASSWORD), "Accept": OCI_INDEX})
    with urllib.request.urlopen(request, timeout=10) as response:
        listed = json.loads(response.read())["manifests"]
    assert [m["digest"] for m in listed] == [signature_digest]


def test_a_rerun_sends_nothing(client: Client, dest: Distribution, policy) -> None:
    policy()
    push_image(client, "team/app", "v1", layers=[b"x" * 10000])
    run_until_idle()
    sent = PolicyState.objects.get(name="dr").bytes
    uploads_before = dest.served("POST", "/v2/team/app/blobs/uploads/")
    queries.create_job("dr", "manual", timezone.now())
    run_until_idle()
    job = Job.objects.filter(trigger="manual").get()
    assert (job.state, job.done, job.skipped, job.bytes) == ("succeeded", 0, 1, 0)
    assert PolicyState.objects.get(name="dr").bytes == sent
    assert dest.served("POST", "/v2/team/app/blobs/uploads/") == uploads_before


def test_a_tag_delete_reaches_a_registry_that_deletes_only_by_digest(client: Client, dest: Distribution,
                                                                      policy) -> None:
    policy(deletes=True)
    _body, gone = push_image(client, "team/app", "v1", layers=[b"one"])
    _body, kept = push_image(client, "team/app", "v2", layers=[b"two"])
    client.put("/v2/team/app/manifests/also-v2", make_manifest(
        b'{"architecture":"amd64","os":"linux","ref":"v2"}', [b"two"]), content_type=OCI_MANIFEST)
    run_until_idle()
    assert client.delete("/v2/team/app/manifests/v1").status_code == 202
    assert client.delete("/v2/team/app/manifests/v2").status_code == 202
    run_until_idle()
    assert dest.served("DELETE", "/v2/team/app/manifests/v1", 400) == 1  # by tag: refused
    assert remote_digest(dest, "team/app", gone) is None  # so by digest
    # v2's manifest is also-v2 too: the tag stays there rather than delete also-v2 with it.
    assert remote_digest(dest, "team/app", "v2") == kept
    assert remote_digest(dest, "team/app", "also-v2") == kept
    notes = dict(Item.objects.filter(action="delete").values_list("tag", "note"))
    assert "still also-v2" in notes["v2"]


def test_changes_of_a_tag_arrive_in_order_after_an_outage(client: Client, dest: Distribution, policy,
                                                          settings) -> None:
    policy(url="http://127.0.0.1:9")  # nothing listens
    digests = [push_image(client, "team/app", "v1", layers=[f"round {n}".encode()])[1] for n in range(3)]
    from replication.feed import find
    from replication.runner import Runner

    runner = Runner(find("dr"))  # type: ignore[arg-type]
    runner.step()
    for _key, future in list(runner.running.values()):
        future.result()
    runner.close()
    state = PolicyState.objects.get(name="dr")
    assert state.attempts == 1 and "not reachable" in state.last_error and state.next_attempt_at
    assert Item.objects.filter(state="pending").count() == 3
    policy()  # the destination is back
    run_until_idle(ignore_backoff=True)
    assert remote_digest(dest, "team/app", "v1") == digests[-1]
    puts = [line for line in dest.log_path.read_text().splitlines() if '"PUT /v2/team/app/manifests/v1 ' in line]
    assert len(puts) == 3  # each change, in order (the last one stands)
    assert PolicyState.objects.get(name="dr").attempts == 0


def test_credentials_are_never_logged(client: Client, dest: Distribution, policy,
                                      caplog: pytest.LogCaptureFixture) -> None:
    policy(password="wrong-" + PASSWORD)
    push_image(client, "team/app", "v1")
    caplog.set_level(logging.DEBUG)
    from replication.feed import find
    from replication.runner import Runner

    runner = Runner(find("dr"))  # type: ignore[arg-type]
    runner.step()
    for _key, future in list(runner.running.values()):
        future.result()
    runner.close()
    item = Item.objects.get()
    assert item.attempts == 1 and "refused the credentials" in item.note
    text = caplog.text + item.note + PolicyState.objects.get(name="dr").last_error
    assert PASSWORD not in text and basic(USER, "wrong-" + PASSWORD).split()[1] not in text


def test_an_upload_location_on_another_host_gets_no_credentials(dest: Distribution, policy) -> None:
    from replication.feed import find
    from replication.remote import Remote, _CREDENTIALS

    policy()
    remote = Remote(find("dr"))  # type: ignore[arg-type]
    assert remote.has_blob("team/app", "sha256:" + "0" * 64) is False  # authorizes (Basic)
    seen: list[dict[str, str]] = []

    def record(method: str, url: str, headers: dict[str, str], body: object = None) -> None:
        seen.append(headers)
        raise LookupError("recorded, not sent")

    remote._request = record  # type: ignore[method-assign]
    for url in (f"{dest.url}/v2/team/app/blobs/uploads/x", "http://elsewhere.example:9/upload/x"):
        with pytest.raises(LookupError):
            remote._send("PATCH", "team/app", url, {})
    assert [("Authorization" in headers) for headers in seen] == [True, False]
    assert _CREDENTIALS.get("replication:dr", "repository:team/app:pull,push")


def test_a_blob_another_replicated_repository_holds_there_is_mounted(client: Client, dest: Distribution,
                                                                       policy) -> None:
    policy()
    shared = b"shared layer " * 1000
    push_image(client, "team/a", "v1", layers=[shared])
    run_until_idle()
    _body, digest = push_image(client, "team/b", "v1", layers=[shared])
    run_until_idle()
    assert remote_digest(dest, "team/b", "v1") == digest
    mount = "mount=" + digest_of(shared).replace(":", "%3A")
    mounts = [line for line in dest.log_path.read_text().splitlines()
              if '"POST /v2/team/b/blobs/uploads/?' in line and mount in line]
    assert len(mounts) == 1 and '" 201 ' in mounts[0], mounts
    assert not [line for line in dest.log_path.read_text().splitlines()
                if '"PUT /v2/team/b/blobs/uploads/' in line and digest_of(shared).split(":")[1] in line]


def test_a_tag_moved_at_the_destination_is_moved_back_by_a_push_policy(client: Client, dest: Distribution,
                                                                        policy) -> None:
    policy()
    _body, ours = push_image(client, "team/app", "v1", layers=[b"ours"])
    run_until_idle()
    theirs = make_manifest(b'{"architecture":"amd64","os":"linux","by":"someone else"}', [])
    authorization = basic(USER, PASSWORD)
    from tests.support import upstreams

    upstreams.push_blob(dest.url, "team/app", b'{"architecture":"amd64","os":"linux","by":"someone else"}',
                        authorization)
    upstreams.push_manifest(dest.url, "team/app", "v1", theirs, OCI_MANIFEST, authorization)
    assert remote_digest(dest, "team/app", "v1") == digest_of(theirs)
    queries.create_job("dr", "manual", timezone.now())
    run_until_idle()
    assert remote_digest(dest, "team/app", "v1") == ours
    assert Job.objects.get(trigger="manual").done == 1


def test_an_item_refused_five_times_is_failed_and_the_tags_next_change_goes_on(client: Client, dest: Distribution,
                                                                                policy, monkeypatch) -> None:
    from replication.remote import Remote, RemoteError

    policy()
    put = Remote.put_manifest
    refused: list[str] = []

    def refuse_the_first(self: Remote, repo: str, reference: str, body: bytes, media_type: str) -> dict[str, str]:
        if b"refused" in body:
            refused.append(reference)
            raise RemoteError("the destination refused the manifest (MANIFEST_INVALID)", transient=False)
        return put(self, repo, reference, body, media_type)

    monkeypatch.setattr(Remote, "put_manifest", refuse_the_first)
    push_image(client, "team/app", "v1", layers=[b"x"], annotations={"note": "refused"})
    _body, second = push_image(client, "team/app", "v1", layers=[b"y"])
    run_until_idle(ignore_backoff=True)
    assert len(refused) == 5
    first, last = Item.objects.filter(tag="v1").order_by("id")
    assert (first.state, first.attempts) == ("failed", 5) and "MANIFEST_INVALID" in first.note
    assert last.state == "done" and remote_digest(dest, "team/app", "v1") == second
    assert PolicyState.objects.get(name="dr").failures == 5


def test_a_429_with_retry_after_backs_the_policy_off_for_as_long(client: Client, policy) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Busy(BaseHTTPRequestHandler):
        def answer(self) -> None:
            self.send_response(429)
            self.send_header("Retry-After", "120")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD = do_POST = do_PUT = answer  # noqa: N815 (the http.server names)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        policy(url=f"http://127.0.0.1:{server.server_port}")
        push_image(client, "team/app", "v1")
        from replication.feed import find
        from replication.runner import Runner

        before = timezone.now()
        runner = Runner(find("dr"))  # type: ignore[arg-type]
        runner.step()
        for _key, future in list(runner.running.values()):
            future.result()
        runner.close()
    finally:
        server.shutdown()
        server.server_close()
    state = PolicyState.objects.get(name="dr")
    assert state.attempts == 1 and state.failures == 1
    # backoff(1) alone would be about a second: the Retry-After of 120 s is what holds.
    assert (state.next_attempt_at - before).total_seconds() >= 119
    assert Item.objects.get().state == "pending"


def test_items_failing_together_count_as_one_attempt_of_the_backoff(client: Client, policy) -> None:
    policy(url="http://127.0.0.1:9", concurrency=4)  # nothing listens
    for tag in ("a", "b", "c", "d"):
        push_image(client, "team/app", tag)
    from replication.feed import find
    from replication.runner import Runner

    before = timezone.now()
    runner = Runner(find("dr"))  # type: ignore[arg-type]
    runner.step()
    assert len(runner.running) == 4
    for _key, future in list(runner.running.values()):
        future.result()
    runner.close()
    state = PolicyState.objects.get(name="dr")
    # One attempt of the policy (four of its items at once), so the first backoff: not 2 ** 3 s.
    assert (state.attempts, state.failures) == (1, 1)
    assert (state.next_attempt_at - before).total_seconds() < 5
    assert Item.objects.filter(state="pending").count() == 4
