"""What requests do, in the audit log: pushes, deletes and tag moves through the registry API,
sign-ins and failed sign-ins, and every refusal (a 403, or a read answered as absent).

It sits outside authentication (regsite.settings), so it sees every answer, refusals included, and
binds the request for events that views and services record themselves (tokens and robots made
through the API or the UI: audit.log). Only what a request changed or was refused is written: a
successful pull is not an event here.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from django.http import HttpRequest, HttpResponseBase

from audit.log import Outcome, bind, record, unbind
from registry import queries, routes
from registry.digests import is_digest_like
from tokens.access import SAFE_METHODS, Action, action_for
from tokens.principal import Outcome as AuthOutcome

SIGN_IN_VIEWS = frozenset({routes.BASE, "auth-token", "ui:sign-in"})
# The registry API's routes about one repository (the UI's have names of their own, under "ui:").
REPOSITORY_ROUTES = frozenset({routes.MANIFEST, routes.BLOB, routes.UPLOAD_START, routes.UPLOAD_SESSION,
                               routes.TAGS, routes.REFERRERS})
_FAILED = {AuthOutcome.FAILURE: Outcome.FAILED, AuthOutcome.THROTTLED: Outcome.THROTTLED}


def _name_and_reference(request: HttpRequest) -> tuple[str, str, str]:
    """The repository, the tag (or other reference) and the digest a registry request names."""
    match = request.resolver_match
    kwargs: dict[str, Any] = match.kwargs if match is not None else {}
    name = str(kwargs.get("name", ""))
    reference = str(kwargs.get("reference", ""))
    digest = str(kwargs.get("digest", "")) or (reference if is_digest_like(reference) else "")
    return name, "" if is_digest_like(reference) else reference, digest


def _signs_in(request: HttpRequest) -> bool:
    match = request.resolver_match
    return match is not None and match.view_name in SIGN_IN_VIEWS and getattr(request, "auth_attempt", None) is not None


def _message(response: HttpResponseBase) -> str:
    try:
        return str(json.loads(response.content)["errors"][0]["message"])  # type: ignore[attr-defined]
    except (AttributeError, ValueError, KeyError, IndexError, TypeError):
        return ""


class AuditMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        token = bind(request)
        try:
            response = self.get_response(request)
            # A successful read is no event, unless it signed someone in: most requests stop here.
            if response.status_code >= 300 or request.method not in SAFE_METHODS or _signs_in(request):
                self._record(request, response)
        finally:
            unbind(token)
        return response

    def process_view(self, request: HttpRequest, view_func: Callable[..., Any], view_args: tuple[Any, ...],
                     view_kwargs: dict[str, Any]) -> None:
        # Where a manifest PUT's tags point before it: a tag that pointed elsewhere was moved.
        match = request.resolver_match
        if request.method == "PUT" and match is not None and match.view_name == routes.MANIFEST:
            name, tag, _digest = _name_and_reference(request)
            tags = ([tag] if tag else []) + request.GET.getlist("tag")
            if tags and name:
                try:
                    request.audit_tags_before = queries.tag_digests(name, tags)  # type: ignore[attr-defined]
                except Exception:  # a name the database cannot hold: the view refuses it
                    pass

    def _record(self, request: HttpRequest, response: HttpResponseBase) -> None:
        match = request.resolver_match
        view = match.view_name if match is not None else ""
        route = view if view in REPOSITORY_ROUTES or view == routes.BASE else None
        refusal = getattr(request, "refusal", None)
        attempt = getattr(request, "auth_attempt", None)
        name, tag, digest = _name_and_reference(request) if route is not None else ("", "", "")
        if refusal is not None:
            action = action_for(route, request.method)
            record(action.value, repository=name, reference=tag, digest=digest, outcome=Outcome.DENIED,
                   detail=refusal.message if response.status_code == 403 else
                   f"{refusal.message} (answered as if the repository did not exist)")
        elif attempt is not None and attempt.outcome in _FAILED:
            record("sign-in", outcome=_FAILED[attempt.outcome],
                   detail=f"{attempt.mechanism.value} credentials on {request.method} {request.path}"[:300])
        elif view in SIGN_IN_VIEWS and attempt is not None and response.status_code in (200, 302):
            record("sign-in", detail=f"{attempt.mechanism.value} credentials on {request.method} {request.path}"[:300])
        elif name and response.status_code == 403:  # refused by a rule of the registry's (an immutable tag)
            record(action_for(route, request.method).value, repository=name, reference=tag, digest=digest,
                   outcome=Outcome.DENIED, detail=_message(response))
        elif name and 200 <= response.status_code < 300 and action_for(route, request.method) is not Action.PULL:
            self._change(request, response, route, name, tag, digest)

    def _change(self, request: HttpRequest, response: HttpResponseBase, route: str | None, name: str, tag: str,
                digest: str) -> None:
        method, status = request.method, response.status_code
        pushed = response.get("Docker-Content-Digest", "")
        if route == routes.MANIFEST and method == "PUT":
            tags = response.get("OCI-Tag", "")
            record("push", repository=name, reference=tag, digest=pushed,
                   detail=f"tags {tags}" if tags and tags != tag else "")
            before: dict[str, str] = getattr(request, "audit_tags_before", {})
            for moved, old in sorted(before.items()):
                if old != pushed:
                    record("tag.move", repository=name, reference=moved, digest=pushed, detail=f"from {old}")
        elif route == routes.MANIFEST and method == "DELETE":
            record("tag.delete" if tag else "delete", repository=name, reference=tag, digest=digest)
        elif route == routes.BLOB and method == "DELETE":
            record("blob.delete", repository=name, digest=digest)
        elif route == routes.UPLOAD_SESSION and method == "PUT" and status == 201:
            record("blob.push", repository=name, digest=pushed)
        elif route == routes.UPLOAD_START and status == 201:
            source = request.GET.get("from", "")
            mounted = bool(request.GET.get("mount")) and pushed == request.GET.get("mount")
            record("blob.mount" if mounted else "blob.push", repository=name, digest=pushed,
                   detail=f"from {source}" if mounted and source else "")
