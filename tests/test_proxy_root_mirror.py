"""A root mirror: ``[[proxy]] prefix = ""`` makes the whole registry a read-only pull-through cache of
one upstream, as the CNCF registry's proxy mode is, so that Docker Engine's ``registry-mirrors`` (which
in 20.10 takes no path) can point at it. Names map one to one; pushes are refused with the 405 of any
cache; the catalog, the UI and eviction work on it; it is the only [[proxy]] entry, and no governance
rule can be configured beside it."""
from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from registry.models import Manifest, Repository
from registry.services import gc
from regsite import config
from tests.support.proxy_fixtures import fresh_upstream_state, proxy_entry, start_upstream, stored, upstream  # noqa: F401
from tests.support.registry_client import body_of, error_code, post_upload
from tests.support.ui_fixtures import plain_static  # noqa: F401  (the UI test needs no collectstatic)
from tests.support.upstreams import OCI_MANIFEST, push_image

ACCEPT = {"Accept": OCI_MANIFEST}
ROOT = '[[proxy]]\nprefix = ""\nurl = "https://registry-1.docker.io"\nhost = "docker.io"\n'
HUB = '[[proxy]]\nprefix = "hub"\nurl = "https://x.io"\n'


def _load(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return config.load({"SVC_CONFIG": str(path)})


def _refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(config.ConfigError) as caught:
        _load(tmp_path, text)
    return str(caught.value)


def test_an_empty_prefix_alone_is_taken(tmp_path) -> None:
    assert _load(tmp_path, ROOT)["proxy"][0]["prefix"] == ""


@pytest.mark.parametrize("text, where", [(ROOT + HUB, '[[proxy]] #2 "hub"'), (HUB + ROOT, "[[proxy]] #2")])
def test_a_root_mirror_is_the_only_cache(tmp_path, text, where) -> None:
    message = _refused(tmp_path, text)
    assert message.startswith(f"{where} prefix: ") and 'prefix = ""' in message and "only [[proxy]]" in message


@pytest.mark.parametrize("kind, rule", [
    ("retention", 'name = "keep"\nrepositories = "team/**"\nkeep_last = 3\n'),
    ("immutable", 'repositories = "**"\ntags = ["^v"]\n'),
    ("quota", 'repositories = "**"\nmax_bytes = "1GiB"\n'),
])
def test_no_governance_rule_beside_a_root_mirror(tmp_path, kind, rule) -> None:
    message = _refused(tmp_path, ROOT + f"[[{kind}]]\n{rule}")
    assert message.startswith(f"[[{kind}]] #1 ") and " repositories: " in message
    assert 'prefix = ""' in message and "read-only pull-through cache" in message


@pytest.fixture
def root(settings, upstream):  # type: ignore[no-untyped-def]
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="", url=upstream.url, host="docker.io")]
    return upstream


def _pull(client, name: str, tag: str, pushed) -> None:  # type: ignore[no-untyped-def]
    response = client.get(f"/v2/{name}/manifests/{tag}", headers=ACCEPT)
    assert response.status_code == 200 and response["Docker-Content-Digest"] == pushed.digest
    for digest, data in pushed.blobs.items():
        assert body_of(client.get(f"/v2/{name}/blobs/{digest}")) == data
    stored()


@pytest.mark.django_db(transaction=True)
def test_names_map_one_to_one(client, root) -> None:
    pushed = push_image(root.url, "library/busybox", "latest", layers=2)
    _pull(client, "library/busybox", "latest", pushed)
    assert Repository.objects.filter(name="library/busybox").exists()
    # Stored: the upstream is not asked again for a digest it already gave.
    root.stop()
    assert client.get(f"/v2/library/busybox/manifests/{pushed.digest}", headers=ACCEPT).status_code == 200
    assert client.get("/v2/_catalog").json()["repositories"] == ["library/busybox"]
    assert client.get("/v2/library/busybox/tags/list").json()["tags"] == ["latest"]


@pytest.mark.django_db(transaction=True)
def test_containerd_ns_of_its_host_is_served_and_of_another_registry_is_not(client, root) -> None:
    pushed = push_image(root.url, "library/alpine", "3", layers=1)
    response = client.get("/v2/library/alpine/manifests/3?ns=docker.io", headers=ACCEPT)
    assert response.status_code == 200 and response["Docker-Content-Digest"] == pushed.digest
    assert response["OCI-Namespace"] == "docker.io"
    # quay.io's library/alpine is not docker.io's: containerd must go to quay.io itself.
    other = client.get("/v2/library/alpine/manifests/3?ns=quay.io", headers=ACCEPT)
    assert other.status_code == 404 and error_code(other) == "NAME_UNKNOWN"
    assert "docker.io" in other.json()["errors"][0]["message"]


@pytest.mark.django_db(transaction=True)
def test_every_write_is_refused_with_405(client, root) -> None:
    pushed = push_image(root.url, "library/alpine", "3", layers=1)
    _pull(client, "library/alpine", "3", pushed)
    data = b"layer"
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    for response in (client.post("/v2/team/app/blobs/uploads/"),
                     post_upload(client, "team/app", f"?digest={digest}", data),
                     client.put("/v2/library/alpine/manifests/4", b"{}", content_type=OCI_MANIFEST),
                     client.delete(f"/v2/library/alpine/manifests/{pushed.digest}")):
        assert response.status_code == 405, response.content
        error = json.loads(response.content)["errors"][0]
        assert error["code"] == "UNSUPPORTED"
        assert error["message"].startswith(f"this registry is a read-only pull-through cache of 127.0.0.1:{root.port}")
    assert Manifest.objects.filter(digest=pushed.digest).exists()


@pytest.mark.django_db(transaction=True)
def test_the_ui_shows_the_mirror(client, root) -> None:
    pushed = push_image(root.url, "library/alpine", "3", layers=1)
    _pull(client, "library/alpine", "3", pushed)
    page = client.get("/ui/r/library/alpine/").content.decode()
    assert f"{root.url}/library/alpine" in page and "Delete" not in page
    assert client.get("/ui/r/library/alpine/-/delete").status_code == 405


@pytest.mark.django_db(transaction=True)
def test_eviction_collects_what_was_not_pulled(client, root, settings) -> None:
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="", url=root.url, evict_after_days=30)]
    old = push_image(root.url, "library/old", "1", layers=1)
    recent = push_image(root.url, "library/recent", "1", layers=1)
    _pull(client, "library/old", "1", old)
    _pull(client, "library/recent", "1", recent)
    then = timezone.now() - timedelta(days=31)
    Manifest.objects.filter(repository__name="library/old").update(created_at=then, last_pulled_at=then)
    lines: list[str] = []
    result = gc.collect(gc.Options(grace=timedelta(0)), report=lines.append)
    assert f"removed cached manifest library/old@{old.digest} (not pulled for 30 days)" in lines
    assert result.manifests == 1
    assert Manifest.objects.filter(repository__name="library/recent").exists()
