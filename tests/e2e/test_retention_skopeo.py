"""Retention under gunicorn with skopeo: 15 tags pushed over (faked) time, pulls of some, a dry run,
a real run that leaves exactly the expected tags, a collection that frees exactly the removed
images' own blobs, and cosign-style signatures (referrers with a subject) that stay with a kept
image and go with a removed one. And images pushed a moment ago: retention and one collection
(``--delete-untagged``, or a rule's ``untagged_after_hours = 0``) free their blobs.

Push times are faked in the server's own SQLite database: after the pushes the test sets each tag's
updated_at and its manifest's created_at back, and clears last_pulled_at (skopeo reads a manifest
back while it pushes), as if each image had been pushed N days ago and not pulled since."""
from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.support.images import OCI_MANIFEST, Layout
from tests.support.rawhttp import Client, sha256_digest

pytestmark = pytest.mark.e2e

CONFIG = """
[[retention]]
repositories = "team/*"
keep_last = 10
keep_tags = ["^v[0-9]+\\\\.[0-9]+\\\\.[0-9]+$", "^latest$"]
pulled_within_days = 30
untagged_after_hours = 72
"""
# Newest first, one every 5 days: the first ten are the 10 most recently pushed.
TAGS = ["latest", "t13", "t12", "t11", "t10", "t09", "t08", "t07", "t06", "t05",
        "v1.0.0", "t04", "t03", "t02", "t01"]
PULLED = ["t03", "t12"]  # t03 is old, but pulled within 30 days
REMOVED = ["t01", "t02", "t04"]
SIG_TYPE = "application/vnd.dev.cosign.artifact.sig.v1+json"
EMPTY = b"{}"


def _blob_file_sizes(layout: Path) -> dict[str, int]:
    return {f"sha256:{p.name}": p.stat().st_size for p in (layout / "blobs" / "sha256").iterdir()}


def _fake_history(db: Path, ages: dict[str, float]) -> None:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    with sqlite3.connect(db, timeout=30) as conn:
        conn.execute("UPDATE registry_manifest SET last_pulled_at = NULL")
        for tag, days in ages.items():
            then = (now - timedelta(days=days)).isoformat(sep=" ")
            manifest_id = conn.execute("SELECT manifest_id FROM registry_tag WHERE name = ?", (tag,)).fetchone()[0]
            conn.execute("UPDATE registry_tag SET updated_at = ? WHERE name = ?", (then, tag))
            conn.execute("UPDATE registry_manifest SET created_at = ? WHERE id = ?", (then, manifest_id))


def _sign(http: Client, name: str, subject: str, subject_size: int, tag: str) -> tuple[str, str]:
    """A cosign-style signature: an OCI manifest of the signature artifact type whose subject is the
    image, pushed with cosign's fallback tag too; returns (its digest, its payload's digest)."""
    http.push_blob(name, EMPTY)
    payload = json.dumps({"critical": {"image": {"docker-manifest-digest": subject}}}).encode()
    layer = http.push_blob(name, payload)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": SIG_TYPE,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": sha256_digest(EMPTY), "size": 2},
        "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": layer,
                    "size": len(payload)}],
        "subject": {"mediaType": OCI_MANIFEST, "digest": subject, "size": subject_size},
    }).encode()
    assert http.push_manifest(name, tag, manifest, OCI_MANIFEST).status == 201
    return sha256_digest(manifest), layer


def test_retention_keeps_exactly_the_expected_tags_and_the_collection_frees_the_rest(
        start_registry, skopeo, tmp_path: Path) -> None:
    workdir = tmp_path / "server"
    workdir.mkdir()
    (workdir / "config.toml").write_text(CONFIG)
    registry = start_registry()
    layout = Layout(tmp_path / "src")
    base = [(layout.root / "blobs" / "sha256" / d.split(":", 1)[1]).read_bytes()
            for d in layout.image_manifest(layers=1, layer_size=32 * 1024, seed="base")[1]]
    images: dict[str, tuple[str, list[str], int]] = {}
    for tag in TAGS:
        manifest, layers, _ = layout.image_manifest(layers=1, layer_size=24 * 1024, seed=tag, shared_layers=base)
        images[tag] = (layout.tag(tag, OCI_MANIFEST, manifest), layers, len(manifest))
    for tag in reversed(TAGS):
        skopeo.run("copy", "--dest-tls-verify=false", f"oci:{layout.root}:{tag}",
                   f"docker://{registry.host}/team/app:{tag}")
    http = Client(registry.host)
    kept_sig, kept_payload = _sign(http, "team/app", images["t05"][0], images["t05"][2],
                                   f"sha256-{images['t05'][0].split(':')[1]}.sig")
    gone_sig, gone_payload = _sign(http, "team/app", images["t01"][0], images["t01"][2],
                                   f"sha256-{images['t01'][0].split(':')[1]}.sig")
    _fake_history(workdir / "db.sqlite3", {tag: 5.0 * (i + 1) for i, tag in enumerate(TAGS)})
    for tag in PULLED:
        skopeo.run("inspect", "--tls-verify=false", f"docker://{registry.host}/team/app:{tag}")

    dry = registry.manage("retention", "--dry-run")

    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0] == 'retention: 1 rule ([[retention]] #1 "team/*"), dry run'
    would = sorted(re.findall(r"^would remove tag team/app:(\S+): ", dry.stdout, re.MULTILINE))
    assert would == sorted(REMOVED + [f"sha256-{images['t01'][0].split(':')[1]}.sig"])
    assert ('would remove tag team/app:t01: [[retention]] #1 "team/*": not among the 10 most recently pushed '
            "tags (keep_last = 10; it is #15); neither pushed nor pulled within 30 days (pulled_within_days = 30; "
            "pushed 75 days ago, never pulled)") in lines
    assert (f'would remove tag team/app:sha256-{images["t01"][0].split(":")[1]}.sig: [[retention]] #1 "team/*": '
            f"on a referrer of {images['t01'][0]}, which goes") in lines
    going = set(re.findall(r"^the next collection removes manifest team/app@(\S+): ", dry.stdout, re.MULTILINE))
    assert going == {images[t][0] for t in REMOVED} | {gone_sig}
    tags_before = json.loads(skopeo.run("list-tags", "--tls-verify=false",
                                        f"docker://{registry.host}/team/app").stdout)["Tags"]
    assert len(tags_before) == 17  # nothing changed

    real = registry.manage("retention")

    assert real.returncode == 0, real.stderr
    assert real.stdout.splitlines()[-1] == ("retention: removed 4 tags in 1 repository; the next garbage "
                                            "collection removes 4 manifests, then the blobs only they use that "
                                            "are older than its grace period")
    tags = json.loads(skopeo.run("list-tags", "--tls-verify=false", f"docker://{registry.host}/team/app").stdout)
    expected = sorted(set(TAGS) - set(REMOVED)) + [f"sha256-{images['t05'][0].split(':')[1]}.sig"]
    assert sorted(tags["Tags"]) == sorted(expected)
    # Retention removed tags only (HEAD: a GET would be a pull, which keeps a manifest pinned by digest).
    assert http.request("HEAD", f"/v2/team/app/manifests/{images['t01'][0]}").status == 200

    collected = registry.manage("garbagecollect", "--grace-hours", "0")

    assert collected.returncode == 0, collected.stderr
    sizes = _blob_file_sizes(layout.root)
    own = {d for t in REMOVED for d in images[t][1][1:]} | {_config(layout.root, images[t][0]) for t in REMOVED}
    freed = int(re.search(r"freed (\d+) bytes$", collected.stdout.strip()).group(1))
    removed_blobs = set(re.findall(r"^removed blob (sha256:[0-9a-f]{64}) ", collected.stdout, re.MULTILINE))
    assert removed_blobs == own | {gone_payload}
    assert freed == sum(sizes[d] for d in own) + len(json.dumps(
        {"critical": {"image": {"docker-manifest-digest": images["t01"][0]}}}).encode())
    for digest in own | {gone_payload}:
        assert http.request("GET", f"/v2/team/app/blobs/{digest}").status == 404
    assert http.request("GET", f"/v2/team/app/blobs/{kept_payload}").status == 200
    assert http.request("GET", f"/v2/team/app/manifests/{gone_sig}").status == 404
    referrers = http.request("GET", f"/v2/team/app/referrers/{images['t05'][0]}").json()["manifests"]
    assert [r["digest"] for r in referrers] == [kept_sig] and referrers[0]["artifactType"] == SIG_TYPE
    assert http.request("GET", f"/v2/team/app/referrers/{images['t01'][0]}").json()["manifests"] == []
    out = tmp_path / "out"
    for tag in ("t03", "v1.0.0", "t05"):
        skopeo.run("copy", "--src-tls-verify=false", f"docker://{registry.host}/team/app:{tag}", f"oci:{out}:{tag}")
    assert set(_blob_file_sizes(out)) >= {images[t][0] for t in ("t03", "v1.0.0", "t05")}


def _config(layout: Path, manifest_digest: str) -> str:
    manifest = json.loads((layout / "blobs" / "sha256" / manifest_digest.split(":", 1)[1]).read_bytes())
    return manifest["config"]["digest"]


FRESH = ["f0", "f1", "f2", "f3"]  # pushed in this order: f3 is the most recent


@pytest.mark.parametrize("untagged_after_hours, collect", [
    (24, ["--delete-untagged", "--grace-hours", "0"]),
    (0, ["--grace-hours", "0"]),
], ids=["delete-untagged", "untagged-after-0"])
def test_retention_and_one_collection_free_the_removed_images_blobs(
        start_registry, skopeo, tmp_path: Path, untagged_after_hours: int, collect: list[str]) -> None:
    workdir = tmp_path / "server"
    workdir.mkdir()
    (workdir / "config.toml").write_text(f'[[retention]]\nrepositories = "team/*"\nkeep_last = 1\n'
                                         f"untagged_after_hours = {untagged_after_hours}\n")
    registry = start_registry()
    layout = Layout(tmp_path / "src")
    base = [(layout.root / "blobs" / "sha256" / d.split(":", 1)[1]).read_bytes()
            for d in layout.image_manifest(layers=1, layer_size=32 * 1024, seed="base")[1]]
    images = {}
    for tag in FRESH:
        manifest, layers, _ = layout.image_manifest(layers=2, layer_size=48 * 1024, seed=tag, shared_layers=base)
        images[tag] = (layout.tag(tag, OCI_MANIFEST, manifest), layers)
        skopeo.run("copy", "--dest-tls-verify=false", f"oci:{layout.root}:{tag}",
                   f"docker://{registry.host}/team/app:{tag}")
    removed = FRESH[:-1]
    own = {d for t in removed for d in images[t][1][1:]} | {_config(layout.root, images[t][0]) for t in removed}
    sizes = _blob_file_sizes(layout.root)

    retention = registry.manage("retention")
    collected = registry.manage("garbagecollect", *collect)

    assert retention.returncode == 0 and collected.returncode == 0, (retention.stderr, collected.stderr)
    going = set(re.findall(r"^the next collection removes manifest team/app@(\S+): ", retention.stdout, re.MULTILINE))
    waiting = set(re.findall(r"^manifest team/app@(\S+): .* stays untagged until ", retention.stdout, re.MULTILINE))
    # Exactly one of the two says what happens to the removed images: what the next collection
    # removes under the rule, or that they stay until untagged_after_hours (--delete-untagged: now).
    assert (going, waiting) == (({images[t][0] for t in removed}, set()) if untagged_after_hours == 0
                                else (set(), {images[t][0] for t in removed}))
    assert set(re.findall(r"^removed manifest team/app@(\S+)$", collected.stdout, re.MULTILINE)) == {
        images[t][0] for t in removed}
    assert set(re.findall(r"^removed blob (sha256:[0-9a-f]{64}) ", collected.stdout, re.MULTILINE)) == own
    freed = int(re.search(r"freed (\d+) bytes$", collected.stdout.strip()).group(1))
    assert freed == sum(sizes[d] for d in own)
    http = Client(registry.host)
    for digest in own:
        assert http.request("GET", f"/v2/team/app/blobs/{digest}").status == 404
    skopeo.run("copy", "--src-tls-verify=false", f"docker://{registry.host}/team/app:f3", f"oci:{tmp_path / 'out'}:f3")
    assert set(_blob_file_sizes(tmp_path / "out")) >= set(images["f3"][1])
