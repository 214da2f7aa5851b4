"""The OpenAPI 3.1 document of the whole service, served at /api-docs/openapi.json.

Written by hand, one module per surface, so that it says what clients need (status codes, headers,
the error envelope, examples); tests/test_openapi_*.py check that it is valid and that every URL
route of the project is described in it.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ops.openapi import access_api, registry_api, service_api
from ops.openapi.components import Spec, components
from regsite.version import version

HTTP_METHODS = ("get", "head", "post", "put", "patch", "delete")

DESCRIPTION = """\
A container-image registry speaking the OCI Distribution Spec v1.1 (Docker Registry v2), with
htpasswd users, revocable API tokens, robot accounts and per-namespace access rules.

**Authentication** is off by default. When it is on, every endpoint except `/v2/`, `/`, `/health`,
`/ready`, `/metrics`, `/ui/*`, `/api-docs/*` and the token endpoints (`/api/tokens*`, `/api/robots*`,
`/auth/token`) needs `Authorization: Basic` (an htpasswd user, a robot account `robot$NAME` with its
secret, or the username `token` with an API token as password) or `Authorization: Bearer` (an API
token, or a signed token from `/auth/token`, held to its scope), except reads the `[[access]]` rules
open to anonymous callers. A role per repository limits each caller (the `[[access]]` rules, a
token's own role and repositories): read = pull, write = pull and push, admin = also delete.
Refusals are 401 with the challenge of `[auth] challenge` (`Basic realm="svc-registry"`, or Docker's
`Bearer realm=".../auth/token",service="svc-registry",scope="repository:<name>:pull,push"`) and an
`error` text beside the OCI `errors` envelope, or 403 `DENIED` naming the governing rule and the
caller's role; a read the caller may not make answers as for a repository that does not exist.

Every GET also answers HEAD. Every response carries `X-Request-ID` (the request's own, or generated).
Repository names may contain slashes (`team/app`); they are sent unencoded inside the path.
"""


@lru_cache(maxsize=1)
def document() -> Spec:
    paths: dict[str, Spec] = {
        **registry_api.paths(),
        **service_api.token_paths(),
        **access_api.paths(),
        **service_api.ops_paths(),
        **service_api.ui_paths(),
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "svc-registry", "version": version(), "description": DESCRIPTION},
        "servers": [{"url": "/", "description": "This service"}],
        "tags": [
            {"name": "registry", "description": "OCI Distribution v1.1 / Docker Registry v2 API."},
            {"name": "tokens", "description": "API tokens; credentials travel in the JSON body."},
            {"name": "operations", "description": "Probes, metrics and this documentation."},
            {"name": "web UI", "description": "HTML pages for people."},
        ],
        # Optional: the empty requirement is what a registry with authentication off accepts.
        "security": [{}, {"basic": []}, {"bearer": []}],
        "paths": paths,
        "components": _components(),
    }


def _components() -> Spec:
    found = components()
    return {**found, "schemas": {**found["schemas"], **access_api.SCHEMAS}}


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str


def operations() -> list[Operation]:
    """Every documented operation, for the server-rendered summary on /api-docs/."""
    found = []
    for path, item in document()["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                found.append(Operation(method.upper(), path, item[method].get("summary", "")))
    return found
