"""Reusable parts of the OpenAPI document: schemas, parameters, headers, responses, helpers."""
from __future__ import annotations

from typing import Any

from registry import errors
from registry.digests import DIGEST_PATTERN
from registry.media_types import OCI_INDEX
from registry.names import NAME_RE, TAG_RE
from tokens.access import DEFAULT_ROLE, ROLE_NAMES

JSON = "application/json"
EXAMPLE_DIGEST = "sha256:b5b2b2c507a0944348e0303114d8d93aaaa081732b86451d9bce1f432a537bc7"
EXAMPLE_TOKEN = "svc_Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx"
EXAMPLE_PREFIX = "3f9a1c0e5b7d2a64"

Spec = dict[str, Any]


def ref(kind: str, name: str) -> Spec:
    return {"$ref": f"#/components/{kind}/{name}"}


def json_content(schema: Spec, example: Any = None, media_type: str = JSON) -> Spec:
    content: Spec = {"schema": schema}
    if example is not None:
        content["example"] = example
    return {media_type: content}


def response(description: str, schema: Spec | None = None, example: Any = None,
             headers: dict[str, Spec] | None = None, media_type: str = JSON) -> Spec:
    spec: Spec = {"description": description}
    if schema is not None:
        spec["content"] = json_content(schema, example, media_type)
    if headers:
        spec["headers"] = headers
    return spec


def _denied_or(description: str, policy_example: Any) -> Spec:
    """A 403 from the credentials' role or from a governance rule: both the OCI envelope."""
    role = {"errors": [{"code": "DENIED", "message": "token 3f9a1c0e5b7d2a64 has role read; push needs write"}]}
    examples = {"role": {"value": role}, "policy": {"value": policy_example}}
    return {"description": description,
            "content": {JSON: {"schema": ref("schemas", "ErrorEnvelope"), "examples": examples}}}


def error_codes() -> list[str]:
    codes = {value.code for value in vars(errors).values() if isinstance(value, errors.ErrorCode)}
    return sorted(codes)


def _string(description: str, **extra: Any) -> Spec:
    return {"type": "string", "description": description, **extra}


REPOSITORY_GLOBS: Spec = {
    "type": ["array", "null"], "maxItems": 32, "default": None,
    "items": _string("A repository glob as the [[access]] rules spell them: `*` within a path component, `**` "
                     "across them.", minLength=1, maxLength=255),
    "description": "Limit the token to these repositories (it may do nothing elsewhere). Whatever they "
                   "say, a token never does more than its role, nor more than its owner may at the time of use.",
}
LIMITED_TO: Spec = {"type": ["array", "null"], "items": {"type": "string"},
                    "description": "The repository globs the token is limited to; null: not limited."}


SCHEMAS: dict[str, Spec] = {
    "ErrorEnvelope": {
        "type": "object",
        "description": "The OCI error envelope every registry error carries.",
        "required": ["errors"],
        "properties": {
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": {"type": "string", "enum": error_codes()},
                        "message": {"type": "string"},
                        "detail": {"description": "Structured context, when there is any."},
                    },
                },
            },
        },
        "example": {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown to registry"}]},
    },
    "AuthError": {
        "description": "A 401 from the authentication layer: the OCI envelope, whose `message` says why, "
                       "and the same text as `error`.",
        "allOf": [
            ref("schemas", "ErrorEnvelope"),
            {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
        ],
        "example": {
            "error": "authentication required: invalid username or password",
            "errors": [{"code": "UNAUTHORIZED", "message": "authentication required: invalid username or password"}],
        },
    },
    "JsonError": {
        "type": "object",
        "description": "An error of the token and ops endpoints; `field` names the offending body field.",
        "required": ["error"],
        "properties": {"error": {"type": "string"}, "field": {"type": "string"}},
        "example": {"error": "ttl_days must be between 1 and 3650", "field": "ttl_days"},
    },
    "BearerToken": {
        "type": "object",
        "description": "A signed token (JWT, HS256) for `Authorization: Bearer`. Its `access` claim lists "
                       "the requested scopes cut down to what the caller's role allows.",
        "required": ["token", "access_token", "expires_in", "issued_at"],
        "properties": {
            "token": {"type": "string"},
            "access_token": {"type": "string", "description": "The same token, under its OAuth2 name."},
            "expires_in": {"type": "integer", "description": "Seconds (`[auth] bearer_ttl_seconds`)."},
            "issued_at": {"type": "string", "format": "date-time"},
            "scope": {"type": "string", "description": "POST only: the granted scopes, separated by spaces."},
            "refresh_token": {"type": "string",
                              "description": "With `offline_token=true` (GET) or `access_type=offline` "
                                             "(password grant): docker's identitytoken, for the "
                                             "refresh_token grant; it lives `[auth] refresh_ttl_days`."},
        },
        "example": {"token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOi...", "access_token": "eyJhbGciOi...",
                    "expires_in": 300, "issued_at": "2026-01-01T12:00:00Z"},
    },
    "TokenGrantForm": {
        "type": "object",
        "required": ["grant_type"],
        "properties": {
            "grant_type": {"type": "string", "enum": ["password", "refresh_token"]},
            "username": {"type": "string", "description": "password grant: an htpasswd user, or `token`."},
            "password": {"type": "string", "description": "password grant: the password, or an API token."},
            "refresh_token": {"type": "string", "description": "refresh_token grant."},
            "scope": {"type": "string", "description": "Scopes separated by spaces."},
            "service": {"type": "string", "enum": ["svc-registry"]},
            "client_id": {"type": "string"},
            "access_type": {"type": "string", "enum": ["online", "offline"]},
        },
        "example": {"grant_type": "password", "username": "alice", "password": "correct horse",
                    "scope": "repository:team/app:pull,push", "service": "svc-registry", "client_id": "docker"},
    },
    "Catalog": {
        "type": "object",
        "required": ["repositories"],
        "properties": {"repositories": {"type": "array", "items": {"type": "string"}}},
        "example": {"repositories": ["library/alpine", "team/app"]},
    },
    "TagList": {
        "type": "object",
        "required": ["name", "tags"],
        "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "example": {"name": "team/app", "tags": ["latest", "v1.2.0"]},
    },
    "Descriptor": {
        "type": "object",
        "required": ["mediaType", "digest", "size"],
        "properties": {
            "mediaType": {"type": "string"},
            "digest": {"type": "string", "pattern": DIGEST_PATTERN},
            "size": {"type": "integer", "minimum": 0},
            "artifactType": {"type": "string"},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "ImageIndex": {
        "type": "object",
        "description": "An OCI image index; the referrers API answers with one.",
        "required": ["schemaVersion", "mediaType", "manifests"],
        "properties": {
            "schemaVersion": {"const": 2},
            "mediaType": {"const": OCI_INDEX},
            "manifests": {"type": "array", "items": ref("schemas", "Descriptor")},
        },
    },
    "Manifest": {
        "type": "object",
        "description": "An OCI image manifest or index, or a Docker schema 2 manifest or manifest "
                       "list, stored and served byte for byte.",
        "required": ["schemaVersion"],
        "properties": {"schemaVersion": {"const": 2}, "mediaType": {"type": "string"}},
    },
    "Credentials": {
        "type": "object",
        "required": ["username", "password"],
        "properties": {
            "username": _string("An htpasswd user.", minLength=1, maxLength=255),
            "password": _string("That user's password.", format="password"),
        },
        "example": {"username": "alice", "password": "correct horse"},
    },
    "TokenCreateRequest": {
        "allOf": [
            ref("schemas", "Credentials"),
            {
                "type": "object",
                "properties": {
                    "role": {"type": "string", "enum": list(ROLE_NAMES), "default": DEFAULT_ROLE.value},
                    "ttl_days": {"type": "integer", "minimum": 1, "maximum": 3650, "default": 30},
                    "description": _string("A free-text label.", maxLength=256, default=""),
                    "repositories": REPOSITORY_GLOBS,
                },
            },
        ],
        "example": {"username": "alice", "password": "correct horse", "role": "write",
                    "ttl_days": 90, "description": "CI pipeline", "repositories": ["team-a/app"]},
    },
    "TokenCreated": {
        "type": "object",
        "required": ["token", "expires_in_days", "role", "hash_prefix", "expires_at", "description"],
        "properties": {
            "token": _string("The token; shown only in this response.", pattern=r"^svc_[A-Za-z0-9_-]{43}$"),
            "expires_in_days": {"type": "integer", "description": "Equals the requested ttl_days."},
            "role": {"type": "string", "enum": list(ROLE_NAMES)},
            "hash_prefix": _string("First 16 hex digits of the token's SHA-256.", pattern="^[0-9a-f]{16}$"),
            "description": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "expires_at": {"type": "string", "format": "date-time"},
            "repositories": LIMITED_TO,
        },
        "example": {"token": EXAMPLE_TOKEN, "expires_in_days": 90, "role": "write",
                    "hash_prefix": EXAMPLE_PREFIX, "description": "CI pipeline",
                    "created_at": "2025-01-01T12:00:00Z", "expires_at": "2025-04-01T12:00:00Z"},
    },
    "TokenRecord": {
        "type": "object",
        "required": ["hash_prefix", "role", "description", "created_at", "expires_at", "expired"],
        "properties": {
            "hash_prefix": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
            "owner": {"type": "string"},
            "role": {"type": "string", "enum": list(ROLE_NAMES)},
            "description": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "expires_at": {"type": "string", "format": "date-time"},
            "expired": {"type": "boolean"},
            "repositories": LIMITED_TO,
        },
    },
    "TokenList": {
        "type": "object",
        "required": ["tokens"],
        "properties": {"tokens": {"type": "array", "items": ref("schemas", "TokenRecord")}},
        "example": {"tokens": [{"hash_prefix": EXAMPLE_PREFIX, "owner": "alice", "role": "write",
                                "description": "CI pipeline", "created_at": "2025-01-01T12:00:00Z",
                                "expires_at": "2025-04-01T12:00:00Z", "expired": False}]},
    },
    "TokenRevokeRequest": {
        "allOf": [
            ref("schemas", "Credentials"),
            {"type": "object", "required": ["hash_prefix"],
             "properties": {"hash_prefix": {"type": "string", "pattern": "^[0-9a-fA-F]{16}$"}}},
        ],
        "example": {"username": "alice", "password": "correct horse", "hash_prefix": EXAMPLE_PREFIX},
    },
    "TokenRevoked": {
        "type": "object",
        "required": ["revoked"],
        "properties": {"revoked": {"type": "string", "pattern": "^[0-9a-f]{16}$"}},
        "example": {"revoked": EXAMPLE_PREFIX},
    },
    "Health": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"const": "ok"}},
        "example": {"status": "ok"},
    },
    "Readiness": {
        "type": "object",
        "required": ["status", "checks"],
        "properties": {
            "status": {"type": "string", "enum": ["ready", "unavailable"]},
            "checks": {
                "type": "object",
                "description": "database, storage, disk and, with auth on, htpasswd and tokens: "
                               "`ok` or the reason the check failed.",
                "additionalProperties": {"type": "string"},
            },
            "failing": {"type": "array", "items": {"type": "string"}},
        },
        "example": {"status": "ready",
                    "checks": {"database": "ok", "storage": "ok", "disk": "ok"}},
    },
}

HEADERS: dict[str, Spec] = {
    "ApiVersion": {"description": "Always `registry/2.0`.", "schema": {"const": "registry/2.0"}},
    "ContentDigest": {"description": "Digest of the blob or manifest.",
                      "schema": {"type": "string", "pattern": DIGEST_PATTERN}},
    "Location": {"description": "Where the created or continued resource is.", "schema": {"type": "string"}},
    "UploadRange": {"description": "Bytes received so far, `0-<last byte>`.",
                    "schema": {"type": "string", "pattern": "^0-[0-9]+$"}},
    "UploadUUID": {"description": "The upload session id.", "schema": {"type": "string"}},
    "Link": {"description": "RFC 5988 link to the next page, `rel=\"next\"`.", "schema": {"type": "string"}},
    "WWWAuthenticate": {"description": "The challenge of `[auth] challenge`: Basic, or Bearer naming the "
                                       "token endpoint, the service and the scope the request needs.",
                        "schema": {"type": "string", "examples": [
                            'Basic realm="svc-registry"',
                            'Bearer realm="https://registry.example.internal/auth/token",service="svc-registry",'
                            'scope="repository:team/app:pull,push"']}},
    "RetryAfter": {"description": "Seconds to wait.", "schema": {"type": "integer"}},
    "RequestId": {"description": "The request's X-Request-ID, or one generated for it.",
                  "schema": {"type": "string"}},
}

PARAMETERS: dict[str, Spec] = {
    "name": {
        "name": "name", "in": "path", "required": True,
        "description": "Repository name. It may hold slashes (`team/app`), which are sent "
                       "unencoded, as every registry client does.",
        "schema": {"type": "string", "pattern": NAME_RE.pattern, "maxLength": 255},
    },
    "reference": {
        "name": "reference", "in": "path", "required": True,
        "description": "A tag or a digest.",
        "schema": {"anyOf": [{"type": "string", "pattern": TAG_RE.pattern},
                             {"type": "string", "pattern": DIGEST_PATTERN}]},
    },
    "digest": {"name": "digest", "in": "path", "required": True,
               "schema": {"type": "string", "pattern": DIGEST_PATTERN}, "example": EXAMPLE_DIGEST},
    "upload_id": {"name": "upload_id", "in": "path", "required": True,
                  "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}},
    "n": {"name": "n", "in": "query", "required": False, "description": "Page size.",
          "schema": {"type": "integer", "minimum": 0, "maximum": 1000}},
    "last": {"name": "last", "in": "query", "required": False,
             "description": "Return entries after this one.", "schema": {"type": "string"}},
    "Authorization": {"name": "Authorization", "in": "header", "required": False,
                      "description": "`Basic` (htpasswd user, or `token` + API token) or `Bearer <token>`.",
                      "schema": {"type": "string"}},
    "X-Request-ID": {"name": "X-Request-ID", "in": "header", "required": False,
                     "description": "Echoed back and written to the request log.",
                     "schema": {"type": "string", "pattern": r"^[A-Za-z0-9._:+/=-]{1,128}$"}},
}

RESPONSES: dict[str, Spec] = {
    "Unauthorized": response(
        "Authentication is on and the request carries no valid credentials.",
        ref("schemas", "AuthError"),
        headers={"WWW-Authenticate": ref("headers", "WWWAuthenticate")},
    ),
    "Denied": response(
        "The credentials are valid but their role does not allow this action; `message` names both.",
        ref("schemas", "ErrorEnvelope"),
        {"errors": [{"code": "DENIED", "message": "token 3f9a1c0e5b7d2a64 has role read; push needs write"}]},
    ),
    "TooManyRequests": response(
        "This client address failed too many logins ([auth] login_failures) and must wait `Retry-After` seconds.",
        ref("schemas", "ErrorEnvelope"), headers={"Retry-After": ref("headers", "RetryAfter")},
    ),
    "RegistryError": response("A registry error, in the OCI envelope.", ref("schemas", "ErrorEnvelope")),
    "DeniedOrImmutable": _denied_or(
        "The credentials' role does not allow this action, or an `[[immutable]]` rule refuses it: a push "
        "that would move an immutable tag elsewhere (pushing the same digest again succeeds), or a delete of "
        "an immutable tag, of a manifest carrying one, or of a manifest or blob an immutable tag's image "
        "needs (a platform image of an index, a config, a layer). The message names the rule.",
        {"errors": [{"code": "DENIED", "message": "tag 'v1' is immutable under [[immutable]] #1 \"prod/*\" "
                     "(tags ^v.*) in prod/app: it points to sha256:4c1e... and no push may move it; push under a "
                     "new tag", "detail": {"tag": "v1", "rule": "prod/*", "digest": "sha256:4c1e..."}}]}),
    "DeniedOrQuota": _denied_or(
        "The credentials' role does not allow this action, or a `[[quota]]` rule refuses it: a new upload "
        "into repositories whose quota is used up, or a blob (uploaded or mounted) that would take their "
        "usage over the limit; a refused upload's session and data are discarded. The message names the "
        "quota and gives the figures.",
        {"errors": [{"code": "DENIED", "message": "quota [[quota]] #1 \"team/*\" exceeded: a blob of 200 MiB "
                     "(209715200 bytes) would take team/* to 50.1 GiB (53796814848 bytes), over its limit of "
                     "50 GiB (53687091200 bytes) (50GiB); 49.9 GiB (53587091648 bytes) are in use",
                     "detail": {"quota": "team/*", "repository": "team/app", "limit": 53687091200,
                                "used": 53587091648, "size": 209715200}}]}),
    "MethodNotAllowed": response("The method is not allowed on this path.", ref("schemas", "ErrorEnvelope"),
                                 headers={"Allow": {"schema": {"type": "string"}}}),
    "JsonMethodNotAllowed": response("The method is not allowed on this path.", ref("schemas", "JsonError"),
                                     headers={"Allow": {"schema": {"type": "string"}}}),
}

SECURITY_SCHEMES: dict[str, Spec] = {
    "basic": {"type": "http", "scheme": "basic",
              "description": "An htpasswd user, or the username `token` with an API token as password."},
    "bearer": {"type": "http", "scheme": "bearer",
               "description": "An API token (`svc_...`), or a signed token from `/auth/token`, which "
                              "allows only its scopes (outside them: 401 with `error=\"insufficient_scope\"`)."},
}


def components() -> Spec:
    return {
        "schemas": SCHEMAS,
        "parameters": PARAMETERS,
        "headers": HEADERS,
        "responses": RESPONSES,
        "securitySchemes": SECURITY_SCHEMES,
    }
