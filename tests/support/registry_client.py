"""Helpers for unit tests that talk to the registry through the Django test client."""
from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponse
from django.test import Client

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
OCTET = "application/octet-stream"


def digest_of(data: bytes, algorithm: str = "sha256") -> str:
    return f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"


def error_code(response: HttpResponse) -> str:
    """The code of the single error in an OCI error envelope."""
    body = json.loads(response.content)
    assert len(body["errors"]) == 1, body
    return body["errors"][0]["code"]


def body_of(response: HttpResponse) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


def start_upload(client: Client, name: str, **query: str) -> HttpResponse:
    response = client.post(f"/v2/{name}/blobs/uploads/{query_string(query)}")
    assert response.status_code == 202, response.content
    return response


def query_string(query: dict[str, str]) -> str:
    return f"?{urlencode(query)}" if query else ""


def post_upload(client: Client, name: str, query: str = "", data: bytes = b"", **extra: Any) -> HttpResponse:
    """POST to the upload-start URL with a raw query string and body."""
    return client.generic("POST", f"/v2/{name}/blobs/uploads/{query}", data, OCTET, **extra)


def patch(client: Client, location: str, data: bytes, content_range: str | None = None) -> HttpResponse:
    headers = {"Content-Range": content_range} if content_range is not None else {}
    return client.generic("PATCH", location, data, OCTET, headers=headers)


def put_upload(client: Client, location: str, digest: str, data: bytes = b"", **extra: Any) -> HttpResponse:
    sep = "&" if "?" in location else "?"
    return client.generic("PUT", f"{location}{sep}digest={digest}", data, OCTET, **extra)


def push_blob(client: Client, name: str, data: bytes) -> str:
    """Push a blob with POST then PUT; return its digest."""
    digest = digest_of(data)
    location = start_upload(client, name)["Location"]
    response = put_upload(client, location, digest, data)
    assert response.status_code == 201, response.content
    return digest


def descriptor(media_type: str, data: bytes, **fields: Any) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": digest_of(data), "size": len(data), **fields}


def make_manifest(
    config: bytes = b'{"architecture":"amd64","os":"linux"}',
    layers: list[bytes] | None = None,
    media_type: str = OCI_MANIFEST,
    subject: bytes | None = None,
    artifact_type: str | None = None,
    annotations: dict[str, str] | None = None,
    config_media_type: str | None = None,
) -> bytes:
    """The JSON bytes of an image manifest over ``config`` and ``layers`` (not pushed)."""
    docker = media_type == DOCKER_MANIFEST
    layer_type = DOCKER_LAYER if docker else OCI_LAYER
    doc: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": media_type,
        "config": descriptor(config_media_type or (DOCKER_CONFIG if docker else OCI_CONFIG), config),
        "layers": [descriptor(layer_type, layer) for layer in (layers or [])],
    }
    if subject is not None:
        doc["subject"] = descriptor(OCI_MANIFEST, subject)
    if artifact_type is not None:
        doc["artifactType"] = artifact_type
    if annotations is not None:
        doc["annotations"] = annotations
    return json.dumps(doc, indent=2).encode()


def make_index(children: list[bytes], media_type: str = OCI_INDEX, **fields: Any) -> bytes:
    child_type = DOCKER_MANIFEST if media_type == DOCKER_LIST else OCI_MANIFEST
    doc = {
        "schemaVersion": 2,
        "mediaType": media_type,
        "manifests": [descriptor(child_type, child) for child in children],
        **fields,
    }
    return json.dumps(doc).encode()


def put_manifest(
    client: Client, name: str, reference: str, body: bytes, media_type: str = OCI_MANIFEST, query: str = ""
) -> HttpResponse:
    return client.generic("PUT", f"/v2/{name}/manifests/{reference}{query}", body, media_type)


def push_image(
    client: Client,
    name: str,
    reference: str,
    layers: list[bytes] | None = None,
    media_type: str = OCI_MANIFEST,
    **manifest_fields: Any,
) -> tuple[bytes, str]:
    """Push the config, the layers and a manifest; return the manifest bytes and digest."""
    layers = [b"layer-of-" + reference.encode()] if layers is None else layers
    config = manifest_fields.pop("config", b'{"architecture":"amd64","os":"linux","ref":"%s"}' % reference.encode())
    for blob in [config, *layers]:
        push_blob(client, name, blob)
    body = make_manifest(config, layers, media_type, **manifest_fields)
    response = put_manifest(client, name, reference, body, media_type)
    assert response.status_code == 201, response.content
    return body, digest_of(body)


def push_manifest(client: Client, name: str, reference: str, body: bytes, media_type: str = OCI_MANIFEST) -> str:
    """Push an already-built manifest whose blobs are in place; return its digest."""
    response = put_manifest(client, name, reference, body, media_type)
    assert response.status_code == 201, response.content
    return response["Docker-Content-Digest"]
