"""Requests that reach a pull-through cache without naming its prefix, and the cache's read-only rule.

- containerd, with this registry as a mirror in ``hosts.toml``, asks for
  ``/v2/library/alpine/manifests/latest?ns=docker.io``: the mirror whose ``host`` is docker.io
  serves it, as ``/v2/<prefix>/library/alpine/...``, and the response says so in ``OCI-Namespace``
  (the OCI distribution spec's proxying section). An ``ns`` that no mirror claims is ignored.
- Docker Engine 24.0.8 and later take a mirror URL with a path (``registry-mirrors``:
  ``https://registry.example.com/hub``) and ask for ``/hub/v2/...``: that is ``/v2/hub/...``.
- A root mirror (``prefix = ""``) needs no rewriting: its names are the upstream's, which is what
  any Docker Engine's ``registry-mirrors`` and containerd's ``?ns=`` ask for. An ``ns`` naming
  another registry than its ``host`` is not its to answer: 404, and containerd tries that registry.

The path is rewritten before URL resolution, so views, authentication and metrics see one name.
Pushes, deletes and mounts into a cache's namespace are refused here with UNSUPPORTED.
"""
from __future__ import annotations

from typing import Any, Callable

from django.http import HttpRequest, HttpResponse

from registry import errors
from registry.proxy import mirrors
from registry.services.exceptions import NameUnknown, RegistryError
from tokens.access import Action, action_for

_NAME_ROUTES = ("/manifests/", "/blobs/", "/tags/list", "/referrers/")
# Set on a request that came as /<prefix>/v2/<name>/...: Docker Engine asks the token endpoint for
# <name> as it knows it (library/alpine), not for the local name the path is rewritten to.
MIRROR_PATH_PREFIX = "registry.mirror_path_prefix"


def _rewrite(request: HttpRequest) -> str:
    """Rewrite ``request.path_info`` for a mirror; the ``ns`` it honoured, or "". Raises NameUnknown
    for an ``ns`` that a root mirror must not answer."""
    path = request.path_info
    if path.startswith("/v2/"):
        ns = request.GET.get("ns", "")
        if not ns or path == "/v2/" or path.startswith("/v2/_catalog") or not any(r in path for r in _NAME_ROUTES):
            return ""
        mirror = mirrors.for_host(ns)
        if mirror is None:
            _refuse_foreign(ns)
            return ""
        if not mirror.root:
            request.path_info = f"/v2/{mirror.prefix}/{path[len('/v2/'):]}"
        return ns
    for mirror in mirrors.configured():
        if mirror.root:
            break
        base = f"/{mirror.prefix}/v2"
        if path == base or path == base + "/":
            request.path_info = "/v2/"
        elif path.startswith(base + "/"):
            request.path_info = f"/v2/{mirror.prefix}/{path[len(base) + 1:]}"
            request.META[MIRROR_PATH_PREFIX] = mirror.prefix
        else:
            continue
        break
    return ""


def _refuse_foreign(ns: str) -> None:
    """A root mirror holds one registry's names: another's (quay.io's library/alpine is not
    docker.io's) must not be answered from it. A root mirror without a ``host`` cannot tell."""
    root = next((mirror for mirror in mirrors.configured() if mirror.root), None)
    if root is not None and root.host:
        raise NameUnknown(f"this registry mirrors {root.host}, not {ns}")


class ProxyRoutingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            ns = _rewrite(request) if mirrors.configured() else ""
        except NameUnknown as refused:
            return _api_error(request, refused)
        response = self.get_response(request)
        if ns:
            response["OCI-Namespace"] = ns
        return response


class ReadOnlyNamespaceMiddleware:
    """Refuses writes into a cache's namespace; listed after authentication, so that a client who
    may not write at all is told that first, and only one who may learns which upstream this is."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func: Callable[..., Any], view_args: tuple[Any, ...],
                     view_kwargs: dict[str, Any]) -> HttpResponse | None:
        name = view_kwargs.get("name")
        if not name or not mirrors.configured():
            return None
        mirror = mirrors.find(name)
        route = request.resolver_match.url_name if request.resolver_match is not None else None
        if mirror is None or action_for(route, request.method) is Action.PULL:
            return None
        verb = "delete" if request.method == "DELETE" else "push or mount"
        return _api_error(request, mirror.read_only(verb))


def _api_error(request: HttpRequest, error: RegistryError) -> HttpResponse:
    response = errors.response_for(error)
    response["Docker-Distribution-API-Version"] = "registry/2.0"
    if request.method == "HEAD":
        response.content = b""
    return response
