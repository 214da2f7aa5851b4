"""skopeo copies images in and back out through gunicorn with identical digests."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.images import DOCKER_MANIFEST, OCI_INDEX, build_image, build_multiarch, to_dir
from tests.support.rawhttp import Client

pytestmark = pytest.mark.e2e


def blob_names(layout: Path) -> list[str]:
    return sorted(p.name for p in (layout / "blobs" / "sha256").iterdir())


def tagged_digest(layout: Path, tag: str) -> str:
    index = json.loads((layout / "index.json").read_text())
    [entry] = [m for m in index["manifests"]
               if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
    return entry["digest"]


def test_it_round_trips_an_oci_image(registry, skopeo, tmp_path: Path) -> None:
    image = build_image(tmp_path / "src", layers=3)
    skopeo.run("copy", "--dest-tls-verify=false", f"oci:{image.layout}:v1",
               f"docker://{registry.host}/team/app:v1")
    out = tmp_path / "out"
    skopeo.run("copy", "--src-tls-verify=false", f"docker://{registry.host}/team/app:v1", f"oci:{out}:v1")
    assert tagged_digest(out, "v1") == image.digest
    assert blob_names(out) == blob_names(image.layout)


def test_it_keeps_a_docker_schema2_image_schema2(registry, skopeo, tmp_path: Path) -> None:
    image = build_image(tmp_path / "src", layers=3, docker=True)
    source = to_dir(image, tmp_path / "src-dir")
    skopeo.run("copy", "--dest-tls-verify=false", f"dir:{source}", f"docker://{registry.host}/team/legacy:v1")
    out = tmp_path / "out"
    skopeo.run("copy", "--src-tls-verify=false", f"docker://{registry.host}/team/legacy:v1", f"dir:{out}")
    assert (out / "manifest.json").read_bytes() == (source / "manifest.json").read_bytes()
    assert json.loads((out / "manifest.json").read_bytes())["mediaType"] == DOCKER_MANIFEST
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in source.iterdir())
    served = Client(registry.host).request("GET", "/v2/team/legacy/manifests/v1",
                                           headers={"Accept": DOCKER_MANIFEST})
    assert served.header("Content-Type") == DOCKER_MANIFEST
    assert served.header("Docker-Content-Digest") == image.digest


def test_it_round_trips_a_multiarch_index_with_all(registry, skopeo, tmp_path: Path) -> None:
    image = build_multiarch(tmp_path / "src", tag="multi", arches=("amd64", "arm64", "s390x"))
    skopeo.run("copy", "--all", "--dest-tls-verify=false", f"oci:{image.layout}:multi",
               f"docker://{registry.host}/team/multi:v1")
    out = tmp_path / "out"
    skopeo.run("copy", "--all", "--src-tls-verify=false", f"docker://{registry.host}/team/multi:v1",
               f"oci:{out}:v1")
    assert tagged_digest(out, "v1") == image.digest
    assert blob_names(out) == blob_names(image.layout)
    raw = skopeo.run("inspect", "--raw", "--tls-verify=false", f"docker://{registry.host}/team/multi:v1")
    index = json.loads(raw.stdout)
    assert index["mediaType"] == OCI_INDEX
    assert [m["platform"]["architecture"] for m in index["manifests"]] == ["amd64", "arm64", "s390x"]
