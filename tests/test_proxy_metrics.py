"""/metrics counts each cache's hits, misses, upstream errors and upstream bytes, labelled by the
cache's prefix only: never a repository name."""
from __future__ import annotations

import re

import prometheus_client
import pytest

from ops import metrics as ops_metrics
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, upstream  # noqa: F401
from tests.support.registry_client import body_of
from tests.support.upstreams import OCI_MANIFEST, push_image

pytestmark = pytest.mark.django_db(transaction=True)


def samples() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for metric in prometheus_client.REGISTRY.collect() if metric.name.startswith("registry_proxy_")
            for sample in metric.samples}


def test_hits_misses_bytes_and_errors_by_prefix(client, upstream, mirror) -> None:
    mirror()
    pushed = push_image(upstream.url, "library/counted", "v1", layers=2, layer_size=10_000)
    before = samples()

    def delta(name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        return samples().get(key, 0.0) - before.get(key, 0.0)

    for _ in range(2):
        assert client.get("/v2/hub/library/counted/manifests/v1", headers={"Accept": OCI_MANIFEST}).status_code == 200
        for digest in pushed.blobs:
            body_of(client.get(f"/v2/hub/library/counted/blobs/{digest}"))
    assert delta("registry_proxy_misses_total", proxy="hub", kind="manifest") == 1
    assert delta("registry_proxy_misses_total", proxy="hub", kind="blob") == len(pushed.blobs)
    assert delta("registry_proxy_hits_total", proxy="hub", kind="manifest") == 1
    assert delta("registry_proxy_hits_total", proxy="hub", kind="blob") == len(pushed.blobs)
    manifest_size = int(client.head("/v2/hub/library/counted/manifests/v1",
                                    headers={"Accept": OCI_MANIFEST})["Content-Length"])
    assert delta("registry_proxy_upstream_bytes_total", proxy="hub") == \
        manifest_size + sum(len(data) for data in pushed.blobs.values())

    upstream.stop()
    client.get("/v2/hub/library/absent/manifests/v1", headers={"Accept": OCI_MANIFEST})
    assert delta("registry_proxy_upstream_errors_total", proxy="hub", reason="unavailable") == 1

    text = ops_metrics.exposition().decode()
    proxy_lines = [line for line in text.splitlines() if line.startswith("registry_proxy_")]
    assert proxy_lines
    for line in proxy_lines:
        labels = set(re.findall(r'(\w+)="', line))
        assert labels <= {"proxy", "kind", "reason"}, line
        assert "library" not in line and "counted" not in line
