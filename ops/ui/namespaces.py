"""The access page: the namespaces the viewer may use, with their role there; and for admins, who may
read, write and delete a repository, and why (which rule). Everything is the access decision's
(tokens.authz), asked as the registry asks it."""
from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpResponse

from ops.ui.access import UiRequest, page, ui_view
from registry.names import is_valid_name
from tokens import authz, htpasswd, robots
from tokens.access import Action, Role
from tokens.principal import ANONYMOUS, Mechanism, Principal, user
from tokens.rules import AccessEntry, Glob, Governing


@dataclass(frozen=True)
class Namespace:
    glob: str
    role: Role
    via: str  # "you", "group team-a", "anyone"
    rule: str  # the entry's title
    narrowed: tuple[tuple[str, str], ...] = ()  # (more specific glob, the role there) where it is less


@dataclass(frozen=True)
class Access:
    who: str
    kind: str
    role: Role | None
    why: str
    pull: bool
    push: bool
    delete: bool


def _head(glob: Glob) -> str:
    return next((glob.text[:i] for i, c in enumerate(glob.text) if c in "*?["), glob.text)


def namespaces(principal: Principal) -> list[Namespace]:
    """The globs where rules give the viewer a role (or give anyone one), most specific first, each
    with the more specific globs inside it that give the viewer less."""
    compiled = authz.rules()
    groups = authz.groups_of(principal)

    def role_at(entries: tuple[AccessEntry, ...]) -> Role | None:
        governing = Governing("", entries)
        return authz.higher(governing.role_of(principal.name, groups), governing.anonymous)

    found: list[Namespace] = []
    for glob, entries in compiled.globs:
        for entry in entries:
            grants = [(entry.role, "you" if principal.name in entry.users else
                       "group " + ", ".join(sorted(entry.groups & groups)))] if entry.role is not None \
                and entry.names(principal.name, groups) else []
            if entry.anonymous is not None:
                grants.append((entry.anonymous, "anyone, without signing in"))
            for role, via in grants:
                less = tuple((inner.text, str(inner_role or "none")) for inner, carried in compiled.globs
                             if inner.specificity > glob.specificity and _head(inner).startswith(_head(glob))
                             for inner_role in [role_at(carried)] if inner_role is None or inner_role.rank < role.rank)
                found.append(Namespace(glob.text, role, via, entry.title, less))
    return found


def who_can(repository: str) -> list[Access]:
    """Every htpasswd user, robot account and anonymous callers, with their role on the repository."""
    principals: list[tuple[Principal, str]] = [
        (user(name, Mechanism.PASSWORD), "user") for name in sorted(htpasswd.current_file().snapshot().users)]
    principals += [(robots.principal(robot, Mechanism.ROBOT), robot.state) for robot in robots.list_robots()]
    principals.append((ANONYMOUS, "anonymous"))
    rows = []
    for principal, kind in principals:
        role, where = authz.role_on(principal, repository)
        if kind in ("disabled", "expired"):
            role, where = None, f"the robot account is {kind}"
        why = where or ("its own repositories" if principal.repositories else
                        "every user is an admin while no rule, admin or default role says otherwise")
        rows.append(Access(principal.name, kind if kind in ("user", "anonymous") else "robot", role, why,
                           *(authz.allows(principal, repository, action) and role is not None
                             for action in (Action.PULL, Action.PUSH, Action.DELETE))))
    return sorted(rows, key=lambda row: (-(row.role.rank if row.role else 0), row.who))


@ui_view("GET", account=True)
def access(request: UiRequest) -> HttpResponse:
    viewer = request.viewer
    compiled = authz.rules()
    repository = request.GET.get("repository", "").strip()[:255]
    valid = bool(repository) and is_valid_name(repository)
    return page(request, "access.html", {
        "nav": "access", "admin": viewer.is_admin, "namespaces": namespaces(viewer.principal),
        "groups": sorted(authz.groups_of(viewer.principal)), "default_role": compiled.default_role,
        "everywhere_admin": not compiled.configured or compiled.is_admin(viewer.principal.name,
                                                                          authz.groups_of(viewer.principal)),
        "configured": compiled.configured, "repository": repository, "valid": valid,
        "rows": who_can(repository) if viewer.is_admin and valid else [],
        "governing": compiled.governing(repository).glob if valid else None,
    })
