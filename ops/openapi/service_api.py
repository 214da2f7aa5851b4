"""The token endpoints, the ops endpoints and the web UI pages, as OpenAPI path items."""
from __future__ import annotations

from ops.openapi.components import EXAMPLE_PREFIX, JSON, Spec, json_content, ref, response
from tokens.access import DEFAULT_ROLE

PUBLIC: list[Spec] = []  # no security requirement: open even with auth on
HTML = {"text/html": {"schema": {"type": "string"}}}


def _token_op(summary: str, operation_id: str, request_schema: str, ok_status: str, ok: Spec,
              description: str, not_found: bool = False) -> Spec:
    responses: dict[str, Spec] = {
        ok_status: ok,
        "400": response("Bad input; `field` names the offending field. Also a create beyond `[auth] "
                        "max_tokens_per_user` live tokens (100).", ref("schemas", "JsonError"),
                        {"error": "role must be one of read, write, admin", "field": "role"}),
        "401": response("Wrong username or password.", ref("schemas", "JsonError"),
                        {"error": "invalid username or password"}),
        "405": ref("responses", "JsonMethodNotAllowed"),
        "413": response("The body is over 64 KiB.", ref("schemas", "JsonError")),
        "415": response("The body is not sent as `Content-Type: application/json` (a web page can make a browser "
                        "send text/plain or a form anywhere, but not JSON).", ref("schemas", "JsonError"),
                        {"error": "the request body must be JSON, sent with Content-Type: application/json",
                         "field": "body"}),
        "429": response("This client address failed too many logins ([auth] login_failures) and must wait "
                        "`Retry-After` seconds (see docs/security.md).",
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
    return {**api_token_paths(), "/auth/token": bearer_token_path()}


def api_token_paths() -> dict[str, Spec]:
    credentials_note = ("Open even with auth on: the username and password of an htpasswd user travel "
                        "in the JSON body and are checked here. The Authorization header is ignored.")
    return {
        "/api/tokens": _token_op(
            "Create an API token", "createToken", "TokenCreateRequest", "201",
            response("Created. `token` is shown only here: store it.", ref("schemas", "TokenCreated")),
            credentials_note + f" `role` defaults to {DEFAULT_ROLE}, `ttl_days` to 30 (1..3650)."),
        "/api/tokens/list": _token_op(
            "List the user's API tokens", "listTokens", "Credentials", "200",
            response("The user's tokens; never the token itself nor its full hash. Tokens made before the "
                     "user's password changed, or by an earlier user of the same name, are not listed: "
                     "they are refused.", ref("schemas", "TokenList")),
            credentials_note),
        "/api/tokens/revoke": _token_op(
            "Revoke an API token", "revokeToken", "TokenRevokeRequest", "200",
            response("Revoked; every worker refuses the token from its next request.",
                     ref("schemas", "TokenRevoked")),
            credentials_note, not_found=True),
    }


def _query(name: str, description: str, schema: Spec | None = None) -> Spec:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": schema or {"type": "string"}}


def bearer_token_path() -> Spec:
    """/auth/token, the realm of the Bearer challenge (docker/distribution's token and OAuth2 specs)."""
    granted = response("A signed token for the requested scopes, as far as the caller's role allows.",
                       ref("schemas", "BearerToken"))
    refused = response("No credentials, or credentials that do not check out.", ref("schemas", "AuthError"),
                       {"error": "authentication required: invalid username or password",
                        "errors": [{"code": "UNAUTHORIZED",
                                    "message": "authentication required: invalid username or password"}]},
                       headers={"WWW-Authenticate": {"schema": {"type": "string",
                                                                "example": 'Basic realm="svc-registry"'}}})
    common = {
        "400": response("A malformed scope, an unknown service or grant type, a body that is not a form.",
                        ref("schemas", "AuthError"),
                        {"error": "scope 'repository:team/app' is not type:name:actions",
                         "errors": [{"code": "UNSUPPORTED",
                                     "message": "scope 'repository:team/app' is not type:name:actions"}]}),
        "401": refused,
        "405": ref("responses", "JsonMethodNotAllowed"),
        "429": response("This client address failed too many logins ([auth] login_failures) and must wait "
                        "`Retry-After` seconds (see docs/security.md).",
                        ref("schemas", "AuthError"), headers={"Retry-After": ref("headers", "RetryAfter")}),
    }
    description = ("Open even with auth on: it checks the credentials it is given. Clients reach it from "
                   "the Bearer challenge of `[auth] challenge = \"bearer\"`; it answers either way.")
    return {
        "get": {
            "tags": ["tokens"], "summary": "Get a signed token (Docker token flow)", "operationId": "getBearerToken",
            "description": description + " Credentials: `Authorization: Basic` (an htpasswd user, or `token` "
                                         "and an API token) or `Bearer` with an API token.",
            "security": [{"basic": []}, {"bearer": []}],
            "parameters": [
                _query("service", "The challenge's service; another is refused.",
                       {"type": "string", "enum": ["svc-registry"]}),
                {**_query("scope", "`type:name:actions`, e.g. `repository:team/app:pull,push` or "
                                   "`registry:catalog:*`; repeat it, or separate several by spaces."),
                 "schema": {"type": "array", "items": {"type": "string"}}, "explode": True},
                _query("offline_token", "`true`: also return a refresh token.",
                       {"type": "string", "enum": ["true", "false"]}),
                _query("client_id", "The client's name (docker sends `docker`); not checked."),
                _query("account", "The account the client acts as; not checked."),
            ],
            "responses": {"200": granted, **common},
        },
        "post": {
            "tags": ["tokens"], "summary": "Get a signed token (OAuth2 password or refresh_token grant)",
            "operationId": "postBearerToken",
            "description": description + " What docker sends once it holds a refresh token (its identitytoken).",
            "security": PUBLIC,
            "requestBody": {"required": True, "content": {"application/x-www-form-urlencoded": {
                "schema": ref("schemas", "TokenGrantForm")}}},
            "responses": {"200": granted, **common},
        },
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


def _to_ui(summary: str, operation_id: str) -> Spec:
    operation = {"tags": ["web UI"], "summary": summary, "security": PUBLIC,
                 "description": "Open even with auth on, so that a browser never meets a login dialog.",
                 "responses": {"302": {"description": "To `/ui/`, keeping the query string.",
                                       "headers": {"Location": {"schema": {"type": "string"}}}},
                               "405": ref("responses", "JsonMethodNotAllowed")}}
    return {"get": {**operation, "operationId": operation_id},
            "head": {**operation, "operationId": operation_id + "Head"}}


def ui_paths() -> dict[str, Spec]:
    name = _path_param("name", "Repository name, slashes included.")
    reference = _path_param("reference", "A tag or a digest.")
    rest = _path_param("rest", "Any other path.")
    browse = "HTML for people. With auth on, browsing asks for sign-in."
    return {
        "/": _to_ui("The service's address: redirects to the web UI", "root"),
        "/ui": _to_ui("Redirects to the web UI's home, /ui/", "uiRoot"),
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
                                    "uiNotifications", browse + " Admins only."),
        "/ui/replication/": _page("Replication policies: backlog, totals, last error, latest runs",
                                  "uiReplication", browse + " Admins only."),
        "/ui/access/": _page("The namespaces the user may use, with their role; for admins, who may read, write "
                             "and delete a repository and why", "uiAccess", "HTML; `?repository=` for admins.",
                             parameters=[_query("repository", "A repository to explain (admins).")]),
        "/ui/robots/": _page("Robot accounts: list and create (admins)", "uiRobots", "HTML form.", ("get", "post")),
        "/ui/robots/action": _page("Disable, enable, rotate or delete a robot account (admins)", "uiRobotAction",
                                   "HTML form action.", ("post",)),
        "/ui/audit/": _page("The audit log, newest first, with filters (admins)", "uiAudit", "HTML.", parameters=[
            _query(name, description) for name, description in (
                ("actor", "A user's or robot's name, or a token's hash prefix."),
                ("repository", "A repository, or a namespace ending in /."),
                ("action", "push, tag.move, delete, sign-in, token.create, ..."),
                ("outcome", "success, denied, failed or throttled."),
                ("since", "A time, or an age such as 24h or 7d."),
                ("before", "Events older than this id (the next page)."))]),
        "/ui/{rest}": _page("Any other path under /ui/", "uiUnknown", "An HTML 404 page.", parameters=[rest]),
    }
