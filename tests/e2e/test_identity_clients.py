"""Directory and OpenID Connect users with real clients against the registry under gunicorn.

LDAP (a real slapd): docker logs in and pushes as a directory user of team-a, is refused on team-b,
a wrong password is refused; moving the user to team-b in the directory takes effect within
cache_seconds; 500 manifest GETs cost at most one bind per user per cache_seconds per worker
(counted in slapd's log); with slapd stopped, the directory user gets a 503 and an htpasswd user
still pushes.

OIDC (a real glewlwyd): a sign-in through the provider's real login page in headless Chromium lands
on the UI as that user; they create a token there and push with podman.
"""
from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.e2e.conftest import require_tool
from tests.e2e.test_bearer_clients import podman  # noqa: F401  (fixture)
from tests.e2e.test_ui_browser import CHROMIUM, CHROMIUM_ARGS, collect_static, playwright_api
from tests.support.access import PASSWORDS, team_server
from tests.support.docker import Docker
from tests.support.glewlwyd import CLIENT_ID, CLIENT_SECRET, start_glewlwyd
from tests.support.glewlwyd import PASSWORDS as OIDC_PASSWORDS
from tests.support.images import build_image
from tests.support.server import RegistryServer, free_port
from tests.support.slapd import GROUPS, PEOPLE, dn_of, slapd  # noqa: F401  (fixture)
from tests.support.slapd import PASSWORDS as LDAP_PASSWORDS

pytestmark = pytest.mark.e2e
CACHE_SECONDS = 3


def _get(server: RegistryServer, path: str, user: str, password: str) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(server.url + path, headers={
        "Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode(),
        "Accept": "application/vnd.oci.image.manifest.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def test_docker_as_a_directory_user(docker: Docker, slapd, start_registry: Callable[..., RegistryServer],
                                    tmp_path: Path) -> None:
    server = team_server(start_registry, tmp_path, "ldap", SVC_LDAP_URL=slapd.url,
                         SVC_LDAP_USER_DN_TEMPLATE=f"uid={{username}},{PEOPLE}", SVC_LDAP_GROUP_SEARCH_BASE=GROUPS,
                         SVC_LDAP_CACHE_SECONDS=str(CACHE_SECONDS), SVC_LDAP_TIMEOUT_SECONDS="2")
    host, ann = server.host, LDAP_PASSWORDS["ldap-ann"]
    wrong = docker.run("login", "-u", "ldap-ann", "--password-stdin", host, input="not-it", check=False)
    assert wrong.returncode != 0
    docker.run("login", "-u", "ldap-ann", "--password-stdin", host, input=ann)
    app = f"{host}/team-a/app:{uuid.uuid4().hex[:8]}"
    docker.import_busybox(app)
    docker.run("push", app)
    other = app.replace("team-a/app", "team-b/app")
    docker.run("tag", app, other)
    refused = docker.run("push", other, check=False)
    assert refused.returncode != 0 and "ldap-ann has role none on team-b/*; push needs write" in refused.stderr

    # 500 manifest GETs by two directory users: at most one bind per user per cache_seconds per worker.
    ben = LDAP_PASSWORDS["ldap-ben"]
    before = {name: slapd.binds(dn_of(name)) for name in LDAP_PASSWORDS}
    started = time.monotonic()
    for number in range(500):
        name, password, repository = (("ldap-ann", ann, "team-a/app") if number % 2 else
                                      ("ldap-ben", ben, "team-b/app"))
        assert _get(server, f"/v2/{repository}/manifests/v0", name, password)[0] == 404
    windows = int((time.monotonic() - started) // CACHE_SECONDS) + 1
    binds = {name: slapd.binds(dn_of(name)) - before[name] for name in LDAP_PASSWORDS}
    # ldap-ben's first requests bind (the log counts them); ldap-ann's push may have left both
    # workers' caches warm for the whole loop, so she may need none.
    assert binds["ldap-ben"] >= 1 and all(count <= 2 * windows for count in binds.values()), (binds, windows)

    slapd.move("ldap-ann", "team-a", "team-b")
    try:
        deadline = time.monotonic() + CACHE_SECONDS + 5
        while docker.run("push", other, check=False).returncode != 0:  # within cache_seconds
            assert time.monotonic() < deadline, "the group change did not take effect"
            time.sleep(0.5)
    finally:
        slapd.move("ldap-ann", "team-b", "team-a")

    slapd.stop()
    try:
        # ldap-ben's bind may still be cached (up to cache_seconds): the directory is asked, and found
        # away, once it lapses.
        deadline = time.monotonic() + CACHE_SECONDS + 5
        while (answer := _get(server, "/v2/team-b/app/manifests/v0", "ldap-ben", ben))[0] == 404:
            assert time.monotonic() < deadline, "the cached bind outlived cache_seconds"
            time.sleep(0.5)
        status, headers = answer
        assert status == 503 and int(headers["Retry-After"]) > 0
        docker.run("login", "-u", "alice", "--password-stdin", host, input=PASSWORDS["alice"])
        local = f"{host}/team-a/app:alice-{uuid.uuid4().hex[:6]}"
        docker.run("tag", app, local)
        docker.run("push", local)  # htpasswd users keep working
    finally:
        slapd.start()


def test_oidc_sign_in_in_chromium_then_a_podman_push_with_a_ui_token(
        podman, start_registry: Callable[..., RegistryServer], tmp_path: Path) -> None:  # noqa: F811
    require_tool("podman")
    sync_playwright = playwright_api()
    collect_static()
    port = free_port()
    provider = start_glewlwyd(tmp_path / "glewlwyd", f"http://127.0.0.1:{port}/ui/oidc/callback")
    try:
        server = team_server(start_registry, tmp_path, "oidc", port=port, SVC_OIDC_ISSUER=provider.issuer,
                             SVC_OIDC_CLIENT_ID=CLIENT_ID, SVC_OIDC_CLIENT_SECRET=CLIENT_SECRET,
                             SVC_OIDC_SCOPES="openid", SVC_OIDC_NAME="Glewlwyd")
        token = _sign_in_and_make_token(sync_playwright, server, tmp_path)
    finally:
        provider.stop()
    host = server.host
    image = build_image(tmp_path / "src", layers=1)
    podman("pull", f"oci:{image.layout}:v1")
    podman("login", "--tls-verify=false", "-u", "token", "--password-stdin", host, input=token)
    podman("tag", podman("images", "-q").stdout.split()[0], f"{host}/team-a/app:from-podman")
    podman("push", "--tls-verify=false", f"{host}/team-a/app:from-podman")
    podman("tag", f"{host}/team-a/app:from-podman", f"{host}/team-b/app:from-podman")
    refused = podman("push", "--tls-verify=false", f"{host}/team-b/app:from-podman", check=False)
    assert refused.returncode != 0 and "has role none on team-b/*" in refused.stderr, refused.stderr


def _sign_in_and_make_token(sync_playwright: Any, server: RegistryServer, tmp_path: Path) -> str:
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = context.new_page()
            page.goto(server.url + "/ui/sign-in")
            page.get_by_role("link", name="Sign in with Glewlwyd").click()
            page.wait_for_selector("#username", timeout=20_000)
            page.fill("#username", "olivia")
            page.fill("#password", OIDC_PASSWORDS["olivia"])
            page.click("#loginbut")
            deadline = time.monotonic() + 30
            while "/ui/" not in page.url or "oidc" in page.url:
                assert time.monotonic() < deadline, page.url
                try:  # the provider's page navigates by itself; a Continue button may appear
                    button = page.get_by_role("button", name=re.compile("Continue", re.I))
                    if button.count():
                        button.first.click(timeout=1000)
                except Exception:  # noqa: BLE001  (a page going away under the click)
                    pass
                page.wait_for_timeout(200)
            assert "olivia" in page.inner_text("body")
            page.goto(server.url + "/ui/tokens/")
            page.get_by_label("Description").fill("podman")
            page.check("input[name=role][value=write]")
            page.get_by_role("button", name=re.compile("Create", re.I)).click()
            found = re.search(r"svc_[A-Za-z0-9_-]{43}", page.inner_text("body"))
            assert found, page.inner_text("body")
            return found[0]
        finally:
            context.close()
