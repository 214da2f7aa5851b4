"""skopeo list-tags, inspect and delete against gunicorn agree with what was pushed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.images import build_image
from tests.support.rawhttp import Client

pytestmark = pytest.mark.e2e


def push(skopeo, registry, tmp_path: Path, tags: list[str]) -> str:
    image = build_image(tmp_path / "src", layers=3, layer_size=16 * 1024)
    first = f"docker://{registry.host}/team/app:{tags[0]}"
    skopeo.run("copy", "--dest-tls-verify=false", f"oci:{image.layout}:v1", first)
    for tag in tags[1:]:
        skopeo.run("copy", "--src-tls-verify=false", "--dest-tls-verify=false", first,
                   f"docker://{registry.host}/team/app:{tag}")
    return image.digest


def test_it_lists_tags_in_lexical_order(registry, skopeo, tmp_path: Path) -> None:
    push(skopeo, registry, tmp_path, ["v2", "latest", "v1", "V0"])
    listed = json.loads(skopeo.run("list-tags", "--tls-verify=false",
                                   f"docker://{registry.host}/team/app").stdout)
    assert listed["Tags"] == ["V0", "latest", "v1", "v2"]


def test_it_inspects_the_pushed_digest_and_bytes(registry, skopeo, tmp_path: Path) -> None:
    digest = push(skopeo, registry, tmp_path, ["v1"])
    info = json.loads(skopeo.run("inspect", "--tls-verify=false",
                                 f"docker://{registry.host}/team/app:v1").stdout)
    assert info["Digest"] == digest
    assert info["RepoTags"] == ["v1"]
    assert len(info["Layers"]) == 3
    raw = skopeo.run("inspect", "--raw", "--tls-verify=false", f"docker://{registry.host}/team/app@{digest}")
    stored = (tmp_path / "src" / "blobs" / "sha256" / digest.split(":", 1)[1]).read_text()
    assert raw.stdout == stored


def test_it_deletes_an_image_and_every_tag_on_it(registry, skopeo, tmp_path: Path) -> None:
    digest = push(skopeo, registry, tmp_path, ["v1", "stable"])
    skopeo.run("delete", "--tls-verify=false", f"docker://{registry.host}/team/app:v1")
    for tag in ("v1", "stable"):
        gone = skopeo.run("inspect", "--tls-verify=false", f"docker://{registry.host}/team/app:{tag}",
                          check=False)
        assert gone.returncode != 0
        assert "manifest unknown" in gone.stderr
    listed = json.loads(skopeo.run("list-tags", "--tls-verify=false",
                                   f"docker://{registry.host}/team/app").stdout)
    assert listed["Tags"] == []
    assert Client(registry.host).request("GET", f"/v2/team/app/manifests/{digest}").status == 404
