"""A throwaway OpenID Connect provider: Debian's glewlwyd on a loopback port with its own SQLite database.

Set up through its admin REST API in about a second: a multi-valued ``groups`` user property, users
with passwords and groups, an OIDC plugin (RS256 keys made by openssl, PKCE, the ``groups`` and
``preferred_username`` claims) and a confidential client. Started in the background, stopped by
its PID; share one per test module (``glewlwyd`` fixture). Notes: ../shared/identity-servers.md.
"""
from __future__ import annotations

import gzip
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
import requests

from tests.support.server import free_port

PLUGIN = "oidc"
CLIENT_ID = "registry"
CLIENT_SECRET = "registry-client-secret"
PASSWORDS = {"olivia": "olivia-password", "oscar": "oscar-password"}
GROUPS = {"olivia": ["team-a"], "oscar": ["team-b"]}
WEBAPP = Path("/usr/share/glewlwyd/webapp")
SCHEMA = Path("/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz")


def _config(workdir: Path, port: int) -> str:
    source = Path("/etc/glewlwyd/glewlwyd.conf").read_text()
    mime = source[source.index("static_files_mime_types"):]
    mime = mime[:mime.index("\n)") + 2]
    return (f'port={port}\nbind_address="127.0.0.1"\nexternal_url="http://127.0.0.1:{port}"\n'
            f'login_url="login.html"\nstatic_files_path="{workdir}/webapp/"\napi_prefix="api"\n'
            f'allow_origin="*"\nlog_mode="file"\nlog_level="INFO"\nlog_file="{workdir}/glewlwyd.log"\n'
            'cookie_secure=0\ncookie_same_site="empty"\nsession_expiration=3600\n'
            'session_key="GLEWLWYD2_SESSION_ID"\nadmin_scope="g_admin"\nprofile_scope="g_profile"\n'
            'login_api_enabled=true\nuser_module_path="/usr/lib/glewlwyd/user"\n'
            'client_module_path="/usr/lib/glewlwyd/client"\nuser_auth_scheme_module_path="/usr/lib/glewlwyd/scheme"\n'
            'plugin_module_path="/usr/lib/glewlwyd/plugin"\nhash_algorithm="SHA512"\n'
            f'database = {{\n  type = "sqlite3"\n  path = "{workdir}/glewlwyd.db"\n}}\n{mime}\n')


@dataclass
class Glewlwyd:
    workdir: Path
    port: int = 0
    redirect_uri: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    admin: requests.Session = field(default_factory=requests.Session, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer(self) -> str:
        return f"{self.url}/api/{PLUGIN}"

    def start(self) -> Glewlwyd:
        self.port = self.port or free_port()
        (self.workdir / "glewlwyd.conf").write_text(_config(self.workdir, self.port))
        with (self.workdir / "stdout.log").open("ab") as log:
            self.process = subprocess.Popen(["glewlwyd", "-c", str(self.workdir / "glewlwyd.conf")],
                                            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            try:
                if requests.get(f"{self.url}/config/", timeout=1).status_code == 200:
                    return self
            except requests.ConnectionError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"glewlwyd did not start: {(self.workdir / 'glewlwyd.log').read_text()[-2000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.process = None

    def api(self, method: str, path: str, body: Any = None) -> Any:
        response = self.admin.request(method, f"{self.url}/api{path}", json=body, timeout=10)
        assert response.status_code == 200, f"{method} {path}: {response.status_code} {response.text[:500]}"
        return response.json() if response.content else None

    def set_groups(self, username: str, groups: list[str]) -> None:
        user = self.api("GET", f"/user/{username}")
        self.api("PUT", f"/user/{username}", {**user, "groups": groups})

    def setup(self) -> None:
        self.api("POST", "/auth/", {"username": "admin", "password": "password"})
        module = self.api("GET", "/mod/user/database")
        module["parameters"]["data-format"]["groups"] = {
            "multiple": True, "read": True, "write": True, "profile-read": True, "profile-write": False}
        self.api("PUT", "/mod/user/database", module)
        self.api("PUT", "/mod/user/database/reset")
        for username, password in PASSWORDS.items():
            self.api("POST", "/user/", {"username": username, "name": username, "email": f"{username}@example.org",
                                       "password": password, "enabled": True, "scope": ["openid"],
                                       "groups": GROUPS[username]})
        key, cert = self._keys()
        self.api("POST", "/mod/plugin/", {"module": "oidc", "name": PLUGIN, "display_name": "OIDC", "enabled": True,
                                          "parameters": {
            "iss": self.issuer, "jwt-type": "rsa", "jwt-key-size": "256", "key": key, "cert": cert,
            "access-token-duration": 3600, "refresh-token-duration": 86400, "code-duration": 60,
            "refresh-token-rolling": False, "allow-non-oidc": False, "auth-type-code-enabled": True,
            "auth-type-refresh-enabled": True, "auth-type-token-enabled": False, "auth-type-id-token-enabled": False,
            "auth-type-password-enabled": False, "auth-type-client-enabled": False, "auth-type-none-enabled": False,
            "auth-type-code-revoke-replayed": True, "pkce-allowed": True, "pkce-method-plain-allowed": False,
            "allowed-scope": ["openid"], "jwks-show": True, "subject-type": "public",
            "name-claim": "on-demand", "email-claim": "on-demand", "scope-claim": "no",
            "address-claim": {"type": "no", "formatted": "", "street_address": "", "locality": "", "region": "",
                              "postal_code": "", "country": "", "mandatory": False},
            "claims": [{"name": "groups", "user-property": "groups", "type": "string", "mandatory": True,
                        "on-demand": False, "scope": []},
                       {"name": "preferred_username", "user-property": "username", "type": "string",
                        "mandatory": True, "on-demand": False, "scope": []}],
        }})
        self.api("POST", "/client/", {
            "client_id": CLIENT_ID, "name": CLIENT_ID, "enabled": True, "confidential": True,
            "client_secret": CLIENT_SECRET, "redirect_uri": [self.redirect_uri],
            "authorization_type": ["code", "refresh_token"], "scope": [],
            "token_endpoint_auth_method": ["client_secret_basic", "client_secret_post"]})

    def _keys(self) -> tuple[str, str]:
        key, cert = self.workdir / "key.pem", self.workdir / "cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                        str(cert), "-days", "2", "-subj", "/CN=glewlwyd"], check=True, capture_output=True, timeout=60)
        return key.read_text(), cert.read_text()


def start_glewlwyd(workdir: Path, redirect_uri: str) -> Glewlwyd:
    if shutil.which("glewlwyd") is None:
        pytest.fail("glewlwyd is not installed: run scripts/install-test-deps.sh")
    workdir.mkdir(parents=True, exist_ok=True)
    database = sqlite3.connect(workdir / "glewlwyd.db")
    database.executescript(gzip.decompress(SCHEMA.read_bytes()).decode())
    database.close()
    # Debian's web app holds config.json as a symlink to a directory, which glewlwyd will not serve.
    shutil.copytree(WEBAPP, workdir / "webapp", symlinks=False, ignore=shutil.ignore_patterns("config.json"))
    shutil.copy(Path("/etc/glewlwyd/config-2.7.json/config.json"), workdir / "webapp" / "config.json")
    server = Glewlwyd(workdir, redirect_uri=redirect_uri).start()
    server.setup()
    return server


REDIRECT_URI = "http://testserver/ui/oidc/callback"  # the Django test client's origin


@pytest.fixture(scope="module")
def glewlwyd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Glewlwyd]:
    """One OpenID Connect provider for the tests of a module, its client redirecting to the test client."""
    server = start_glewlwyd(tmp_path_factory.mktemp("glewlwyd"), REDIRECT_URI)
    yield server
    server.stop()
