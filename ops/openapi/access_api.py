"""The robot account endpoints (admins only), as OpenAPI path items, and their schemas."""
from __future__ import annotations

from ops.openapi.components import REPOSITORY_GLOBS, Spec, json_content, ref, response
from tokens.access import ROLE_NAMES

ROBOT_NAME = {"type": "string", "pattern": r"^(robot\$)?[a-z0-9][a-z0-9._-]{0,63}$",
              "description": "robot$NAME, or NAME alone."}
EXAMPLE_ROBOT = {"name": "robot$team-a-ci", "role": "write", "repositories": ["team-a/*"],
                 "description": "CI of team A", "created_by": "erin", "created_at": "2025-01-01T12:00:00Z",
                 "expires_at": "2025-04-01T12:00:00Z", "rotated_at": None, "state": "active"}
EXAMPLE_SECRET = "svcr_Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx"


def _with_credentials(properties: Spec, required: list[str], example: Spec) -> Spec:
    return {"allOf": [ref("schemas", "Credentials"),
                      {"type": "object", "required": required, "properties": properties}],
            "example": {"username": "erin", "password": "correct horse", **example}}


SCHEMAS: dict[str, Spec] = {
    "Robot": {
        "type": "object",
        "required": ["name", "role", "repositories", "created_at", "expires_at", "state"],
        "properties": {
            "name": {"type": "string"},
            "role": {"type": "string", "enum": list(ROLE_NAMES)},
            "repositories": {"type": "array", "items": {"type": "string"}},
            "description": {"type": "string"},
            "created_by": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "expires_at": {"type": "string", "format": "date-time"},
            "rotated_at": {"type": ["string", "null"], "format": "date-time"},
            "state": {"type": "string", "enum": ["active", "disabled", "expired"]},
        },
        "example": EXAMPLE_ROBOT,
    },
    "RobotWithSecret": {
        "allOf": [ref("schemas", "Robot"), {
            "type": "object", "required": ["secret"],
            "properties": {"secret": {"type": "string", "pattern": r"^svcr_[A-Za-z0-9_-]{43}$",
                                      "description": "The password of robot$NAME; shown only here."}}}],
        "example": {**EXAMPLE_ROBOT, "secret": EXAMPLE_SECRET},
    },
    "RobotCreateRequest": _with_credentials({
        "name": ROBOT_NAME,
        "repositories": {"type": "array", "minItems": 1, "maxItems": 32, "items": REPOSITORY_GLOBS["items"],
                         "description": "The repositories it may use; nothing elsewhere."},
        "role": {"type": "string", "enum": list(ROLE_NAMES), "default": "write"},
        "ttl_days": {"type": "integer", "minimum": 1, "maximum": 3650, "default": 90},
        "description": {"type": "string", "maxLength": 256, "default": ""},
    }, ["name", "repositories"], {"name": "team-a-ci", "repositories": ["team-a/*"], "role": "write"}),
    "RobotNameRequest": _with_credentials({"name": ROBOT_NAME}, ["name"], {"name": "robot$team-a-ci"}),
    "RobotList": {"type": "object", "required": ["robots"],
                  "properties": {"robots": {"type": "array", "items": ref("schemas", "Robot")}}},
    "RobotDeleted": {"type": "object", "required": ["deleted"], "properties": {"deleted": {"type": "string"}}},
}


def _op(summary: str, operation_id: str, request_schema: str, ok_status: str, ok: Spec, description: str,
        named: bool = True) -> Spec:
    responses: dict[str, Spec] = {
        ok_status: ok,
        "400": response("Bad input; `field` names the offending field.", ref("schemas", "JsonError"),
                        {"error": "repositories: a robot needs at least one glob, such as \"team-a/*\"",
                         "field": "repositories"}),
        "401": response("Wrong username or password.", ref("schemas", "JsonError")),
        "403": response("The user is not an admin ([auth] admins).", ref("schemas", "JsonError"),
                        {"error": "alice is not an admin ([auth] admins): only admins manage robot accounts"}),
        "405": ref("responses", "JsonMethodNotAllowed"),
        "413": response("The body is over 64 KiB.", ref("schemas", "JsonError")),
        "415": response("The body is not sent as `Content-Type: application/json`.", ref("schemas", "JsonError")),
        "429": response("This client address failed too many logins and must wait `Retry-After` seconds.",
                        ref("schemas", "JsonError"), headers={"Retry-After": ref("headers", "RetryAfter")}),
    }
    if named:
        responses["404"] = response("No robot account of that name.", ref("schemas", "JsonError"),
                                    {"error": "no robot account 'robot$team-a-ci'", "field": "name"})
    return {"post": {
        "tags": ["tokens"], "summary": summary, "operationId": operation_id, "security": [],
        "description": "Admins only: an htpasswd admin's username and password travel in the JSON body. "
                       + description,
        "requestBody": {"required": True, "content": json_content(ref("schemas", request_schema))},
        "responses": responses,
    }}


def paths() -> dict[str, Spec]:
    robot = response("The robot account.", ref("schemas", "Robot"))
    created = _op("Create a robot account", "createRobot", "RobotCreateRequest", "201",
                  response("Created. `secret` is shown only here: store it.", ref("schemas", "RobotWithSecret")),
                  "It signs in as robot$NAME with the secret as the password (Basic, or the token flow), with "
                  "its role on its repositories and nothing elsewhere.", named=False)
    created["post"]["responses"]["409"] = response("A robot account of that name exists.", ref("schemas", "JsonError"))
    return {
        "/api/robots": created,
        "/api/robots/list": _op("List robot accounts", "listRobots", "Credentials", "200",
                                response("Every robot account; never a secret.", ref("schemas", "RobotList")),
                                "", named=False),
        "/api/robots/disable": _op("Disable a robot account", "disableRobot", "RobotNameRequest", "200", robot,
                                   "Its next request, and every signed token it holds, is refused (401)."),
        "/api/robots/enable": _op("Enable a robot account again", "enableRobot", "RobotNameRequest", "200", robot, ""),
        "/api/robots/rotate": _op("Rotate a robot account's secret", "rotateRobot", "RobotNameRequest", "200",
                                  response("The new secret, shown only here; the old one no longer works.",
                                           ref("schemas", "RobotWithSecret")), "The name stays."),
        "/api/robots/delete": _op("Delete a robot account", "deleteRobot", "RobotNameRequest", "200",
                                  response("Deleted.", ref("schemas", "RobotDeleted")), ""),
    }
