"""OpenID Connect sign-in for the web UI (``[oidc]``): the authorization code flow with PKCE.

``/ui/oidc/start`` keeps a fresh ``state``, ``nonce`` and PKCE verifier in the session and sends the
browser to the provider (authlib builds the request); ``/ui/oidc/callback`` takes the state out of
the session (so a replayed or forged one finds nothing), exchanges the code with the verifier, and
verifies the ID token with PyJWT: its signature against the provider's JWKS, its issuer, audience,
expiry and nonce. The username is the ``username_claim`` (never ``sub`` alone: it is opaque), the
groups the ``groups_claim`` (from the ID token, else the userinfo endpoint). Any failure is a 400
page saying why, and no session. A name in the htpasswd file cannot be signed in to from the
provider (local accounts win); a disabled user (manage.py disableuser) is refused.
"""
from __future__ import annotations

import hmac
import logging
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse

from audit import log as audit
from ops.ui import access
from ops.ui.access import UiRequest, error_page, ui_view
from tokens import external, htpasswd
from tokens.principal import Mechanism, user

if TYPE_CHECKING:
    import jwt
    from authlib.integrations.requests_client import OAuth2Session

# requests, authlib and PyJWT are imported by the functions that talk to the provider: the URL conf
# imports this module in every worker, and one without [oidc] need not carry them.

log = logging.getLogger(__name__)

SOURCE = "oidc"
CALLBACK_PATH = "/ui/oidc/callback"
PENDING = "ui_oidc_pending"  # state -> what the callback needs, in the session
PENDING_MAX = 5  # sign-ins started in other tabs and not finished
PENDING_SECONDS = 600
DISCOVERY_SECONDS = 3600
TIMEOUT = 10
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]


class Refused(Exception):
    """The sign-in cannot finish; the message says why (shown on the 400 page)."""


def configured() -> bool:
    return bool(settings.OIDC["issuer"])


def label() -> str:
    from urllib.parse import urlsplit

    return str(settings.OIDC["name"] or urlsplit(settings.OIDC["issuer"]).hostname or "OpenID Connect")


_discovered: dict[str, tuple[float, dict[str, Any], jwt.PyJWKClient]] = {}
_lock = threading.Lock()


def discovery() -> tuple[dict[str, Any], jwt.PyJWKClient]:
    """The provider's discovery document (checked) and a JWKS client, fetched once an hour."""
    issuer = str(settings.OIDC["issuer"]).rstrip("/")
    found = _discovered.get(issuer)
    if found is not None and found[0] > time.monotonic():
        return found[1], found[2]
    import jwt
    import requests

    try:
        response = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise Refused(f"the OpenID provider's discovery document cannot be read ({type(exc).__name__})") from None
    if not isinstance(document, dict) or str(document.get("issuer", "")).rstrip("/") != issuer:
        raise Refused("the OpenID provider's discovery document names another issuer")
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not isinstance(document.get(key), str):
            raise Refused(f"the OpenID provider's discovery document has no {key}")
    keys = jwt.PyJWKClient(document["jwks_uri"], cache_keys=True, lifespan=DISCOVERY_SECONDS, timeout=TIMEOUT)
    with _lock:
        _discovered[issuer] = (time.monotonic() + DISCOVERY_SECONDS, document, keys)
    return document, keys


def ready() -> str | None:
    try:
        discovery()
    except Refused as exc:
        return str(exc)
    return None


def callback_url(request: UiRequest) -> str:
    # Only a redirect URI registered at the provider is ever honoured there, whatever the Host says.
    base = settings.SERVER_EXTERNAL_URL or f"{request.scheme}://{request.get_host()}"
    return base.rstrip("/") + CALLBACK_PATH


def _session(request: UiRequest) -> OAuth2Session:
    from authlib.integrations.requests_client import OAuth2Session

    config = settings.OIDC
    return OAuth2Session(config["client_id"], config["client_secret"] or None, scope=" ".join(config["scopes"]),
                         redirect_uri=callback_url(request), code_challenge_method="S256",
                         token_endpoint_auth_method="client_secret_basic" if config["client_secret"] else "none")


def verify_id_token(token: str, nonce: str, document: dict[str, Any], keys: jwt.PyJWKClient) -> dict[str, Any]:
    """The ID token's claims once its signature, issuer, audience, expiry and nonce check out."""
    import jwt

    config = settings.OIDC
    try:
        key = keys.get_signing_key_from_jwt(token).key
        claims: dict[str, Any] = jwt.decode(token, key, algorithms=ALGORITHMS, audience=config["client_id"],
                                            issuer=document["issuer"], leeway=60,
                                            options={"require": ["iss", "aud", "exp", "iat", "sub"]})
    except jwt.PyJWKClientError as exc:
        raise Refused(f"the ID token's signing key is not the provider's ({exc})") from None
    except jwt.InvalidTokenError as exc:
        raise Refused(f"the ID token does not check out: {exc}") from None
    if not hmac.compare_digest(str(claims.get("nonce", "")), nonce):
        raise Refused("the ID token's nonce is not the one this sign-in sent")
    if isinstance(claims["aud"], list) and len(claims["aud"]) > 1 and claims.get("azp") != config["client_id"]:
        raise Refused("the ID token was issued to another client (azp)")
    return claims


def _identity(claims: dict[str, Any], token: dict[str, Any], document: dict[str, Any]) -> tuple[str, frozenset[str]]:
    import requests

    config = settings.OIDC
    if (config["username_claim"] not in claims or config["groups_claim"] not in claims) and document.get(
            "userinfo_endpoint"):
        try:
            response = requests.get(document["userinfo_endpoint"], timeout=TIMEOUT,
                                    headers={"Authorization": f"Bearer {token.get('access_token', '')}"})
            info = response.json() if response.ok else {}
        except (requests.RequestException, ValueError):
            info = {}
        if isinstance(info, dict) and str(info.get("sub")) == str(claims["sub"]):
            claims = {**info, **claims}
    username = claims.get(config["username_claim"])
    if not isinstance(username, str) or not username:
        raise Refused(f"the provider gave no {config['username_claim']} claim to name the user by")
    groups = claims.get(config["groups_claim"], [])
    groups = [groups] if isinstance(groups, str) else groups
    return username, frozenset(str(group) for group in groups) if isinstance(groups, list) else frozenset()


def finish(request: UiRequest) -> tuple[str, frozenset[str], str]:
    """The username, groups and next page of the sign-in this callback ends."""
    import requests
    from authlib.integrations.base_client.errors import OAuthError

    pending: dict[str, Any] = request.session.get(PENDING) or {}
    state = request.GET.get("state", "")
    started = pending.pop(state, None) if state else None
    request.session[PENDING] = pending
    if not isinstance(started, dict) or time.time() - started.get("at", 0) > PENDING_SECONDS:
        raise Refused("this sign-in's state is unknown, already used or expired: start again")
    if "error" in request.GET:
        raise Refused(f"the provider refused: {request.GET.get('error_description') or request.GET['error']}"[:300])
    document, keys = discovery()
    try:
        token = _session(request).fetch_token(document["token_endpoint"], code=request.GET.get("code", ""),
                                              code_verifier=started.get("verifier"), timeout=TIMEOUT)
    except (OAuthError, requests.RequestException, ValueError) as exc:
        raise Refused(f"the provider did not exchange the code ({getattr(exc, 'error', type(exc).__name__)})") from None
    if not isinstance(token.get("id_token"), str):
        raise Refused("the provider's answer holds no ID token")
    username, groups = _identity(verify_id_token(token["id_token"], str(started.get("nonce")), document, keys),
                                 token, document)
    if username in htpasswd.current_file().snapshot().users:
        raise Refused(f"{username} is a local account of this registry: sign in with its password")
    return username, groups, str(started.get("next") or "")


@ui_view("GET", browse=False)
def start(request: UiRequest) -> HttpResponse:
    if not configured():
        return error_page(request, 404, "Not found", "OpenID Connect sign-in is not configured.")
    try:
        document, _keys = discovery()
    except Refused as exc:
        return error_page(request, 503, "Sign-in unavailable", str(exc))
    from authlib.common.security import generate_token

    state, nonce, verifier = generate_token(32), generate_token(32), generate_token(64)
    url, _ = _session(request).create_authorization_url(document["authorization_endpoint"], state=state,
                                                        nonce=nonce, code_verifier=verifier)
    pending = dict(sorted((request.session.get(PENDING) or {}).items(), key=lambda item: item[1].get("at", 0))[
        -(PENDING_MAX - 1):])
    pending[state] = {"nonce": nonce, "verifier": verifier, "at": time.time(),
                      "next": access.safe_next(request, request.GET.get("next"))}
    request.session[PENDING] = pending
    return HttpResponseRedirect(url)


@ui_view("GET", browse=False)
def callback(request: UiRequest) -> HttpResponse:
    if not configured():
        return error_page(request, 404, "Not found", "OpenID Connect sign-in is not configured.")
    try:
        username, groups, target = finish(request)
        if not external.signed_in(username, SOURCE, groups):
            raise Refused(f"{username} is disabled on this registry")
    except Refused as exc:
        audit.record("sign-in", outcome=audit.Outcome.FAILED, detail=f"OpenID Connect: {exc}")
        return error_page(request, 400, "Sign-in failed", str(exc))
    access.sign_in(request, username, user(username, Mechanism.PASSWORD, groups, SOURCE))
    request.viewer = access.viewer_for(request)  # the audit log names the user and their source
    audit.record("sign-in", detail=f"OpenID Connect, groups {', '.join(sorted(groups)) or 'none'}")
    return HttpResponseRedirect(target or reverse("ui:home"))


def start_url(next_page: str) -> str:
    return f"{reverse('ui:oidc-start')}?{urlencode({'next': next_page})}" if next_page else reverse("ui:oidc-start")
