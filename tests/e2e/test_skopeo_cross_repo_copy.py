"""skopeo copies between two repositories of the registry by mounting blobs, not uploading them."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from tests.support.images import build_image
from tests.support.server import AccessEntry, access_log_env, read_access_log

pytestmark = pytest.mark.e2e


def test_it_mounts_layers_across_repositories(start_registry, skopeo, tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    registry = start_registry(**access_log_env(log))
    image = build_image(tmp_path / "src", layers=3)
    skopeo.run("copy", "--dest-tls-verify=false", f"oci:{image.layout}:v1",
               f"docker://{registry.host}/team/app:v1")
    skopeo.run("copy", "--src-tls-verify=false", "--dest-tls-verify=false",
               f"docker://{registry.host}/team/app:v1", f"docker://{registry.host}/other/copy:v1")

    # The manifest goes last, once every layer is in place. A request is logged after its answer,
    # so a layer's line may come after the manifest's (a worker busy): the log is read until all.
    def mounted(entries: list[AccessEntry]) -> set[str]:
        return {parse_qs(e.query)["mount"][0] for e in entries if e.method == "POST" and "mount=" in e.query
                and e.status == 201}

    def uploaded(entries: list[AccessEntry]) -> set[str]:
        return {parse_qs(e.query)["digest"][0] for e in entries
                if e.method == "PUT" and e.path.startswith("/v2/other/copy/blobs/uploads/") and e.status == 201}

    def complete(entries: list[AccessEntry]) -> bool:
        return (any(e.method == "PUT" and e.path == "/v2/other/copy/manifests/v1" for e in entries)
                and mounted(entries) | uploaded(entries) >= set(image.layer_digests))

    try:
        entries = read_access_log(log, until=complete)
    except AssertionError:  # for the checks below, once every line is written
        entries = read_access_log(log)
    mounts = [e for e in entries if e.method == "POST" and "mount=" in e.query]
    # Which layers skopeo asks to mount is its blob-info cache's: under load it once went without
    # the record of one layer it had pushed (it never asked team/app for it, and copied it through).
    # The registry's part: every mount asked for succeeds, from team/app, at least one is asked for,
    # and any other layer arrives whole by an upload.
    assert {e.status for e in mounts} == {201}
    assert all(parse_qs(e.query)["from"] == ["team/app"] for e in mounts)
    assert mounted(entries) and mounted(entries) <= set(image.layer_digests)
    assert set(image.layer_digests) - mounted(entries) <= uploaded(entries)
    data_files = list((registry.workdir / "registry" / "blobs").rglob("data"))
    assert len(data_files) == 4  # three layers and a config, each stored once

    skopeo.run("delete", "--tls-verify=false", f"docker://{registry.host}/team/app:v1")
    out = tmp_path / "out"
    skopeo.run("copy", "--src-tls-verify=false", f"docker://{registry.host}/other/copy:v1", f"oci:{out}:v1")
    index = json.loads((out / "index.json").read_text())
    assert index["manifests"][0]["digest"] == image.digest
    assert sorted(p.name for p in (out / "blobs" / "sha256").iterdir()) == sorted(
        p.name for p in (image.layout / "blobs" / "sha256").iterdir()
    )
