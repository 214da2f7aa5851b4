"""The web UI in headless Chromium (Debian's, driven by Playwright for Python) against gunicorn.

A signed-in user finds a pushed image, opens its manifest, creates a token, sees it listed, revokes
it and signs out; an anonymous visitor with auth on sees no repository names. Every page is
screenshotted into tests/artifacts/screenshots/ (ignored by git) for people to review.
"""
from __future__ import annotations

import base64
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.e2e.conftest import Skopeo, require_tool
from tests.support.images import build_image
from tests.support.server import REPO, VENV_BIN, RegistryServer
from tests.support.ui_seed import Pushed, Seeder

pytestmark = pytest.mark.e2e

SCREENSHOTS = REPO / "tests" / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
USER, PASSWORD = "alice", "wonderland"
TOKEN = re.compile(r"^svc_[A-Za-z0-9_-]{43}$")


def missing(message: str) -> None:
    """In CI a missing tool fails the run; elsewhere the test is skipped, naming what to install."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def playwright_api() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install -e '.[test]')")
    if not os.access(CHROMIUM, os.X_OK):
        missing(f"{CHROMIUM} is missing (scripts/install-test-deps.sh installs Debian's chromium)")
    return sync_playwright


def collect_static() -> None:
    """Whitenoise serves the collected, hashed assets; `make test` builds them as `make run` does."""
    result = subprocess.run([str(VENV_BIN / "python"), "manage.py", "collectstatic", "--noinput", "-v0"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def http(server: RegistryServer, method: str, path: str, body: bytes = b"",
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(server.url + path, data=body or None, method=method,
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def basic(username: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()}


def start(tmp: Path, auth: bool) -> RegistryServer:
    workdir = tmp / "server"
    workdir.mkdir(parents=True)
    env = {"SVC_AUTH_ENABLED": "true" if auth else "false"}
    if auth:
        subprocess.run([require_tool("htpasswd"), "-cbB", str(workdir / "users.htpasswd"), USER, PASSWORD],
                       check=True, capture_output=True)
    return RegistryServer(workdir, env_overrides=env, workers=2).start()


def seed(server: RegistryServer, skopeo: Skopeo, tmp: Path) -> dict[str, Pushed]:
    """skopeo pushes a plain image; raw HTTP adds an index, referrers and more tags."""
    image = build_image(tmp / "layout", tag="v1", layers=3, layer_size=256 * 1024)
    skopeo.run("copy", "--dest-tls-verify=false", f"--dest-creds={USER}:{PASSWORD}",
               f"oci:{image.layout}:v1", f"docker://{server.host}/team/app:v1")

    def send(method: str, path: str, body: bytes, content_type: str) -> int:
        return http(server, method, path, body, {"Content-Type": content_type, **basic(USER, PASSWORD)})[0]

    return Seeder(send).showcase()


class Browser:
    """One Chromium with a fresh profile; records console errors (a CSP violation is one)."""

    def __init__(self, context: Any, server: RegistryServer) -> None:
        self.context = context
        self.server = server
        self.page = context.pages[0] if context.pages else context.new_page()
        self.page.set_default_timeout(15_000)
        self.errors: list[str] = []
        self.page.on("console", lambda msg: msg.type == "error" and self.errors.append(msg.text))
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def go(self, path: str) -> Any:
        return self.page.goto(self.server.url + path)

    def shot(self, name: str, full_page: bool = True) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)

    def text(self) -> str:
        return self.page.inner_text("body")


@pytest.fixture(scope="module")
def chromium_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    sync_playwright = playwright_api()
    collect_static()
    with sync_playwright() as playwright:
        def launch(server: RegistryServer, **options: Any) -> Browser:
            profile = tmp_path_factory.mktemp("chromium-profile")
            context = playwright.chromium.launch_persistent_context(
                str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport=options.pop("viewport", {"width": 1360, "height": 900}), **options,
            )
            contexts.append(context)
            return Browser(context, server)

        contexts: list[Any] = []
        yield launch
        for context in contexts:
            context.close()


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RegistryServer, dict[str, Pushed]]]:
    tmp = tmp_path_factory.mktemp("ui-auth")
    server = start(tmp, auth=True)
    try:
        skopeo = Skopeo(require_tool("skopeo"), tmp / "skopeo-home")
        yield server, seed(server, skopeo, tmp)
    finally:
        server.stop()


def sign_in(browser: Browser) -> None:
    browser.go("/ui/sign-in")
    browser.page.get_by_label("Username").fill(USER)
    browser.page.get_by_label("Password").fill(PASSWORD)
    browser.page.get_by_role("button", name="Sign in").click()
    browser.page.wait_for_url(re.compile(r"/ui/$"))


def test_it_shows_an_anonymous_visitor_no_repository_names(chromium_factory, auth_server) -> None:
    server, _ = auth_server
    browser = chromium_factory(server)
    for path in ("/ui/", "/ui/repositories/", "/ui/repositories/?sort=recent"):
        browser.go(path)
        assert "/ui/sign-in" in browser.page.url
        page = browser.page.content()
        for name in ("team/app", "team/multi", "infra/tools"):
            assert name not in page
    assert browser.page.get_by_role("heading", name="Sign in").is_visible()
    browser.shot("sign-in")
    assert browser.errors == []


def test_it_walks_a_signed_in_user_from_image_to_token_and_out(chromium_factory, auth_server) -> None:
    server, pushed = auth_server
    browser = chromium_factory(server, permissions=["clipboard-read", "clipboard-write"])
    page = browser.page
    sign_in(browser)
    cookie = next(c for c in browser.context.cookies() if c["name"] == "sessionid")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert page.get_by_role("heading", name="Recently pushed").is_visible()
    browser.shot("overview")

    # Find the image skopeo pushed.
    page.get_by_role("link", name="Repositories", exact=True).click()
    page.get_by_label("Search by name").fill("app")
    page.get_by_role("button", name="Search").click()
    assert "team/multi" not in page.inner_text("table")
    browser.shot("repositories-search")
    page.get_by_role("link", name="team/app", exact=True).click()
    page.wait_for_url(re.compile(r"/ui/r/team/app/$"))
    pull = f"docker pull {server.host}/team/app:v1"
    assert pull in browser.text()
    browser.shot("repository")

    # Copy its pull command, then open its manifest.
    page.get_by_role("button", name=f"Copy {pull}", exact=True).click()
    assert page.evaluate("navigator.clipboard.readText()") == pull
    page.get_by_role("link", name="v1", exact=True).click()
    page.wait_for_url(re.compile(r"/-/manifests/v1$"))
    assert page.get_by_role("heading", name="Layers").is_visible()
    assert page.get_by_role("heading", name="History").is_visible()
    assert "linux/amd64" in browser.text()
    browser.shot("manifest-image")

    browser.go(f"/ui/r/team/app/-/manifests/{pushed['latest'].digest}")
    assert "Cosign signature" in browser.text() and "SPDX SBOM" in browser.text()
    browser.shot("manifest-referrers")
    browser.go("/ui/r/team/multi/-/manifests/2.0")
    assert "linux/arm64" in browser.text()
    browser.shot("manifest-index")
    browser.go("/ui/r/team/multi/")
    browser.shot("repository-index")

    # Create a token; it is shown once and works for registry clients.
    page.get_by_role("link", name="Tokens").click()
    page.get_by_label("write").check()
    page.get_by_label("Lifetime in days").fill("7")
    page.get_by_label("Description").fill("browser test")
    page.get_by_role("button", name="Create token").click()
    token = page.get_by_label(re.compile("New write token")).input_value()
    assert TOKEN.match(token)
    assert f"docker login -u token --password-stdin {server.host}" in browser.text()
    browser.shot("token-created")
    assert http(server, "GET", "/v2/_catalog", headers=basic("token", token))[0] == 200

    browser.go("/ui/tokens/")
    row = page.get_by_role("row").filter(has_text="browser test")
    assert row.count() == 1 and token not in page.content()
    browser.shot("tokens")

    # Revoke it (the browser asks first).
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name=re.compile("^Revoke token")).click()
    page.wait_for_url(re.compile(r"revoked="))
    assert page.get_by_role("row").filter(has_text="browser test").count() == 0
    assert http(server, "GET", "/v2/_catalog", headers=basic("token", token))[0] == 401

    # Sign out: the registry disappears again.
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r"/ui/sign-in"))
    assert "You are signed out." in browser.text()
    browser.go("/ui/repositories/")
    assert "/ui/sign-in" in page.url and "team/app" not in page.content()
    assert browser.errors == []


def test_it_deletes_a_tag_and_a_repository_after_confirmation(chromium_factory, auth_server) -> None:
    server, _ = auth_server
    browser = chromium_factory(server)
    sign_in(browser)
    browser.go("/ui/r/team/app/")
    browser.page.get_by_role("link", name="Delete tag v1.0").click()
    assert browser.page.get_by_role("heading", name="Delete tag v1.0?").is_visible()
    browser.shot("delete-confirm")
    browser.page.get_by_role("button", name="Delete tag v1.0").click()
    browser.page.wait_for_url(re.compile(r"deleted="))
    assert "Deleted tag v1.0." in browser.text()
    status, _ = http(server, "GET", "/v2/team/app/manifests/v1.0", headers=basic(USER, PASSWORD))
    assert status == 404

    browser.go("/ui/r/infra/tools/")
    browser.page.get_by_role("link", name="Delete repository…").click()
    browser.page.get_by_label("Type infra/tools to confirm").fill("infra/tools")
    browser.shot("delete-repository-confirm")
    browser.page.get_by_role("button", name="Delete repository").click()
    browser.page.wait_for_url(re.compile(r"/ui/repositories/\?deleted="))
    assert "Deleted repository infra/tools." in browser.text()
    status, body = http(server, "GET", "/v2/_catalog", headers=basic(USER, PASSWORD))
    assert status == 200 and b"infra/tools" not in body
    assert browser.errors == []


def test_it_is_usable_by_keyboard_and_on_a_phone_with_auth_off(chromium_factory, tmp_path: Path) -> None:
    server = start(tmp_path, auth=False)
    try:
        seed(server, Skopeo(require_tool("skopeo"), tmp_path / "skopeo-home"), tmp_path)
        browser = chromium_factory(server, viewport={"width": 390, "height": 844}, is_mobile=True,
                                   has_touch=True)
        browser.go("/ui/")
        browser.page.keyboard.press("Tab")
        assert browser.page.evaluate("document.activeElement.textContent.trim()") == "Skip to content"
        browser.page.keyboard.press("Enter")
        assert browser.page.evaluate("document.activeElement.id") == "main"
        browser.shot("mobile-overview")
        browser.go("/ui/r/team/app/")
        browser.shot("mobile-repository")
        browser.go("/ui/r/team/app/-/manifests/v1")
        browser.shot("mobile-manifest")
        width = browser.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways ({width}px)"
        browser.go("/ui/r/no/such/repository/")
        assert "Repository not found" in browser.text()
        browser.shot("error-404")
        assert browser.errors == [] or all("404" in e for e in browser.errors)

        dark = chromium_factory(server, color_scheme="dark")
        dark.go("/ui/repositories/")
        dark.shot("dark-repositories")
        dark.go("/ui/r/team/app/-/manifests/latest")
        dark.shot("dark-manifest")
        assert dark.errors == []
    finally:
        server.stop()
