"""A large blob goes to the destination in recorded pieces: a run cut off midway resumes at the byte
the destination holds, and the blobs it completed before are not sent again."""
from __future__ import annotations

import pytest
from django.test import Client

from replication import push, remote
from replication.models import PolicyState, Upload
from replication.remote import RemoteError
from tests.support.proxy_fixtures import start_upstream  # noqa: F401
from tests.support.registry_client import push_image
from tests.support.replication import policy_entry, run_until_idle
from tests.support.upstreams import Distribution

pytestmark = pytest.mark.django_db(transaction=True)
CHUNK = 64 * 1024


def test_a_cut_upload_resumes_where_the_destination_stopped(client: Client, settings, start_upstream,  # noqa: F811
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    dest: Distribution = start_upstream("dest")
    settings.REPLICATION = [policy_entry(url=dest.url)]
    monkeypatch.setattr(push, "CHUNK", CHUNK)
    small, large = b"s" * 1000, bytes(range(256)) * (5 * CHUNK // 256)  # 5 pieces
    push_image(client, "team/app", "v1", layers=[small, large])
    real_patch, sent = remote.Remote.patch, []

    def cut_after_two(self, repo, location, stream, start, length):  # type: ignore[no-untyped-def]
        if len(sent) == 2:
            raise RemoteError("dest is not reachable (ConnectionRefused)", transient=True)
        sent.append(start)
        return real_patch(self, repo, location, stream, start, length)

    monkeypatch.setattr(remote.Remote, "patch", cut_after_two)
    from replication.feed import find
    from replication.runner import Runner

    runner = Runner(find("dr"))  # type: ignore[arg-type]
    runner.step()
    for _key, future in list(runner.running.values()):
        future.result()
    runner.close()
    assert Upload.objects.get().offset == 2 * CHUNK
    before = PolicyState.objects.get(name="dr").bytes
    monkeypatch.setattr(remote.Remote, "patch", real_patch)
    run_until_idle(ignore_backoff=True)
    assert not Upload.objects.exists()
    total = PolicyState.objects.get(name="dr").bytes
    # Everything went once: the config and the small layer before the cut, the large one in pieces.
    config = b'{"architecture":"amd64","os":"linux","ref":"v1"}'
    assert total == before + 3 * CHUNK == len(small) + len(large) + len(config)
    assert client.get("/v2/team/app/manifests/v1")["Docker-Content-Digest"] == dest_digest(dest)


def dest_digest(dest: Distribution) -> str:
    import urllib.request

    request = urllib.request.Request(f"{dest.url}/v2/team/app/manifests/v1", method="HEAD",
                                     headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["Docker-Content-Digest"]
