"""Sign-in, sign-out and the tokens page. Tokens go through the same service as /api/tokens."""
from __future__ import annotations

import re
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from ops.ui import access
from ops.ui.access import UiRequest, error_page, page, ui_view
from ops.ui.forms import RevokeForm, SignInForm, TokenForm, globs
from tokens import services
from tokens.access import Role
from tokens.login import password_login
from tokens.services import InvalidTokenRequest, TokenNotFound, TooManyTokens
from tokens.throttle import Throttled

HASH_PREFIX = re.compile(r"[0-9a-f]{16}")
ROLE_HELP = {
    Role.READ: "pull images",
    Role.WRITE: "pull and push images",
    Role.ADMIN: "pull, push and delete",
}


@ui_view("GET", "POST", browse=False)
def sign_in(request: UiRequest) -> HttpResponse:
    target = access.safe_next(request, request.POST.get("next") or request.GET.get("next"))
    if request.viewer.signed_in and request.method == "GET":
        return HttpResponseRedirect(target)
    form = SignInForm(request.POST if request.method == "POST" else None)
    status, retry_after = 200, 0
    if form.is_valid():
        username, password = form.cleaned_data["username"], form.cleaned_data["password"]
        try:
            if password_login(request, username, password):
                access.sign_in(request, username)
                return HttpResponseRedirect(target)
            form.add_error(None, "Wrong username or password.")
            status = 400
        except Throttled as exc:
            retry_after, status = exc.retry_after, 429
            form.add_error(None, f"Too many failed sign-ins. Try again in {retry_after} seconds.")
    elif form.is_bound:
        status = 400
    response = page(request, "sign_in.html", {"form": form, "next": target, "hide_sign_in": True},
                    status)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


@ui_view("POST", browse=False)
def sign_out(request: HttpRequest) -> HttpResponse:
    access.sign_out(request)
    return HttpResponseRedirect(f"{reverse('ui:sign-in')}?{urlencode({'signed_out': '1'})}")


@ui_view("GET", "POST", browse=False, account=True)
def tokens(request: UiRequest) -> HttpResponse:
    owner = request.viewer.username
    assert owner is not None  # ui_view(account=True) let only a signed-in user in
    form, created, status = TokenForm(), None, 200
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                created = services.create_token(owner, data["role"], data["ttl_days"], data["description"],
                                                globs(data["repositories"]))
                form = TokenForm()
            except InvalidTokenRequest as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            except TooManyTokens as exc:
                form.add_error(None, exc.message)
        if form.errors:
            status = 400
    return page(request, "tokens.html", {
        "nav": "tokens", "form": form, "created": created, "tokens": services.tokens_of_user(owner),
        "roles": [(role.value, ROLE_HELP[role]) for role in Role],
        "revoked": _revoked(request),
    }, status)


def _revoked(request: HttpRequest) -> str:
    """The hash prefix named after a revocation; anything else is not echoed."""
    value = request.GET.get("revoked", "") if request.method == "GET" else ""
    return value if HASH_PREFIX.fullmatch(value) else ""


@ui_view("POST", browse=False, account=True)
def revoke(request: UiRequest) -> HttpResponse:
    form = RevokeForm(request.POST)
    if not form.is_valid():
        return error_page(request, 400, "No token chosen", "Choose a token to revoke from the list.")
    prefix = form.cleaned_data["hash_prefix"]
    try:
        services.revoke_token(request.viewer.username, prefix)
    except InvalidTokenRequest as exc:
        return error_page(request, 400, "Not a token", exc.message)
    except TokenNotFound:
        return error_page(request, 404, "Token not found",
                          "You have no token with that hash prefix. It may already be revoked.")
    return HttpResponseRedirect(f"{reverse('ui:tokens')}?{urlencode({'revoked': prefix})}")
