"""Robot account endpoints, for admins: JSON bodies with an htpasswd admin's username and password,
as the token endpoints take them (tokens.views)."""
from __future__ import annotations

from typing import Any

from django.http import HttpResponse, JsonResponse

from tokens import authz, robots
from tokens.access import Role
from tokens.principal import AuthenticatedHttpRequest, Mechanism, user
from tokens.services import NotAllowed
from tokens.views import string_field, token_api


def _admin(username: str) -> None:
    if not authz.is_admin(user(username, Mechanism.PASSWORD)):
        raise NotAllowed(f"{username} is not an admin ([auth] admins): only admins manage robot accounts")


@token_api
def create_robot(request: AuthenticatedHttpRequest, body: dict[str, Any], username: str) -> HttpResponse:
    _admin(username)
    issued = robots.create(string_field(body, "name"), body.get("repositories"), body.get("role", Role.WRITE.value),
                           body.get("ttl_days", robots.DEFAULT_TTL_DAYS), body.get("description", ""),
                           created_by=username)
    return JsonResponse(issued.as_dict(), status=201)


@token_api
def list_robots(request: AuthenticatedHttpRequest, body: dict[str, Any], username: str) -> HttpResponse:
    _admin(username)
    return JsonResponse({"robots": [robot.as_dict() for robot in robots.list_robots()]})


@token_api
def disable_robot(request: AuthenticatedHttpRequest, body: dict[str, Any], username: str) -> HttpResponse:
    _admin(username)
    return JsonResponse(robots.set_disabled(string_field(body, "name"), True).as_dict())


@token_api
def enable_robot(request: AuthenticatedHttpRequest, body: dict[str, Any], username: str) -> HttpResponse:
    _admin(username)
    return JsonResponse(robots.set_disabled(string_field(body, "name"), False).as_dict())


@token_api
def rotate_robot(request: AuthenticatedHttpRequest, body: dict[str, Any], username: str) -> HttpResponse:
    _admin(username)
    return JsonResponse(robots.rotate(string_field(body, "name")).as_dict())


@token_api
def delete_robot(request: AuthenticatedHttpRequest, body: dict[str, Any], username: str) -> HttpResponse:
    _admin(username)
    name = robots.full_name(string_field(body, "name"))
    robots.delete(name)
    return JsonResponse({"deleted": name})
