"""Build OCI image layouts on disk for skopeo, without network: layers, configs, indexes."""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"


@dataclass(frozen=True)
class Built:
    layout: Path          # an OCI layout directory (oci:<layout>:<tag> for skopeo)
    tag: str
    digest: str           # digest of the top manifest or index
    layer_digests: list[str]
    blob_bytes: int       # bytes of every blob written (layers + config)


class Layout:
    """An OCI image layout directory that images are added to."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
        self.index: list[dict] = []

    def put(self, data: bytes) -> tuple[str, int]:
        digest = hashlib.sha256(data).hexdigest()
        (self.root / "blobs" / "sha256" / digest).write_bytes(data)
        return f"sha256:{digest}", len(data)

    def _layer(self, seed: str, size: int) -> tuple[bytes, str]:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as tar:
            payload = os.urandom(size)
            info = tarfile.TarInfo(f"{seed}.bin")
            info.size, info.mtime = len(payload), 0
            tar.addfile(info, io.BytesIO(payload))
        tar_bytes = raw.getvalue()
        diff_id = "sha256:" + hashlib.sha256(tar_bytes).hexdigest()
        return gzip.compress(tar_bytes, compresslevel=1, mtime=0), diff_id

    def image_manifest(
        self, layers: int = 3, layer_size: int = 64 * 1024, docker: bool = False,
        arch: str = "amd64", seed: str = "img", shared_layers: list[bytes] | None = None,
    ) -> tuple[bytes, list[str], int]:
        """Write layers and config; returns (manifest bytes, layer digests, blob bytes)."""
        descriptors, diff_ids, digests, total = [], [], [], 0
        contents = list(shared_layers or [])
        for i in range(layers):
            data, diff_id = self._layer(f"{seed}-{i}", layer_size)
            contents.append(data)
            diff_ids.append(diff_id)
        for data in contents:
            digest, size = self.put(data)
            digests.append(digest)
            total += size
            descriptors.append({"mediaType": DOCKER_LAYER if docker else OCI_LAYER,
                                "digest": digest, "size": size})
        if shared_layers:
            diff_ids = [
                "sha256:" + hashlib.sha256(gzip.decompress(d)).hexdigest() for d in shared_layers
            ] + diff_ids
        config = json.dumps({
            "architecture": arch, "os": "linux", "created": "2026-01-01T00:00:00Z",
            "config": {"Entrypoint": ["/bin/app"], "Labels": {"seed": seed}},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created": "2026-01-01T00:00:00Z", "created_by": f"layer {i}"}
                        for i in range(len(contents))],
        }).encode()
        config_digest, config_size = self.put(config)
        total += config_size
        manifest = {
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
            "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG,
                       "digest": config_digest, "size": config_size},
            "layers": descriptors,
        }
        return json.dumps(manifest).encode(), digests, total

    def tag(self, tag: str, media_type: str, data: bytes) -> str:
        digest, size = self.put(data)
        self.index = [m for m in self.index
                      if m.get("annotations", {}).get("org.opencontainers.image.ref.name") != tag]
        self.index.append({"mediaType": media_type, "digest": digest, "size": size,
                           "annotations": {"org.opencontainers.image.ref.name": tag}})
        (self.root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": self.index}))
        return digest


def build_image(root: Path, tag: str = "v1", layers: int = 3, layer_size: int = 64 * 1024,
                docker: bool = False, seed: str = "img") -> Built:
    """A single-platform image (OCI, or Docker schema2 with ``docker=True``) in a new layout."""
    layout = Layout(root)
    manifest, digests, total = layout.image_manifest(layers, layer_size, docker, seed=seed)
    digest = layout.tag(tag, DOCKER_MANIFEST if docker else OCI_MANIFEST, manifest)
    return Built(root, tag, digest, digests, total)


def build_multiarch(root: Path, tag: str = "multi", arches: tuple[str, ...] = ("amd64", "arm64"),
                    layer_size: int = 32 * 1024) -> Built:
    """An OCI index of one image per architecture."""
    layout = Layout(root)
    children, all_digests, total = [], [], 0
    for arch in arches:
        manifest, digests, size = layout.image_manifest(2, layer_size, arch=arch, seed=f"{tag}-{arch}")
        digest, msize = layout.put(manifest)
        children.append({"mediaType": OCI_MANIFEST, "digest": digest, "size": msize,
                         "platform": {"architecture": arch, "os": "linux"}})
        all_digests += digests
        total += size
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children}).encode()
    digest = layout.tag(tag, OCI_INDEX, index)
    return Built(root, tag, digest, all_digests, total)


def to_dir(built: Built, dest: Path) -> Path:
    """The image as skopeo's ``dir:`` transport lays it out: ``manifest.json`` plus one file per blob.

    skopeo's ``oci:`` source only resolves OCI media types, so a Docker schema2 image is pushed from
    a ``dir:`` copy, which keeps the manifest byte for byte.
    """
    blobs = built.layout / "blobs" / "sha256"
    manifest = (blobs / built.digest.split(":", 1)[1]).read_bytes()
    dest.mkdir(parents=True)
    (dest / "version").write_text("Directory Transport Version: 1.1\n")
    (dest / "manifest.json").write_bytes(manifest)
    doc = json.loads(manifest)
    for descriptor in [doc["config"], *doc["layers"]]:
        hex_digest = descriptor["digest"].split(":", 1)[1]
        (dest / hex_digest).write_bytes((blobs / hex_digest).read_bytes())
    return dest
