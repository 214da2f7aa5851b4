"""Who is looking at the UI and what they may do; the decorator every UI view wears.

/ui/* is public at the middleware level, so the UI enforces its own sign-in: with auth on, nothing of
the registry is shown until an htpasswd user signs in. What a signed-in user sees and may do is the
access decision's (tokens.authz), as on the registry API: lists hold only what they may read, a
repository they may not read is "not found" exactly as one that does not exist, and admin pages
(robots, the audit log, the access view) are for admins. The session is a row in the database (its
cookie holds only its random key), so signing out ends it on the server; only the UI uses it, so the
session middleware is applied to these views alone and registry clients never get a cookie. Every UI
view is CSRF-protected (the CSRF middleware is not global: registry clients PUT without tokens). On
a request that came over HTTPS the session and CSRF cookies are Secure.
"""
from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, cast
from urllib.parse import urlencode

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.contrib.sessions.middleware import SessionMiddleware
from django.middleware.csrf import rotate_token
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.crypto import constant_time_compare, salted_hmac
from django.utils.decorators import decorator_from_middleware
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_protect

from registry import visibility
from registry.services import exceptions as exc
from regsite.forwarded import public_host
from regsite.version import version
from tokens import authz, htpasswd
from tokens.access import Action, public
from tokens.principal import ANONYMOUS, OPEN, AuthenticatedHttpRequest, Mechanism, Principal, user

log = logging.getLogger(__name__)
View = Callable[..., HttpResponse]

SESSION_USER = "ui_user"
SESSION_SINCE = "ui_since"
SESSION_CREDENTIAL = "ui_credential"
SESSION_SECONDS = 12 * 3600
# The stub types decorator_from_middleware's result as any view or view factory; it wraps a view in a view.
with_session = cast(Callable[[View], View], decorator_from_middleware(SessionMiddleware))

# Pages are built from stylesheets and scripts under /static/ only: no inline code, no framing.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Viewer:
    username: str | None
    auth_enabled: bool
    delete_enabled: bool
    # Who the access decision judges: the signed-in user, anyone with auth off, or nobody.
    principal: Principal = field(default=OPEN, compare=False)

    @property
    def signed_in(self) -> bool:
        return self.username is not None

    @property
    def can_browse(self) -> bool:
        return self.signed_in or not self.auth_enabled

    @property
    def can_delete(self) -> bool:
        """Whether deleting is possible at all here; may_delete says where."""
        return self.can_browse and self.delete_enabled

    @property
    def is_admin(self) -> bool:
        return self.can_browse and authz.is_admin(self.principal)

    def may(self, repository: str, action: Action) -> authz.Decision:
        return authz.decide(self.principal, repository, action)

    def may_read(self, repository: str) -> bool:
        return self.can_browse and self.may(repository, Action.PULL).allowed

    def may_delete(self, repository: str) -> bool:
        return self.can_delete and self.may(repository, Action.DELETE).allowed

    @property
    def visible(self) -> visibility.Visible:
        return authz.visible(self.principal) if self.can_browse else visibility.NOTHING


class UiRequest(AuthenticatedHttpRequest):
    viewer: Viewer  # set by ui_view


def _credential(username: str) -> str | None:
    """A keyed fingerprint of the user's current htpasswd entry; None once the user is gone.

    Kept in the session, it ends every sign-in of a user whose password is changed or who is
    removed from the file, on their next page view (the file is re-read when it changes).
    """
    stored = htpasswd.current_file().snapshot().users.get(username)
    if stored is None:
        return None
    return salted_hmac("ops.ui.session", f"{username}:{stored}", algorithm="sha256").hexdigest()


def _signed_in_user(session: Any) -> str | None:
    username, since = session.get(SESSION_USER), session.get(SESSION_SINCE)
    if not isinstance(username, str) or not isinstance(since, int):
        return None
    if not 0 <= time.time() - since <= SESSION_SECONDS:
        return None
    current, remembered = _credential(username), session.get(SESSION_CREDENTIAL)
    if current is None or not isinstance(remembered, str) or not constant_time_compare(current, remembered):
        return None
    return username


def viewer_for(request: HttpRequest) -> Viewer:
    session = getattr(request, "session", None)
    username = _signed_in_user(session) if session is not None else None
    if not settings.AUTH_ENABLED:
        principal = OPEN
    else:
        principal = user(username, Mechanism.PASSWORD) if username is not None else ANONYMOUS
    return Viewer(username, settings.AUTH_ENABLED, settings.REGISTRY_DELETE_ENABLED, principal)


def sign_in(request: HttpRequest, username: str) -> None:
    # Sessions that ran out are deleted here (an indexed DELETE), so none outlive their 12 hours
    # by long without a scheduled job.
    request.session.clear_expired()
    request.session.flush()
    rotate_token(request)
    request.session[SESSION_USER] = username
    request.session[SESSION_SINCE] = int(time.time())
    request.session[SESSION_CREDENTIAL] = _credential(username)
    request.session.set_expiry(SESSION_SECONDS)


def sign_out(request: HttpRequest) -> None:
    request.session.flush()  # deletes the session's row: its cookie, wherever copied, is dead


def safe_next(request: HttpRequest, target: str | None) -> str:
    """Where to go after signing in: a UI path on this host, else the home page."""
    if (
        target
        and target.startswith("/ui/")
        and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure())
    ):
        return target
    return reverse("ui:home")


def sign_in_redirect(request: HttpRequest) -> HttpResponse:
    target = request.get_full_path() if request.method == "GET" else reverse("ui:home")
    return HttpResponseRedirect(f"{reverse('ui:sign-in')}?{urlencode({'next': target})}")


def _registry_host(request: HttpRequest) -> str:
    """The registry's host as the pull commands on the pages name it: [server] external_url's, else
    the one the browser used (shown to that browser alone), else a placeholder."""
    try:
        return public_host(request) or request.get_host()
    except DisallowedHost:  # a Host header that is no host name
        return "registry.example"


def page(request: HttpRequest, template: str, context: dict[str, Any] | None = None,
         status: int = 200) -> HttpResponse:
    viewer = getattr(request, "viewer", None) or viewer_for(request)
    base = {"viewer": viewer, "registry_host": _registry_host(request), "registry_version": version(),
            "notifications_on": bool(settings.NOTIFICATIONS), "replication_on": bool(settings.REPLICATION)}
    text = render_to_string(f"ui/{template}", {**base, **(context or {})}, request)
    # Text that is not Unicode (a lone surrogate such as \ud800 in a pushed image config, or in a
    # manifest stored before pushes refused it) is written out rather than failing the whole page.
    response = HttpResponse(text.encode("utf-8", "backslashreplace"), status=status)
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def error_page(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    # The request id (set by ops.middleware) lets an operator find the logged error.
    context = {"status": status, "title": title, "message": message,
               "request_id": getattr(request, "request_id", "")}
    return page(request, "error.html", context, status)


NOT_FOUND = (exc.NameUnknown, exc.NameInvalid, exc.ManifestUnknown, exc.TagInvalid,
             exc.DigestInvalid, exc.BlobUnknown)


def registry_error_page(request: HttpRequest, error: exc.RegistryError) -> HttpResponse:
    if isinstance(error, (exc.NameUnknown, exc.NameInvalid)):
        return error_page(request, 404, "Repository not found",
                          "No repository by that name holds any images here. It may have been "
                          "deleted, or the name may be misspelt.")
    if isinstance(error, NOT_FOUND):
        return error_page(request, 404, "Not found",
                          f"{error.message.capitalize()}. It may have been deleted.")
    if isinstance(error, exc.PolicyDenied):
        return error_page(request, 403, "Refused by the registry's rules", error.message)
    if isinstance(error, exc.ReadOnlyNamespace):
        return error_page(request, 405, "A mirror is read-only", f"{error.message.capitalize()}: its content "
                          "comes from the upstream, and garbage collection evicts what is not pulled.")
    if isinstance(error, exc.DeleteDisabled):
        return error_page(request, 403, "Deletes are disabled",
                          "This registry is configured with deletes disabled "
                          "([registry] delete_enabled = false).")
    return error_page(request, 400, "The registry refused this request", error.message)


def ui_view(*methods: str, browse: bool = True, account: bool = False, admin: bool = False) -> Callable[[View], View]:
    """``browse``: shows registry content, so needs sign-in when auth is on.
    ``account``: belongs to a user (tokens), so needs sign-in even with auth off.
    ``admin``: for admins only (tokens.authz.is_admin)."""
    allowed = set(methods or ("GET",))
    allowed |= {"HEAD"} if "GET" in allowed else set()

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapper(request: UiRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            request.viewer = viewer = viewer_for(request)
            if request.method not in allowed:
                response = error_page(request, 405, "Method not allowed",
                                      f"This page does not accept {request.method} requests.")
                response["Allow"] = ", ".join(sorted(allowed))
                return response
            if (browse and not viewer.can_browse) or (account and not viewer.signed_in):
                return sign_in_redirect(request)
            if admin and not viewer.is_admin:
                return error_page(request, 403, "For admins only",
                                  "Only the registry's admins ([auth] admins in its configuration) see this page.")
            try:
                return view(request, *args, **kwargs)
            except exc.RegistryError as error:
                return registry_error_page(request, error)
            except Http404:
                return not_found(request)
            except Exception:
                log.exception("UI page %s failed", request.path)
                return error_page(request, 500, "Something went wrong",
                                  "The page could not be built. The error has been logged; "
                                  "try again, and if it persists, tell the registry operators.")

        # Public to the authentication middleware: the UI enforces its own sign-in (above).
        return public(_secure_cookies(with_session(csrf_protect(wrapper))))

    return decorate


def _secure_cookies(view: View) -> View:
    """The session and CSRF cookies are Secure when the request came over HTTPS (directly, or
    through a trusted proxy's X-Forwarded-Proto: regsite.forwarded): a browser then never sends
    them over plain HTTP. Over plain HTTP they could not be Secure, or the browser would drop them."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        if request.is_secure():
            for cookie in response.cookies.values():
                cookie["secure"] = True
        return response

    return wrapper


def not_found(request: HttpRequest) -> HttpResponse:
    return error_page(request, 404, "Page not found", "There is no page at this address.")
