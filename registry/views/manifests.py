"""Manifest views: GET/HEAD by tag or digest, PUT, DELETE."""
from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from notifications import outbox
from registry import proxy
from registry.digests import is_digest_like
from registry.http import request_body
from registry.services import manifests
from registry.services.exceptions import ManifestTooLarge, SizeInvalid
from registry.views.base import empty, registry_view


def _read_manifest_body(request: HttpRequest, limit: int) -> bytes:
    body = request_body(request)
    if body.length is not None and body.length > limit:
        raise ManifestTooLarge(f"manifest of {body.length} bytes is over the limit of {limit}")
    try:
        data = body.stream.read(limit + 1 if body.length is None else body.length)
    except OSError as exc:  # the client went away or stalled past [server] client_timeout
        raise SizeInvalid(f"client stopped sending the manifest: {exc}") from None
    if len(data) > limit:
        raise ManifestTooLarge(f"manifest is over the limit of {limit} bytes")
    if body.length is not None and len(data) != body.length:
        raise SizeInvalid(f"received {len(data)} bytes, Content-Length said {body.length}")
    return data


@registry_view("GET", "PUT", "DELETE")
def manifest(request: HttpRequest, name: str, reference: str) -> HttpResponse:
    if request.method == "PUT":
        limit = settings.REGISTRY_MAX_MANIFEST_BYTES
        result = manifests.put(
            name,
            reference,
            _read_manifest_body(request, limit),
            request.content_type,
            limit,
            request.GET.getlist("tag"),
        )
        response = empty(201, Location=f"/v2/{name}/manifests/{result.digest}",
                         Docker_Content_Digest=result.digest)
        if result.subject:
            response["OCI-Subject"] = result.subject
        if result.tags:
            response["OCI-Tag"] = ", ".join(result.tags)
        return response
    if request.method == "DELETE":
        manifests.delete(name, reference, settings.REGISTRY_DELETE_ENABLED)
        return empty(202)
    pull = proxy.get_manifest if proxy.mirrored(name) else manifests.get
    stored = pull(name, reference, with_body=request.method == "GET")
    etag = f'"{stored.digest}"'
    if request.headers.get("If-None-Match") == etag:
        response = empty(304)
    else:
        response = HttpResponse(stored.body or b"", content_type=stored.media_type)
        if request.method == "GET":
            outbox.manifest_pulled(name, stored.digest, stored.media_type, stored.size,
                                   "" if is_digest_like(reference) else reference)
    response["Content-Type"] = stored.media_type
    response["Content-Length"] = str(stored.size)
    response["Docker-Content-Digest"] = stored.digest
    response["ETag"] = etag
    if stored.warning:
        response["Warning"] = stored.warning
    return response
