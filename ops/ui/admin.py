"""Admin pages: robot accounts (create, disable, enable, rotate, delete) and the audit log with filters.
Robots go through the same service as /api/robots and manage.py, which records each change."""
from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse

from audit import log, queries
from audit.management.commands.audit import moment
from ops.ui.access import UiRequest, error_page, page, ui_view
from ops.ui.forms import globs
from tokens import robots
from tokens.access import ROLE_NAMES, Role
from tokens.services import TokenError

AUDIT_PAGE = 50
ROBOT_VERBS = ("disable", "enable", "rotate", "delete")


class RobotForm(forms.Form):
    name = forms.CharField(max_length=80)
    repositories = forms.CharField(max_length=8192, widget=forms.Textarea)
    role = forms.ChoiceField(choices=[(role, role) for role in ROLE_NAMES], initial=Role.WRITE.value)
    ttl_days = forms.IntegerField(initial=robots.DEFAULT_TTL_DAYS)
    description = forms.CharField(required=False, max_length=256)


class RobotActionForm(forms.Form):
    name = forms.CharField(max_length=80)
    verb = forms.ChoiceField(choices=[(verb, verb) for verb in ROBOT_VERBS])


@ui_view("GET", "POST", admin=True)
def robot_list(request: UiRequest) -> HttpResponse:
    form, issued, status = RobotForm(), None, 200
    if request.method == "POST":
        form = RobotForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                issued = robots.create(data["name"], globs(data["repositories"]), data["role"], data["ttl_days"],
                                       data["description"], created_by=request.viewer.username or "")
                form = RobotForm()
            except TokenError as exc:
                field = getattr(exc, "field", None)
                form.add_error(field if field in form.fields else None, getattr(exc, "message", str(exc)))
        if form.errors:
            status = 400
    return page(request, "robots.html", {"nav": "robots", "form": form, "issued": issued,
                                         "robots": robots.list_robots(), "done": _done(request)}, status)


def _done(request: UiRequest) -> str:
    """What the redirect after an action names; only a robot name and a known verb are echoed."""
    verb, name = request.GET.get("done", ""), request.GET.get("robot", "")
    return f"{name} {verb}d" if verb in ("disable", "enable", "delete") and robots.NAME.fullmatch(
        name.removeprefix("robot$")) else ""


@ui_view("POST", admin=True)
def robot_action(request: UiRequest) -> HttpResponse:
    form = RobotActionForm(request.POST)
    if not form.is_valid():
        return error_page(request, 400, "No robot chosen", "Choose a robot account and an action from the list.")
    name, verb = form.cleaned_data["name"], form.cleaned_data["verb"]
    try:
        if verb == "rotate":
            issued = robots.rotate(name)
            return page(request, "robots.html", {"nav": "robots", "form": RobotForm(), "issued": issued,
                                                 "rotated": True, "robots": robots.list_robots()})
        if verb == "delete":
            robots.delete(name)
        else:
            robots.set_disabled(name, verb == "disable")
    except TokenError as exc:
        return error_page(request, 404, "Robot account not found", getattr(exc, "message", str(exc)))
    target = f"{reverse('ui:robots')}?{urlencode({'done': verb, 'robot': robots.full_name(name)})}"
    return HttpResponseRedirect(target)


AUDIT_FILTERS = ("actor", "repository", "action", "outcome", "since", "before")


@ui_view("GET", admin=True)
def audit_log(request: UiRequest) -> HttpResponse:
    query = {key: request.GET.get(key, "").strip()[:255] for key in AUDIT_FILTERS}
    error = ""
    since = None
    if query["since"]:
        try:
            since = moment(query["since"])
        except Exception as exc:  # CommandError's message says what is wrong
            error = str(exc)
    outcome = query["outcome"]
    filters = queries.Filters(
        since=since, actor=query["actor"], repository=query["repository"], action=query["action"][:32],
        outcome=outcome if outcome in list(log.Outcome) else "")
    before = int(query["before"]) if query["before"].isdigit() else 0
    rows = queries.newest(filters, before_id=before, limit=AUDIT_PAGE + 1)
    more = len(rows) > AUDIT_PAGE
    rows = rows[:AUDIT_PAGE]
    older = urlencode({**{k: v for k, v in query.items() if v and k != "before"}, "before": rows[-1].id}) \
        if more and rows else ""
    return page(request, "audit.html", {
        "nav": "audit", "events": rows, "filters": filters, "since": query["since"], "error": error,
        "outcomes": [o.value for o in log.Outcome], "older": older, "paged": bool(before),
    })
