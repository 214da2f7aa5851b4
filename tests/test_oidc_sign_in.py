"""OpenID Connect sign-in to the web UI against a real provider (glewlwyd): the code flow with PKCE,
state and nonce, the ID token checked against the provider's keys, groups from the claim feeding
[[access]]; an OIDC user's API tokens follow their groups for groups_max_age_hours at most, and
manage.py disableuser cuts them at once. The browser is played by requests through the provider's
login API (tests/test_e2e_oidc.py drives its real login page in Chromium)."""
from __future__ import annotations

import base64
import json
import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from ops.ui import oidc
from tests.support.access import teams  # noqa: F401  (fixture)
from tests.support.auth import auth_on, auth_paths, basic, write_htpasswd  # noqa: F401  (fixtures)
from tests.support.glewlwyd import CLIENT_ID, CLIENT_SECRET, PASSWORDS, glewlwyd  # noqa: F401  (fixture)
from tests.support.registry_client import push_image
from tokens import external

pytestmark = pytest.mark.django_db
PUSH = "/v2/{}/blobs/uploads/"


@pytest.fixture
def oidc_on(settings, teams, glewlwyd) -> Any:
    settings.OIDC = {**settings.OIDC, "issuer": glewlwyd.issuer, "client_id": CLIENT_ID,
                     "client_secret": CLIENT_SECRET, "scopes": ["openid"], "name": "Glewlwyd"}
    oidc._discovered.clear()
    yield glewlwyd
    oidc._discovered.clear()


def at_provider(glewlwyd, authorize_url: str, username: str) -> str:
    """What a browser does at the provider: sign in, continue; the callback URL it is sent back to."""
    browser = requests.Session()
    login = browser.get(authorize_url, allow_redirects=False)
    callback = parse_qs(urlsplit(login.headers["Location"]).query)["callback_url"][0]
    assert browser.post(f"{glewlwyd.url}/api/auth/", json={"username": username,
                                                           "password": PASSWORDS[username]}).status_code == 200
    back = browser.get(callback + "&g_continue", allow_redirects=False)
    location = back.headers["Location"]
    assert location.startswith("http://testserver/ui/oidc/callback?"), location
    return location[len("http://testserver"):]


def sign_in(glewlwyd, client: Client, username: str) -> Any:
    started = client.get("/ui/oidc/start", {"next": "/ui/tokens/"})
    assert started.status_code == 302, started.content
    return client.get(at_provider(glewlwyd, started["Location"], username))


def test_the_sign_in_page_offers_the_provider(oidc_on) -> None:
    page = Client().get("/ui/sign-in").content.decode()
    assert "Sign in with Glewlwyd" in page and "/ui/oidc/start" in page


def test_a_sign_in_lands_on_the_ui_as_the_user_with_their_groups(oidc_on) -> None:
    erin = Client(HTTP_AUTHORIZATION=basic("erin", "errands"))  # the admin
    for name in ("team-a/app", "team-b/app"):
        push_image(erin, name, "v1")
    client = Client()
    landed = sign_in(oidc_on, client, "olivia")
    assert landed.status_code == 302 and landed["Location"] == "/ui/tokens/"
    home = client.get("/ui/").content.decode()
    assert "olivia" in home and "team-a/app" in home and "team-b/app" not in home
    started = client.get("/ui/oidc/start")
    query = parse_qs(urlsplit(started["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    assert query["redirect_uri"] == ["http://testserver/ui/oidc/callback"]


def test_a_replayed_state_is_refused_and_makes_no_session(oidc_on) -> None:
    client = Client()
    started = client.get("/ui/oidc/start")
    callback = at_provider(oidc_on, started["Location"], "olivia")
    assert client.get(callback).status_code == 302
    client.post("/ui/sign-out")
    replayed = client.get(callback)
    assert replayed.status_code == 400 and "state is unknown, already used" in replayed.content.decode()
    assert client.get("/ui/tokens/").status_code == 302  # not signed in: sent to the sign-in page
    forged = Client().get(callback.replace("state=", "state=x"))
    assert forged.status_code == 400


def test_a_missing_pkce_verifier_is_refused_by_the_provider(oidc_on) -> None:
    client = Client()
    started = client.get("/ui/oidc/start")
    callback = at_provider(oidc_on, started["Location"], "olivia")
    session = client.session
    for pending in session[oidc.PENDING].values():
        pending["verifier"] = None
    session.save()
    refused = client.get(callback)
    assert refused.status_code == 400 and "did not exchange the code" in refused.content.decode()
    assert client.get("/ui/tokens/").status_code == 302


def _id_token(glewlwyd, nonce: str) -> str:
    from authlib.common.security import generate_token
    from authlib.oauth2.rfc7636 import create_s256_code_challenge

    verifier = generate_token(48)
    url = (f"{glewlwyd.issuer}/auth?response_type=code&client_id={CLIENT_ID}&scope=openid&state=s&nonce={nonce}"
           f"&redirect_uri=http%3A%2F%2Ftestserver%2Fui%2Foidc%2Fcallback&code_challenge_method=S256"
           f"&code_challenge={create_s256_code_challenge(verifier)}")
    code = parse_qs(urlsplit(at_provider(glewlwyd, url, "olivia")).query)["code"][0]
    answer = requests.post(f"{glewlwyd.issuer}/token", auth=(CLIENT_ID, CLIENT_SECRET), data={
        "grant_type": "authorization_code", "code": code, "code_verifier": verifier,
        "redirect_uri": "http://testserver/ui/oidc/callback"})
    return str(answer.json()["id_token"])


def test_a_tampered_id_token_a_wrong_issuer_and_a_wrong_nonce_are_refused(oidc_on) -> None:
    document, keys = oidc.discovery()
    token = _id_token(oidc_on, "n0nce")
    assert oidc.verify_id_token(token, "n0nce", document, keys)["preferred_username"] == "olivia"
    head, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    forged = base64.urlsafe_b64encode(json.dumps({**claims, "groups": ["team-b"]}).encode()).rstrip(b"=").decode()
    with pytest.raises(oidc.Refused, match="does not check out"):
        oidc.verify_id_token(f"{head}.{forged}.{signature}", "n0nce", document, keys)
    with pytest.raises(oidc.Refused, match="does not check out"):
        oidc.verify_id_token(token, "n0nce", {**document, "issuer": "https://idp.example.org"}, keys)
    with pytest.raises(oidc.Refused, match="nonce"):
        oidc.verify_id_token(token, "another", document, keys)


def test_a_local_account_of_the_same_name_is_not_signed_in_from_the_provider(oidc_on, teams) -> None:
    write_htpasswd(teams.auth.htpasswd_file, {"olivia": "local", "erin": "errands"})
    refused = sign_in(oidc_on, Client(), "olivia")
    assert refused.status_code == 400 and "local account" in refused.content.decode()


def _ui_token(client: Client) -> str:
    created = client.post("/ui/tokens/", {"role": "write", "ttl_days": "30", "description": "cli",
                                          "repositories": ""})
    assert created.status_code == 200, created.content
    return re.search(r"svc_[A-Za-z0-9_-]{43}", created.content.decode())[0]  # type: ignore[index]


def test_an_oidc_users_token_follows_their_groups_and_disableuser_cuts_it(oidc_on, monkeypatch) -> None:
    client = Client()
    assert sign_in(oidc_on, client, "olivia").status_code == 302
    token = Client(HTTP_AUTHORIZATION=basic("token", _ui_token(client)))
    assert token.post(PUSH.format("team-a/app")).status_code == 202
    assert token.post(PUSH.format("team-b/app")).status_code == 403
    oidc_on.set_groups("olivia", ["team-b"])  # moved at the provider
    try:
        later = timezone.now() + timedelta(hours=oidc_on_hours(client) + 1)
        monkeypatch.setattr(external.timezone, "now", lambda: later)
        assert token.post(PUSH.format("team-a/app")).status_code == 403  # past groups_max_age_hours
        monkeypatch.undo()
        assert sign_in(oidc_on, Client(), "olivia").status_code == 302  # signs in again: the new groups
        assert token.post(PUSH.format("team-b/app")).status_code == 202
        assert token.post(PUSH.format("team-a/app")).status_code == 403
        call_command("disableuser", "olivia", stdout=open("/dev/null", "w"))
        assert token.post(PUSH.format("team-b/app")).status_code == 401
        assert client.get("/ui/tokens/").status_code == 302  # the UI session ends too
        assert sign_in(oidc_on, Client(), "olivia").status_code == 400
    finally:
        oidc_on.set_groups("olivia", ["team-a"])
        external.set_disabled("olivia", False)


def oidc_on_hours(client: Client) -> int:
    from django.conf import settings

    return int(settings.OIDC["groups_max_age_hours"])


def test_ready_reports_the_provider(oidc_on) -> None:
    assert Client().get("/ready").json()["checks"]["oidc"] == "ok"


def test_the_audit_log_names_oidc_as_the_source(oidc_on) -> None:
    from audit.models import AuditEvent

    assert sign_in(oidc_on, Client(), "oscar").status_code == 302
    assert AuditEvent.objects.get(actor="oscar", action="sign-in").source == "oidc"
