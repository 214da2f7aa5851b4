"""Immutable tags under gunicorn with skopeo: overwriting prod/app:v1 with another image fails with a
message naming the rule, the tag's digest is unchanged, copying the same image again succeeds, and
neither skopeo delete nor a tag DELETE removes it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.images import build_image
from tests.support.rawhttp import Client

pytestmark = pytest.mark.e2e

CONFIG = """
[[immutable]]
name = "releases"
repositories = "prod/*"
tags = ["^v.*"]
"""


def _digest(skopeo, host: str, reference: str) -> str:  # type: ignore[no-untyped-def]
    return json.loads(skopeo.run("inspect", "--tls-verify=false", f"docker://{host}/{reference}").stdout)["Digest"]


def test_skopeo_cannot_move_or_delete_an_immutable_tag(start_registry, skopeo, tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "config.toml").write_text(CONFIG)
    registry = start_registry()
    first = build_image(tmp_path / "first", tag="v1", seed="first")
    second = build_image(tmp_path / "second", tag="v1", seed="second")
    skopeo.run("copy", "--dest-tls-verify=false", f"oci:{first.layout}:v1", f"docker://{registry.host}/prod/app:v1")
    assert _digest(skopeo, registry.host, "prod/app:v1") == first.digest

    refused = skopeo.run("copy", "--dest-tls-verify=false", f"oci:{second.layout}:v1",
                         f"docker://{registry.host}/prod/app:v1", check=False)

    assert refused.returncode != 0
    message = refused.stderr.replace('\\"', '"')  # skopeo's log line escapes quotes
    assert "uploading manifest v1 to" in message and "denied: " in message
    assert (f"tag 'v1' is immutable under [[immutable]] #1 \"releases\" (tags ^v.*) in prod/app: it points to "
            f"{first.digest} and no push may move it; push under a new tag") in message
    assert _digest(skopeo, registry.host, "prod/app:v1") == first.digest

    again = skopeo.run("copy", "--dest-tls-verify=false", f"oci:{first.layout}:v1",
                       f"docker://{registry.host}/prod/app:v1", check=False)
    assert again.returncode == 0, again.stderr  # pushing the same digest again is fine
    deleted = skopeo.run("delete", "--tls-verify=false", f"docker://{registry.host}/prod/app:v1", check=False)
    assert deleted.returncode != 0 and "it is never deleted" in deleted.stderr
    untag = Client(registry.host).request("DELETE", "/v2/prod/app/manifests/v1")
    assert untag.status == 403 and untag.code() == "DENIED"
    assert _digest(skopeo, registry.host, "prod/app:v1") == first.digest
    # Other tags of the repository move freely.
    skopeo.run("copy", "--dest-tls-verify=false", f"oci:{second.layout}:v1", f"docker://{registry.host}/prod/app:latest")
    skopeo.run("copy", "--dest-tls-verify=false", f"oci:{first.layout}:v1", f"docker://{registry.host}/prod/app:latest")
    assert _digest(skopeo, registry.host, "prod/app:latest") == first.digest
