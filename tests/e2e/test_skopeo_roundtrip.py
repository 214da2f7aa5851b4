"""skopeo copies an OCI image in and back out through gunicorn with identical digests."""
from __future__ import annotations

from pathlib import Path

from tests.support.images import build_image


def test_it_round_trips_an_oci_image(registry, skopeo, tmp_path: Path) -> None:
    image = build_image(tmp_path / "src", layers=3)
    skopeo.run("copy", "--dest-tls-verify=false", f"oci:{image.layout}:v1",
               f"docker://{registry.host}/team/app:v1")
    out = tmp_path / "out"
    skopeo.run("copy", "--src-tls-verify=false", f"docker://{registry.host}/team/app:v1", f"oci:{out}:v1")
    assert sorted(p.name for p in (out / "blobs" / "sha256").iterdir()) == sorted(
        p.name for p in (image.layout / "blobs" / "sha256").iterdir()
    )
