"""Read-only listings: the /v2/ version check, the catalog, tags, referrers."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from registry import errors
from registry.http import next_link
from registry.media_types import OCI_INDEX
from registry.services import catalog, referrers, tags
from registry.services.pagination import parse_last, parse_limit
from registry.views.base import json_response, registry_view
from tokens import authz
from tokens.access import login_optional
from tokens.principal import AuthenticatedHttpRequest


@login_optional
@registry_view("GET")
def base(request: HttpRequest) -> HttpResponse:
    return json_response({})


@registry_view("GET")
def catalog_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    n = parse_limit(request.GET.get("n"), catalog.DEFAULT_ENTRIES, catalog.MAX_ENTRIES, strict=True)
    assert n is not None
    page = catalog.list_repositories(n, parse_last(request.GET.get("last")), authz.visible(request.principal))
    response = json_response({"repositories": page.items})
    if page.more:
        response["Link"] = next_link("/v2/_catalog", {"n": n, "last": page.items[-1]})
    return response


@registry_view("GET")
def tags_list(request: HttpRequest, name: str) -> HttpResponse:
    n = parse_limit(request.GET.get("n"), None, tags.MAX_TAGS, strict=False)
    page = tags.list_tags(name, n, parse_last(request.GET.get("last")))
    response = json_response({"name": name, "tags": page.items})
    if page.more and n:
        response["Link"] = next_link(f"/v2/{name}/tags/list", {"n": n, "last": page.items[-1]})
    return response


@registry_view("GET")
def referrers_list(request: HttpRequest, name: str, digest: str) -> HttpResponse:
    artifact_type = request.GET.get("artifactType") or None
    page = referrers.referrers(name, digest, artifact_type, request.GET.get("last") or None)
    response = json_response(page.index, content_type=OCI_INDEX)
    if artifact_type:
        response["OCI-Filters-Applied"] = "artifactType"
    if page.next_last:
        params: dict[str, str | int] = {"last": page.next_last}
        if artifact_type:
            params["artifactType"] = artifact_type
        response["Link"] = next_link(f"/v2/{name}/referrers/{digest}", params)
    return response


@registry_view("GET", "POST", "PUT", "PATCH", "DELETE")
def unknown_endpoint(request: HttpRequest, rest: str) -> HttpResponse:
    return errors.error_response(errors.ENDPOINT_UNKNOWN)
