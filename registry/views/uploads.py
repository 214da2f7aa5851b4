"""Upload views: start (POST, with mount and monolithic variants) and the session (GET/PATCH/PUT/DELETE)."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from registry import errors
from registry.http import has_body, parse_content_range, request_body
from registry.services import blobs, uploads
from registry.services.exceptions import DigestInvalid, UploadOutOfOrder
from registry.views.base import empty, registry_view
from regsite.forwarded import client_address
from tokens.access import Action
from tokens.principal import AuthenticatedHttpRequest


def _upload_url(name: str, upload_id: str) -> str:
    return f"/v2/{name}/blobs/uploads/{upload_id}"


def _session_response(status: int, session: uploads.UploadStatus) -> HttpResponse:
    return empty(
        status,
        Location=_upload_url(session.name, session.id),
        Range=f"0-{max(session.offset - 1, 0)}",
        Docker_Upload_UUID=session.id,
    )


def _created(name: str, info: blobs.BlobInfo) -> HttpResponse:
    return empty(201, Location=f"/v2/{name}/blobs/{info.digest}", Docker_Content_Digest=info.digest)


@registry_view("POST")
def upload_start(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    mount = request.GET.get("mount")
    if mount:
        # Only from a repository the caller may pull: a signed token scoped to one repository must
        # not read another's blob by naming its digest (the middleware checks a named ``from``).
        principal = request.principal
        mounted = blobs.mount(name, mount, request.GET.get("from"),
                              lambda source: principal.may(Action.PULL, source))
        if mounted is not None:
            return _created(name, mounted)
    digest = request.GET.get("digest")
    owner = session_owner(request)
    if digest:
        return _created(name, uploads.monolithic(name, digest, request_body(request), owner=owner))
    session = uploads.start(name, request.GET.get("digest-algorithm") or "sha256", owner=owner)
    return _session_response(202, session)


def session_owner(request: HttpRequest) -> str:
    """Whose upload sessions a new one counts with: its user's (a token's, its owner's), or the
    client address's when anonymous (authentication off): behind a trusted proxy, the client's
    (regsite.forwarded), not the proxy's, which every client shares."""
    principal = getattr(request, "principal", None)
    if principal is not None and principal.is_authenticated:
        return f"user:{principal.name}"[:255]
    return f"address:{client_address(request)}"


@registry_view("GET", "PATCH", "PUT", "DELETE")
def upload_session(request: HttpRequest, name: str, upload_id: str) -> HttpResponse:
    try:
        return _session_verb(request, name, upload_id)
    except UploadOutOfOrder as exc:
        # The session lives on: a 416 says where it is, like every other reply about it.
        response = errors.response_for(exc)
        response["Location"] = _upload_url(name, upload_id)
        response["Docker-Upload-UUID"] = upload_id
        return response


def _session_verb(request: HttpRequest, name: str, upload_id: str) -> HttpResponse:
    if request.method == "PATCH":
        content_range = parse_content_range(request.headers.get("Content-Range"))
        session = uploads.append(name, upload_id, request_body(request), content_range)
        return _session_response(202, session)
    if request.method == "PUT":
        digest = request.GET.get("digest")
        if not digest:
            raise DigestInvalid("the digest query parameter is required to complete an upload")
        body = request_body(request)
        content_range = parse_content_range(request.headers.get("Content-Range"))
        info = uploads.finish(name, upload_id, digest, body if has_body(body) else None, content_range)
        return _created(name, info)
    if request.method == "DELETE":
        uploads.cancel(name, upload_id)
        return empty(204)
    return _session_response(204, uploads.status(name, upload_id))
