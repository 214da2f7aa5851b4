"""The OCI Distribution v1.1 routes of registry/urls.py, as OpenAPI path items."""
from __future__ import annotations

from typing import Any

from ops.openapi.components import Spec, ref, response
from registry.media_types import MANIFEST_TYPES, OCI_INDEX

TAG = "registry"
BINARY = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


def _h(name: str) -> Spec:
    return ref("headers", name)


def _p(name: str) -> Spec:
    return ref("parameters", name)


def _query(name: str, description: str, required: bool = False, **schema: Any) -> Spec:
    return {"name": name, "in": "query", "required": required, "description": description,
            "schema": {"type": "string", **schema}}


def _header(name: str, description: str, required: bool = False) -> Spec:
    return {"name": name, "in": "header", "required": required, "description": description,
            "schema": {"type": "string"}}


def _errors(*statuses: int, denied: str = "Denied") -> dict[str, Spec]:
    """401/403 from the auth layer (403 also from a governance rule: ``denied``), 405 for other
    verbs, and the registry errors listed."""
    out: dict[str, Spec] = {"401": ref("responses", "Unauthorized"), "403": ref("responses", denied),
                            "405": ref("responses", "MethodNotAllowed")}
    for status in statuses:
        out[str(status)] = ref("responses", "RegistryError")
    return out


def _op(summary: str, operation_id: str, responses: dict[str, Spec], description: str = "",
        parameters: list[Spec] | None = None, request_body: Spec | None = None) -> Spec:
    spec: Spec = {"tags": [TAG], "summary": summary, "operationId": operation_id, "responses": responses}
    if description:
        spec["description"] = description
    if parameters:
        spec["parameters"] = parameters
    if request_body:
        spec["requestBody"] = request_body
    return spec


# Pull-through caches ([[proxy]]): pulls under a cache's prefix (or with containerd's ?ns=) fetch
# from the upstream on a miss, and its failures come back as these.
_NS = _query("ns", "containerd's mirror parameter (hosts.toml): the registry host the name belongs to. The "
             "pull-through cache configured with that host serves the request, as /v2/<prefix>/<name>/..., "
             "and says so in OCI-Namespace; a host no cache claims is ignored.")
_PROXY_HEADERS: dict[str, Spec] = {
    "OCI-Namespace": {"description": "The `ns` a pull-through cache honoured.", "schema": {"type": "string"}},
}


def _upstream_errors() -> dict[str, Spec]:
    """A pull-through cache's miss when its upstream fails: rate-limited (429), unreachable or 503
    (503), any other failure or content not matching its digest (502); all with Retry-After."""
    return {"429": ref("responses", "RegistryError"), "502": ref("responses", "RegistryError"),
            "503": ref("responses", "RegistryError")}


def _blob_headers(extra: dict[str, Spec] | None = None) -> dict[str, Spec]:
    return {"Docker-Content-Digest": _h("ContentDigest"), "Docker-Distribution-API-Version": _h("ApiVersion"),
            "Content-Length": {"schema": {"type": "integer"}}, **_PROXY_HEADERS, **(extra or {})}


def _upload_status(description: str) -> Spec:
    return response(description, headers={"Location": _h("Location"), "Range": _h("UploadRange"),
                                          "Docker-Upload-UUID": _h("UploadUUID")})


def _created(description: str) -> Spec:
    return response(description, headers={"Location": _h("Location"), "Docker-Content-Digest": _h("ContentDigest")})


def _base() -> Spec:
    ok = response("The registry speaks the v2 API. With auth on and no credentials the 200 also "
                  "carries the Basic challenge, so that clients send credentials afterwards.",
                  {"type": "object"}, {}, headers={"Docker-Distribution-API-Version": _h("ApiVersion"),
                                                   "WWW-Authenticate": _h("WWWAuthenticate")})
    responses = {"200": ok, "401": ref("responses", "Unauthorized"), "405": ref("responses", "MethodNotAllowed")}
    description = ("Open even with auth on; credentials, when sent, are checked (a wrong password is a "
                   "401, which is how `docker login` and `podman login` verify them).")
    return {
        "get": _op("API version check", "apiVersion", responses, description),
        "head": _op("API version check (headers only)", "apiVersionHead", responses),
    }


def _catalog() -> Spec:
    ok = response("Repositories holding at least one manifest, in byte order.", ref("schemas", "Catalog"),
                  headers={"Link": _h("Link")})
    return {"get": _op("List repositories", "listRepositories", {"200": ok, **_errors(400)},
                       parameters=[_p("n"), _p("last")],
                       description="`n` defaults to 100 and may not exceed 1000 (400 PAGINATION_NUMBER_INVALID).")}


def _tags() -> Spec:
    ok = response("Tags in byte order.", ref("schemas", "TagList"), headers={"Link": _h("Link")})
    return {"get": _op("List tags", "listTags", {"200": ok, **_errors(400, 404)},
                       parameters=[_p("n"), _p("last")])}


def _manifest() -> Spec:
    content = {media_type: {"schema": ref("schemas", "Manifest")} for media_type in MANIFEST_TYPES}
    headers = {"Docker-Content-Digest": _h("ContentDigest"), "ETag": {"schema": {"type": "string"}},
               "Docker-Distribution-API-Version": _h("ApiVersion"), **_PROXY_HEADERS,
               "Warning": {"description": "A pull-through cache serving a tag its upstream could not "
                                          "confirm: `299 - \"...\"`.", "schema": {"type": "string"}}}
    ok = {"description": "The manifest, byte for byte, with its media type.", "content": content,
          "headers": headers}
    if_none_match = _header("If-None-Match", "The quoted digest of a cached copy: 304 when it matches.")
    accept = _header("Accept", "Manifest media types the client understands.")
    put_headers = {"Location": _h("Location"), "Docker-Content-Digest": _h("ContentDigest"),
                   "OCI-Subject": {"description": "Digest of the subject, when the manifest has one.",
                                   "schema": {"type": "string"}},
                   "OCI-Tag": {"description": "Tags set by `?tag=`.", "schema": {"type": "string"}}}
    tag_param = {"name": "tag", "in": "query", "required": False, "description": "Extra tags to set.",
                 "schema": {"type": "array", "items": {"type": "string"}}, "explode": True}
    return {
        "parameters": [_p("name"), _p("reference")],
        "get": _op("Fetch a manifest", "getManifest",
                   {"200": ok, "304": response("Not modified."), **_errors(400, 404), **_upstream_errors()},
                   parameters=[accept, if_none_match, _NS]),
        "head": _op("Check a manifest", "headManifest",
                    {"200": {"description": "Headers of the manifest.", "headers": headers}, **_errors(400, 404),
                     **_upstream_errors()},
                    parameters=[accept, _NS]),
        "put": _op("Push a manifest", "putManifest",
                   {"201": response("Stored.", headers=put_headers),
                    "413": ref("responses", "RegistryError"), **_errors(400, 404, denied="DeniedOrImmutable")},
                   parameters=[tag_param], request_body={"required": True, "content": content},
                   description="Every blob and child manifest it references must be in the repository "
                               "(400 MANIFEST_BLOB_UNKNOWN). Bodies over the configured limit get 413."),
        "delete": _op("Delete a manifest or untag", "deleteManifest",
                      {"202": response("Deleted."), **_errors(400, 404, denied="DeniedOrImmutable")},
                      description="By digest: the manifest and its tags. By tag: only the tag. 405 "
                                  "UNSUPPORTED when deletes are disabled."),
    }


def _blob() -> Spec:
    range_header = _header("Range", "One byte range, `bytes=<start>-<end>`.")
    return {
        "parameters": [_p("name"), _p("digest")],
        "get": _op("Download a blob", "getBlob", {
            "200": {"description": "The blob.", "content": BINARY, "headers": _blob_headers()},
            "206": {"description": "The requested range.", "content": BINARY,
                    "headers": _blob_headers({"Content-Range": {"schema": {"type": "string"}}})},
            "416": response("The range starts past the end.", ref("schemas", "ErrorEnvelope"),
                            headers={"Content-Range": {"schema": {"type": "string"}}}),
            **_errors(400, 404), **_upstream_errors()}, parameters=[range_header, _NS],
            description="Under a pull-through cache's prefix a miss is streamed from the upstream as it is "
                        "stored; bytes that do not match the digest end the response short."),
        "head": _op("Check a blob", "headBlob",
                    {"200": {"description": "The blob exists.", "headers": _blob_headers()}, **_errors(400, 404),
                     **_upstream_errors()}, parameters=[_NS]),
        "delete": _op("Delete a blob from a repository", "deleteBlob",
                      {"202": response("Unlinked; garbage collection removes unused data."),
                       **_errors(400, 404, denied="DeniedOrImmutable")},
                      description="403 DENIED when an immutable tag's image needs the blob (its config or a "
                                  "layer)."),
    }


def _upload_start() -> Spec:
    params = [
        _query("digest", "Monolithic upload: the digest of the body, which is the whole blob."),
        _query("mount", "Cross-repository mount: the digest of a blob to link."),
        _query("from", "Mount source repository; without it any repository holding the blob that the "
                       "credentials may pull (a signed token: one its scope names)."),
        _query("digest-algorithm", "Hash of the session, sha256 (default) or sha512.", enum=["sha256", "sha512"]),
    ]
    responses = {
        "201": _created("Blob stored (monolithic) or mounted."),
        "202": _upload_status("Upload session started; continue at Location."),
        "429": response("TOOMANYREQUESTS: the caller (its user, or its address when anonymous) already holds "
                        "`[registry] max_upload_sessions` upload sessions.", ref("schemas", "ErrorEnvelope"),
                        headers={"Retry-After": _h("RetryAfter")}),
        "507": ref("responses", "RegistryError"),
        **_errors(400, 404, denied="DeniedOrQuota"),
    }
    return {"parameters": [_p("name")],
            "post": _op("Start an upload, upload monolithically, or mount", "startUpload", responses,
                        parameters=params, request_body={"required": False, "content": BINARY})}


def _upload_session() -> Spec:
    content_range = _header("Content-Range", "The chunk's byte range, `<start>-<end>`.")
    digest = _query("digest", "Digest of the whole blob.", required=True)
    not_found = _errors(400, 404)
    return {
        "parameters": [_p("name"), _p("upload_id")],
        "get": _op("Upload status", "uploadStatus", {"204": _upload_status("Bytes received so far."), **not_found}),
        "patch": _op("Upload a chunk (or stream the whole blob)", "uploadChunk",
                     {"202": _upload_status("Chunk stored."),
                      "416": response("The chunk does not start at the current offset.",
                                      ref("schemas", "ErrorEnvelope"), headers={"Range": _h("UploadRange")}),
                      "507": ref("responses", "RegistryError"), **not_found},
                     parameters=[content_range], request_body={"required": True, "content": BINARY},
                     description="With Content-Range and Content-Length for a chunk, or chunked "
                                 "transfer encoding to stream the blob."),
        "put": _op("Complete an upload", "completeUpload",
                   {"201": _created("Blob stored."), "416": ref("responses", "RegistryError"),
                    "503": ref("responses", "RegistryError"),
                    "507": ref("responses", "RegistryError"), **_errors(400, 404, denied="DeniedOrQuota")},
                   parameters=[digest, content_range], request_body={"required": False, "content": BINARY},
                   description="Optionally with a last chunk. 400 DIGEST_INVALID when the data does not "
                               "match `digest`; the session is then discarded. 503 with Retry-After while "
                               "another request of the upload is in progress: send the PUT again."),
        "delete": _op("Cancel an upload", "cancelUpload", {"204": response("Cancelled."), **not_found}),
    }


def _referrers() -> Spec:
    ok = response("Manifests whose subject is the digest (empty for an unknown digest), a page at a time: "
                  "at most `[registry] referrers_per_page` descriptors, ending early once their annotations "
                  "add up to `referrers_page_annotation_bytes`; a referrer whose annotations are over "
                  "`referrer_annotation_bytes` is listed without them.",
                  ref("schemas", "ImageIndex"), media_type=OCI_INDEX,
                  headers={"OCI-Filters-Applied": {"description": "`artifactType` when filtered.",
                                                   "schema": {"type": "string"}},
                           "Link": {"description": '`<...>; rel="next"`: the next page, when more follow.',
                                    "schema": {"type": "string"}}})
    artifact = _query("artifactType", "Only referrers of this artifact type.")
    last = _query("last", "The digest of the last referrer of the previous page (from the `Link` header).")
    return {"parameters": [_p("name"), _p("digest")],
            "get": _op("List referrers", "listReferrers", {"200": ok, **_errors(400)},
                       parameters=[artifact, last])}


def _unknown() -> Spec:
    rest = {"name": "rest", "in": "path", "required": True, "description": "Any other path under /v2/.",
            "schema": {"type": "string"}}
    unknown = {"404": response("No registry endpoint at this path, in the OCI envelope.",
                               ref("schemas", "ErrorEnvelope")),
               "401": ref("responses", "Unauthorized")}
    item: Spec = {"parameters": [rest]}
    for method in ("get", "head", "post", "put", "patch", "delete"):
        item[method] = _op("Any other /v2/ path", f"unknownEndpoint{method.capitalize()}", unknown)
    return item


def paths() -> dict[str, Spec]:
    return {
        "/v2/": _base(),
        "/v2/_catalog": _catalog(),
        "/v2/{name}/tags/list": {"parameters": [_p("name")], **_tags()},
        "/v2/{name}/manifests/{reference}": _manifest(),
        "/v2/{name}/blobs/{digest}": _blob(),
        "/v2/{name}/blobs/uploads/": _upload_start(),
        "/v2/{name}/blobs/uploads/{upload_id}": _upload_session(),
        "/v2/{name}/referrers/{digest}": _referrers(),
        "/v2/{rest}": _unknown(),
    }
