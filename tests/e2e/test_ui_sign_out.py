"""Under gunicorn: signing out of the UI ends the session on the server (a copied cookie stops
working), and behind a trusted HTTPS proxy the session cookie is Secure."""
from __future__ import annotations

import re
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Callable
from urllib.parse import urlencode

import pytest

from tests.support.auth import write_htpasswd
from tests.support.rawhttp import Client, Reply
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e
HTTPS = {"X-Forwarded-Proto": "https"}


class Browser:
    """Just enough of a browser: cookies, and the CSRF token of the last form."""

    def __init__(self, server: RegistryServer) -> None:
        self.http = Client(server.host)
        self.origin = f"https://{server.host}"
        self.cookies: dict[str, str] = {}
        self.csrf = ""
        self.set_cookies: list[str] = []

    def _send(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> Reply:
        sent = {**HTTPS, **(headers or {})}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn = self.http.connect()
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            reply = Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
            self.set_cookies = response.headers.get_all("Set-Cookie") or []
        finally:
            conn.close()
        for header in self.set_cookies:
            jar = SimpleCookie(header)
            for name, morsel in jar.items():
                self.cookies[name] = morsel.value
        return reply

    def get(self, path: str) -> Reply:
        reply = self._send("GET", path)
        found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', reply.body)
        self.csrf = found.group(1).decode() if found else self.csrf
        return reply

    def post(self, path: str, fields: dict[str, str]) -> Reply:
        body = urlencode({**fields, "csrfmiddlewaretoken": self.csrf}).encode()
        return self._send("POST", path, body, {"Content-Type": "application/x-www-form-urlencoded",
                                               "Origin": self.origin, "Referer": self.origin + path})


def test_a_copied_session_cookie_dies_at_sign_out(start_registry: Callable[..., RegistryServer],
                                                  tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    write_htpasswd(tmp_path / "server" / "users.htpasswd", {"alice": "wonderland"})
    server = start_registry(SVC_AUTH_ENABLED="true", SVC_SERVER_TRUSTED_PROXIES="127.0.0.1")
    alice = Browser(server)
    alice.get("/ui/sign-in")
    signed_in = alice.post("/ui/sign-in", {"username": "alice", "password": "wonderland"})
    assert signed_in.status == 302, signed_in.body[:300]
    assert alice.set_cookies and all("; secure" in header.lower() for header in alice.set_cookies)
    assert alice.get("/ui/").status == 200

    thief = Browser(server)
    thief.cookies = {"sessionid": alice.cookies["sessionid"]}
    assert thief.get("/ui/").status == 200

    alice.get("/ui/")
    assert alice.post("/ui/sign-out", {}).status == 302
    refused = thief.get("/ui/")
    assert refused.status == 302 and refused.header("Location").startswith("/ui/sign-in")
