"""Blob views: HEAD/GET (with Range) and DELETE."""
from __future__ import annotations

from django.conf import settings
from django.http import FileResponse, HttpRequest, HttpResponseBase

from notifications import outbox
from registry import proxy
from registry.http import RangeFile, Unsatisfiable, parse_range
from registry.services import blobs
from registry.services.exceptions import RangeNotSatisfiable
from registry.views.base import empty, registry_view

BLOCK_SIZE = 1024 * 1024


def _headers(response: HttpResponseBase, info: blobs.BlobInfo) -> None:
    response["Docker-Content-Digest"] = info.digest
    response["ETag"] = f'"{info.digest}"'
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "max-age=31536000"
    response["X-Content-Type-Options"] = "nosniff"


@registry_view("GET", "DELETE")
def blob(request: HttpRequest, name: str, digest: str) -> HttpResponseBase:
    response: HttpResponseBase
    if request.method == "DELETE":
        blobs.delete(name, digest, settings.REGISTRY_DELETE_ENABLED)
        return empty(202)
    if request.method == "HEAD":
        info = (proxy.stat_blob if proxy.mirrored(name) else blobs.stat)(name, digest)
        response = empty(200)
        response["Content-Type"] = "application/octet-stream"
        response["Content-Length"] = str(info.size)
        _headers(response, info)
        return response
    # A pull-through cache's miss streams from its upstream (None: stored here, served as any blob).
    fetching = proxy.pull_blob(name, digest, bool(request.headers.get("Range"))) if proxy.mirrored(name) else None
    located = blobs.location(name, digest) if fetching is None else None
    if located is not None:
        url, info = located
        outbox.blob_pulled(name, info.digest, info.size)
        response = empty(307, Location=url)
        _headers(response, info)
        response["Cache-Control"] = "no-store"  # the URL expires; the digest does not
        return response
    stream, info = fetching or blobs.open_blob(name, digest)
    try:
        window = parse_range(request.headers.get("Range"), info.size)
    except Unsatisfiable:
        stream.close()
        raise RangeNotSatisfiable(f"range not satisfiable for a blob of {info.size} bytes", info.size) from None
    if window is None:
        response = FileResponse(stream, content_type="application/octet-stream")
        response["Content-Length"] = str(info.size)
    else:
        start, end = window
        response = FileResponse(RangeFile(stream, start, end - start + 1), status=206,
                                content_type="application/octet-stream")
        response["Content-Length"] = str(end - start + 1)
        response["Content-Range"] = f"bytes {start}-{end}/{info.size}"
    response.block_size = BLOCK_SIZE
    outbox.blob_pulled(name, info.digest, info.size)
    # FileResponse names the file ("data"); a blob is not a download with a meaningful name.
    response.headers.pop("Content-Disposition", None)
    _headers(response, info)
    return response
