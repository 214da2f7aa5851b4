"""Push realistic content for the web UI tests through the registry API: an image with a full
config, a multi-platform index with an attestation, and referrers (a signature and an SBOM).

``send(method, path, body, content_type) -> status`` is the only thing asked of the caller, so the
same content goes through the Django test client and through real HTTP to gunicorn.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Callable

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
SIGNATURE_TYPE = "application/vnd.dev.cosign.artifact.sig.v1+json"
SBOM_TYPE = "application/spdx+json"

Send = Callable[[str, str, bytes, str], int]


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Pushed:
    name: str
    digest: str
    size: int  # manifest bytes
    layer_sizes: list[int]
    config_digest: str = ""


class Seeder:
    def __init__(self, send: Send) -> None:
        self.send = send
        self.bodies: dict[str, tuple[bytes, str]] = {}

    def blob(self, name: str, data: bytes) -> str:
        digest = digest_of(data)
        status = self.send("POST", f"/v2/{name}/blobs/uploads/?digest={digest}", data,
                           "application/octet-stream")
        assert status == 201, f"blob push to {name} answered {status}"
        return digest

    def manifest(self, name: str, reference: str, doc: dict, media_type: str) -> tuple[str, int]:
        body = json.dumps(doc, indent=2).encode()
        status = self.send("PUT", f"/v2/{name}/manifests/{reference}", body, media_type)
        assert status == 201, f"manifest push {name}:{reference} answered {status}"
        self.bodies[digest_of(body)] = (body, media_type)
        return digest_of(body), len(body)

    def tag(self, pushed: Pushed, tag: str) -> None:
        body, media_type = self.bodies[pushed.digest]
        status = self.send("PUT", f"/v2/{pushed.name}/manifests/{tag}", body, media_type)
        assert status == 201, f"tagging {pushed.name}:{tag} answered {status}"

    def image(self, name: str, tag: str | None, arch: str = "amd64", layer_sizes: tuple[int, ...] = (
            300 * 1024, 40 * 1024), seed: str = "app") -> Pushed:
        layers = [os.urandom(size) for size in layer_sizes]
        descriptors = [{"mediaType": OCI_LAYER, "digest": self.blob(name, data), "size": len(data)}
                       for data in layers]
        config = json.dumps({
            "architecture": arch, "os": "linux", "created": "2026-01-02T03:04:05Z",
            "author": "Platform Team <platform@example.com>",
            "config": {
                "Entrypoint": ["/usr/local/bin/app"], "Cmd": ["serve", "--port", "8080"],
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/bin:/bin", "APP_ENV=production"],
                "WorkingDir": "/srv/app", "User": "10001", "ExposedPorts": {"8080/tcp": {}},
                "Labels": {"org.opencontainers.image.source": f"https://git.example.com/{seed}",
                           "org.opencontainers.image.version": tag or "untagged"},
            },
            "rootfs": {"type": "layers", "diff_ids": [digest_of(d) for d in layers]},
            "history": [
                {"created": "2026-01-01T00:00:00Z", "created_by": "/bin/sh -c #(nop) ADD file:base in /"},
                {"created": "2026-01-02T03:04:00Z", "created_by": "ENV APP_ENV=production",
                 "empty_layer": True},
                {"created": "2026-01-02T03:04:05Z", "created_by": "COPY app /usr/local/bin/app"},
            ][: len(layers) + 1],
        }).encode()
        config_digest = self.blob(name, config)
        doc = {
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
            "layers": descriptors,
            "annotations": {"org.opencontainers.image.created": "2026-01-02T03:04:05Z"},
        }
        digest, size = self.manifest(name, tag or digest_of(json.dumps(doc, indent=2).encode()), doc,
                                     OCI_MANIFEST)
        return Pushed(name, digest, size, list(layer_sizes), config_digest)

    def index(self, name: str, tag: str, arches: tuple[str, ...] = ("amd64", "arm64")) -> Pushed:
        children = []
        for arch in arches:
            child = self.image(name, None, arch=arch, layer_sizes=(64 * 1024,), seed=f"{name}-{arch}")
            children.append({"mediaType": OCI_MANIFEST, "digest": child.digest, "size": child.size,
                             "platform": {"architecture": arch, "os": "linux"}})
        attestation = self.artifact(name, None, "application/vnd.in-toto+json", b'{"predicate":{}}')
        children.append({"mediaType": OCI_MANIFEST, "digest": attestation.digest, "size": attestation.size,
                         "platform": {"architecture": "unknown", "os": "unknown"},
                         "annotations": {"vnd.docker.reference.type": "attestation-manifest",
                                         "vnd.docker.reference.digest": children[0]["digest"]}})
        doc = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children}
        digest, size = self.manifest(name, tag, doc, OCI_INDEX)
        return Pushed(name, digest, size, [])

    def artifact(self, name: str, subject: Pushed | None, artifact_type: str, payload: bytes,
                 tag: str | None = None) -> Pushed:
        empty = self.blob(name, b"{}")
        layer = self.blob(name, payload)
        doc: dict = {
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": artifact_type,
            "config": {"mediaType": OCI_EMPTY, "digest": empty, "size": 2},
            "layers": [{"mediaType": artifact_type, "digest": layer, "size": len(payload),
                        "annotations": {"org.opencontainers.image.title": "payload.json"}}],
            "annotations": {"org.opencontainers.image.created": "2026-01-03T00:00:00Z"},
        }
        if subject is not None:
            doc["subject"] = {"mediaType": OCI_MANIFEST, "digest": subject.digest, "size": subject.size}
        reference = tag or digest_of(json.dumps(doc, indent=2).encode())
        digest, size = self.manifest(name, reference, doc, OCI_MANIFEST)
        return Pushed(name, digest, size, [len(payload)])

    def showcase(self) -> dict[str, Pushed]:
        """The content the UI pages and screenshots are made of."""
        app = self.image("team/app", "v1.0")
        latest = self.image("team/app", "v1.1")
        self.tag(latest, "latest")
        signature = self.artifact("team/app", latest, SIGNATURE_TYPE, b'{"critical":{"type":"sig"}}')
        sbom = self.artifact("team/app", latest, SBOM_TYPE, b'{"spdxVersion":"SPDX-2.3"}')
        multi = self.index("team/multi", "2.0")
        tools = self.image("infra/tools", "stable", layer_sizes=(2 * 1024 * 1024,), seed="tools")
        return {"app": app, "latest": latest, "signature": signature, "sbom": sbom, "multi": multi,
                "tools": tools}

