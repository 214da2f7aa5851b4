"""Every media type the registry, its API documentation and its pages name, declared once."""
from __future__ import annotations

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
# The manifests a client may push, in the order the API documentation lists them.
MANIFEST_TYPES = (OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST)
IMAGE_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
SUPPORTED_TYPES = IMAGE_TYPES | INDEX_TYPES
SCHEMA1_TYPES = frozenset(
    {
        "application/vnd.docker.distribution.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v1+prettyjws",
    }
)

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
# Configs that describe a runnable image (others belong to artifacts: Helm charts, signatures...).
IMAGE_CONFIG_TYPES = frozenset({OCI_CONFIG, DOCKER_CONFIG})
OCI_EMPTY = "application/vnd.oci.empty.v1+json"

# Layers that live elsewhere by design (Windows base layers): never required to be in the registry.
FOREIGN_LAYER_TYPES = frozenset(
    {
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    }
)
