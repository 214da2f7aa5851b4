"""The token endpoints, the ops endpoints and the web UI pages, as OpenAPI path items."""
from __future__ import annotations

from ops.openapi.components import EXAMPLE_PREFIX, JSON, Spec, json_content, ref, response

PUBLIC: list[Spec] = []  # no security requirement: open even with auth on
HTML = {"text/html": {"schema": {"type": "string"}}}


def _token_op(summary: str, operation_id: str, request_schema: str, ok_status: str, ok: Spec,
              description: str, not_found: bool = False) -> Spec:
    responses: dict[str, Spec] = {
        ok_status: ok,
        "400": response("Bad input; `field` names the offending field.", ref("schemas", "JsonError"),
                        {"error": "role must be one of read, write, admin", "field": "role"}),
        "401": response("Wrong username or password.", ref("schemas", "JsonError"),
                        {"error": "invalid username or password"}),
        "405": ref("responses", "JsonMethodNotAllowed"),
        "413": response("The body is over 64 KiB.", ref("schemas", "JsonError")),
        "429": response("Ten failed logins within a minute for this user from this address.",
                        ref("schemas", "JsonError"), headers={"Retry-After": ref("headers", "RetryAfter")}),
    }
    if not_found:
        responses["404"] = response("No token of this user has this hash_prefix.", ref("schemas", "JsonError"),
                                    {"error": f"no token with hash_prefix {EXAMPLE_PREFIX}", "field": "hash_prefix"})
    return {"post": {
        "tags": ["tokens"], "summary": summary, "operationId": operation_id, "description": description,
        "security": PUBLIC,
        "requestBody": {"required": True, "content": json_content(ref("schemas", request_schema))},
        "responses": responses,
    }}


def token_paths() -> dict[str, Spec]:
    credentials_note = ("Open even with auth on: the username and password of an htpasswd user travel "
                        "in the JSON body and are checked here. The Authorization header is ignored.")
    return {
        "/api/tokens": _token_op(
            "Create an API token", "createToken", "TokenCreateRequest", "201",
            response("Created. `token` is shown only here: store it.", ref("schemas", "TokenCreated")),
            credentials_note + " `role` defaults to read, `ttl_days` to 30 (1..3650)."),
        "/api/tokens/list": _token_op(
            "List the user's API tokens", "listTokens", "Credentials", "200",
            response("The user's tokens; never the token itself nor its full hash.", ref("schemas", "TokenList")),
            credentials_note),
        "/api/tokens/revoke": _token_op(
            "Revoke an API token", "revokeToken", "TokenRevokeRequest", "200",
            response("Revoked; every worker refuses the token from its next request.",
                     ref("schemas", "TokenRevoked")),
            credentials_note, not_found=True),
    }


def _ops_get(summary: str, operation_id: str, responses: dict[str, Spec], description: str) -> Spec:
    responses = {**responses, "405": ref("responses", "JsonMethodNotAllowed")}
    operation = {"tags": ["operations"], "summary": summary, "description": description,
                 "security": PUBLIC, "responses": responses}
    return {"get": {**operation, "operationId": operation_id},
            "head": {**operation, "operationId": operation_id + "Head", "summary": summary + " (headers only)"}}


def ops_paths() -> dict[str, Spec]:
    readiness = ref("schemas", "Readiness")
    return {
        "/health": _ops_get("Liveness", "health", {"200": response("The process is up.", ref("schemas", "Health"))},
                            "No I/O at all: for liveness probes and load balancers."),
        "/ready": _ops_get("Readiness", "ready", {
            "200": response("Every check passed.", readiness),
            "503": response("At least one check failed; `failing` names them.", readiness,
                            {"status": "unavailable", "checks": {"database": "ok", "storage": "ok",
                             "disk": "2048 bytes free on the storage device, below the floor of 104857600"},
                             "failing": ["disk"]}),
        }, "Checks the database, a probe file written to and removed from the storage root, free disk "
           "space against `[storage] min_free_bytes`, and with auth on that the htpasswd file is readable "
           "and the token directory writable."),
        "/metrics": _ops_get("Prometheus metrics", "metrics", {
            "200": {"description": "Prometheus text format 0.0.4, summed over all gunicorn workers.",
                    "content": {"text/plain": {"schema": {"type": "string"}}}},
        }, "HTTP metrics from django-prometheus and registry metrics (`registry_*`)."),
        "/api-docs/": _ops_get("API documentation page", "apiDocs",
                               {"200": {"description": "This document rendered as HTML.", "content": HTML}},
                               "Served entirely by this service (no CDN), so it works offline."),
        "/api-docs/openapi.json": _ops_get("OpenAPI document", "openapiDocument", {
            "200": {"description": "This document.", "content": {JSON: {"schema": {"type": "object"}}}},
        }, "OpenAPI 3.1 description of every route."),
    }


def _html(description: str) -> Spec:
    return {"description": description, "content": HTML}


def _page(summary: str, operation_id: str, description: str, methods: tuple[str, ...] = ("get",),
          parameters: list[Spec] | None = None) -> Spec:
    item: Spec = {}
    if parameters:
        item["parameters"] = parameters
    for method in methods:
        if method == "post":
            responses = {"302": {"description": "Done; redirects to the next page."},
                         "200": _html("The page again, showing the result."),
                         "400": _html("The form again, with its errors."),
                         "403": _html("The form's CSRF check failed, or the role does not allow it."),
                         "404": _html("No such page, repository or manifest.")}
        else:
            responses = {"200": _html("An HTML page."),
                         "302": {"description": "With auth on and no session: to the sign-in page."},
                         "404": _html("Nothing here.")}
        responses["405"] = _html("Method not allowed.")
        item[method] = {"tags": ["web UI"], "summary": summary, "description": description,
                        "operationId": f"{operation_id}{method.capitalize()}", "security": PUBLIC,
                        "responses": responses}
    return item


def _path_param(name: str, description: str) -> Spec:
    return {"name": name, "in": "path", "required": True, "description": description, "schema": {"type": "string"}}


def ui_paths() -> dict[str, Spec]:
    name = _path_param("name", "Repository name, slashes included.")
    reference = _path_param("reference", "A tag or a digest.")
    rest = _path_param("rest", "Any other path.")
    browse = "HTML for people. With auth on, browsing asks for sign-in."
    return {
        "/ui/": _page("Web UI home", "uiHome", browse),
        "/ui/repositories/": _page("Repository list", "uiRepositories", browse),
        "/ui/r/{name}/": _page("Repository: tags and manifests", "uiRepository", browse, parameters=[name]),
        "/ui/r/{name}/-/manifests/{reference}": _page(
            "Manifest: layers, config, platforms, referrers", "uiManifest", browse, parameters=[name, reference]),
        "/ui/r/{name}/-/manifests/{reference}/delete": _page(
            "Confirm and delete a manifest", "uiDeleteManifest", browse + " Deleting needs the admin role.",
            ("get", "post"), [name, reference]),
        "/ui/r/{name}/-/delete": _page(
            "Confirm by typing the name, then delete a whole repository", "uiDeleteRepository",
            browse + " Deleting needs the admin role.", ("get", "post"), [name]),
        "/ui/sign-in": _page("Sign in with an htpasswd user", "uiSignIn", "HTML form.", ("get", "post")),
        "/ui/sign-out": _page("Sign out", "uiSignOut", "HTML form action.", ("post",)),
        "/ui/tokens/": _page("The signed-in user's API tokens; create one", "uiTokens", "HTML form.",
                             ("get", "post")),
        "/ui/tokens/revoke": _page("Revoke one of the user's tokens", "uiRevoke", "HTML form action.", ("post",)),
        "/ui/notifications/": _page("Webhook endpoints: state, pending events, totals, last error",
                                    "uiNotifications", browse),
        "/ui/{rest}": _page("Any other path under /ui/", "uiUnknown", "An HTML 404 page.", parameters=[rest]),
    }
