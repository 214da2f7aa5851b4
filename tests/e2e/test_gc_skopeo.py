"""Under gunicorn: push two images sharing layers, delete one, collect, the other copies out whole."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.images import OCI_MANIFEST, Layout
from tests.support.rawhttp import Client

pytestmark = pytest.mark.e2e


def _blob_files(layout: Path) -> dict[str, int]:
    return {f"sha256:{p.name}": p.stat().st_size for p in (layout / "blobs" / "sha256").iterdir()}


def test_it_frees_exactly_the_deleted_images_own_blobs(registry, skopeo, tmp_path: Path) -> None:
    layout = Layout(tmp_path / "src")
    one, one_layers, _ = layout.image_manifest(layers=3, layer_size=48 * 1024, seed="one")
    one_digest = layout.tag("one", OCI_MANIFEST, one)
    shared = [(layout.root / "blobs" / "sha256" / d.split(":", 1)[1]).read_bytes() for d in one_layers[:2]]
    two, two_layers, _ = layout.image_manifest(layers=1, layer_size=48 * 1024, seed="two",
                                               shared_layers=shared)
    two_digest = layout.tag("two", OCI_MANIFEST, two)
    assert two_layers[:2] == one_layers[:2]
    for tag in ("one", "two"):
        skopeo.run("copy", "--dest-tls-verify=false", f"oci:{layout.root}:{tag}",
                   f"docker://{registry.host}/team/app:{tag}")
    sizes = _blob_files(layout.root)
    config_one = _config_digest(layout.root, one_digest)
    unique_to_one = {one_layers[2], config_one}

    skopeo.run("delete", "--tls-verify=false", f"docker://{registry.host}/team/app:one")
    collected = registry.manage("garbagecollect", "--delete-untagged", "--grace-hours", "0")

    assert collected.returncode == 0, collected.stderr
    freed = int(re.search(r"freed (\d+) bytes$", collected.stdout.strip()).group(1))
    assert freed == sum(sizes[d] for d in unique_to_one)
    removed = set(re.findall(r"^removed blob (sha256:[0-9a-f]{64}) ", collected.stdout, re.MULTILINE))
    assert removed == unique_to_one
    http = Client(registry.host)
    for digest in unique_to_one:
        assert http.request("GET", f"/v2/team/app/blobs/{digest}").status == 404
    out = tmp_path / "out"
    skopeo.run("copy", "--src-tls-verify=false", f"docker://{registry.host}/team/app:two", f"oci:{out}:two")
    pulled = _blob_files(out)
    assert two_digest in pulled
    assert set(pulled) == {two_digest, _config_digest(layout.root, two_digest), *two_layers}
    for digest in pulled:
        assert (out / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes() == (
            layout.root / "blobs" / "sha256" / digest.split(":", 1)[1]
        ).read_bytes()


def _config_digest(layout: Path, manifest_digest: str) -> str:
    manifest = json.loads((layout / "blobs" / "sha256" / manifest_digest.split(":", 1)[1]).read_bytes())
    return manifest["config"]["digest"]
