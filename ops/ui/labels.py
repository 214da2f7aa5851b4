"""Readable names for the media and artifact types the pages show next to the raw type."""
from __future__ import annotations

from registry import media_types as mt

MEDIA_TYPES = {
    mt.OCI_MANIFEST: "OCI image",
    mt.OCI_INDEX: "OCI index",
    mt.DOCKER_MANIFEST: "Docker image",
    mt.DOCKER_LIST: "Docker manifest list",
}

ARTIFACT_TYPES = {
    "application/vnd.dev.cosign.simplesigning.v1+json": "Cosign signature",
    "application/vnd.dev.cosign.artifact.sig.v1+json": "Cosign signature",
    "application/vnd.dev.sigstore.bundle.v0.3+json": "Sigstore bundle",
    "application/vnd.dev.sigstore.bundle+json;version=0.3": "Sigstore bundle",
    "application/vnd.cncf.notary.signature": "Notary signature",
    "application/spdx+json": "SPDX SBOM",
    "text/spdx": "SPDX SBOM",
    "application/vnd.cyclonedx+json": "CycloneDX SBOM",
    "application/vnd.cyclonedx+xml": "CycloneDX SBOM",
    "application/vnd.syft+json": "Syft SBOM",
    "application/vnd.in-toto+json": "in-toto attestation",
    "application/vnd.dsse.envelope.v1+json": "DSSE attestation",
    "application/sarif+json": "SARIF scan report",
    mt.OCI_CONFIG: "OCI image",
    mt.DOCKER_CONFIG: "Docker image",
    "application/vnd.cncf.helm.config.v1+json": "Helm chart",
    mt.OCI_EMPTY: "Artifact",
}


def media_type(value: str) -> str:
    return MEDIA_TYPES.get(value, value or "unknown")


def artifact_type(value: str) -> str:
    if not value:
        return "Artifact"
    known = ARTIFACT_TYPES.get(value) or ARTIFACT_TYPES.get(value.split(";", 1)[0].strip())
    return known or value
