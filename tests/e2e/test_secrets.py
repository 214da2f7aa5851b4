"""No secret leaks: after pushes and pulls with passwords and API tokens (skopeo and raw HTTP, right
and wrong credentials, the web UI's sign-in), no log line, response, metric or stored file holds a
password or a token; the one exception is the token-creation response that hands the token out.
Blobs are served so that a browser never renders them: octet-stream and nosniff."""
from __future__ import annotations

import json
import re
import secrets
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import Skopeo, require_tool
from tests.faults.wire import OCI_MANIFEST, Registry, Reply, digest
from tests.support.auth import basic
from tests.support.images import build_image
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


class Recorder(Registry):
    """A client that keeps every response it gets."""

    def __init__(self, host: str, replies: list[Reply], **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(host, **kwargs)
        self.replies = replies

    def request(self, method, path, body=None, headers=None):  # type: ignore[no-untyped-def]
        reply = super().request(method, path, body, headers)
        self.replies.append(reply)
        return reply



def forms(secret: str) -> list[bytes]:
    """The ways a secret could appear: as is, JSON-escaped, or inside Basic credentials."""
    out = {secret, json.dumps(secret)[1:-1]}
    for user in ("alice", "token"):
        out.add(basic(user, secret).split()[1])
    return [s.encode() for s in out]


def leaks(data: bytes, secrets_: dict[str, str]) -> list[str]:
    return [name for name, secret in secrets_.items() for form in forms(secret) if form in data]


def test_it_never_writes_a_password_or_token_anywhere(start_registry, skopeo: Skopeo, tmp_path: Path) -> None:
    password, wrong = f"pw-{secrets.token_hex(12)}", f"wrong-{secrets.token_hex(12)}"
    workdir = tmp_path / "server"
    workdir.mkdir()
    subprocess.run([require_tool("htpasswd"), "-cbB", str(workdir / "users.htpasswd"), "alice", password],
                   check=True, capture_output=True)
    server = start_registry(SVC_AUTH_ENABLED="true", SVC_SERVER_LOG_LEVEL="debug")
    replies: list[Reply] = []
    anonymous = Recorder(server.host, replies)

    created = anonymous.request("POST", "/api/tokens", json.dumps(
        {"username": "alice", "password": password, "role": "admin", "ttl_days": 1}).encode(),
        {"Content-Type": "application/json"})
    assert created.status == 201
    token = json.loads(created.body)["token"]
    replies.remove(created)  # the one response that must carry the token
    secrets_ = {"password": password, "wrong password": wrong, "token": token}
    assert leaks(created.body, secrets_) == ["token"]  # the detector does detect

    by_password = Recorder(server.host, replies, headers={"Authorization": basic("alice", password)})
    by_token = Recorder(server.host, replies, headers={"Authorization": f"Bearer {token}"})
    by_token_login = Recorder(server.host, replies, headers={"Authorization": basic("token", token)})
    for client, repo in ((by_password, "team/pw"), (by_token, "team/bearer"), (by_token_login, "team/login")):
        client.push_image(repo, "v1", [b"layer of " + repo.encode()])
        assert client.pull_image(repo, "v1")
        client.request("GET", "/v2/_catalog")
        client.request("GET", f"/v2/{repo}/tags/list")
    for headers in ({"Authorization": basic("alice", wrong)}, {"Authorization": f"Bearer {token[:-2]}xx"},
                    {"Authorization": basic("token", wrong)}, {"Authorization": f"Basic {wrong}"}, {}):
        assert anonymous.request("GET", "/v2/_catalog", headers=headers).status == 401
    for body in ({"username": "alice", "password": wrong}, {"username": "alice", "password": password}):
        anonymous.request("POST", "/api/tokens/list", json.dumps(body).encode(), {"Content-Type": "application/json"})
    sign_in_with_the_web_ui(anonymous, replies, password, wrong)

    image = build_image(tmp_path / "image")
    skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", f"alice:{password}",
               f"oci:{image.layout}:v1", f"docker://{server.host}/team/skopeo:v1")
    skopeo.run("copy", "--src-tls-verify=false", "--src-creds", f"token:{token}",
               f"docker://{server.host}/team/skopeo:v1", f"oci:{tmp_path / 'out'}:v1")
    skopeo.run("inspect", "--tls-verify=false", "--creds", f"token:{token}", f"docker://{server.host}/team/skopeo:v1")
    wrong_login = skopeo.run("inspect", "--tls-verify=false", "--creds", f"alice:{wrong}",
                             f"docker://{server.host}/team/skopeo:v1", check=False)
    assert wrong_login.returncode != 0
    replies.append(anonymous.request("GET", "/metrics"))

    assert len(replies) > 30
    for reply in replies:
        flat = json.dumps(reply.headers).encode() + reply.body
        assert leaks(flat, secrets_) == [], (reply.status, reply.headers, reply.body[:500])
    log = server.log_path.read_bytes()
    assert log.count(b"\n") > 100  # debug logging of every request was on
    assert leaks(log, secrets_) == []
    for path in workdir.rglob("*"):
        if path.is_file():
            assert leaks(path.read_bytes(), secrets_) == [], path


def sign_in_with_the_web_ui(client: Recorder, replies: list[Reply], password: str, wrong: str) -> None:
    page = client.request("GET", "/ui/sign-in")
    cookie = re.search(r"csrftoken=([^;]+)", page.header("Set-Cookie")).group(1)
    form_token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.body).group(1).decode()
    for attempt in (wrong, password):
        body = f"csrfmiddlewaretoken={form_token}&username=alice&password={attempt}".encode()
        reply = client.request("POST", "/ui/sign-in", body, {"Content-Type": "application/x-www-form-urlencoded",
                                                            "Cookie": f"csrftoken={cookie}",
                                                            "Referer": f"http://{client.host}/ui/sign-in"})
        assert reply.status == (302 if attempt == password else 400), reply.body[:300]


def test_it_serves_blobs_so_that_browsers_never_render_them(registry: RegistryServer) -> None:
    client = Registry(registry.host)
    page = b"<!doctype html><html><script>alert(document.cookie)</script></html>"
    client.push_blob("team/app", page)
    for method in ("GET", "HEAD"):
        reply = client.request(method, f"/v2/team/app/blobs/{digest(page)}")
        assert reply.status == 200
        assert reply.header("Content-Type") == "application/octet-stream"
        assert reply.header("X-Content-Type-Options") == "nosniff"
    ranged = client.request("GET", f"/v2/team/app/blobs/{digest(page)}", headers={"Range": "bytes=0-20"})
    assert ranged.status == 206 and ranged.header("Content-Type") == "application/octet-stream"
    assert ranged.header("X-Content-Type-Options") == "nosniff"

    config = b'{"architecture":"amd64","os":"linux"}'
    client.push_blob("team/app", config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                           "config": {"mediaType": "text/html", "digest": digest(config), "size": len(config)},
                           "layers": [{"mediaType": "text/html", "digest": digest(page), "size": len(page)}]}).encode()
    assert client.request("PUT", "/v2/team/app/manifests/v1", manifest, {"Content-Type": "text/html"}).status == 201
    served = client.request("GET", "/v2/team/app/manifests/v1")
    assert served.header("Content-Type") == OCI_MANIFEST
    assert served.header("X-Content-Type-Options") == "nosniff"
    error = client.request("GET", "/v2/team/app/blobs/<script>")
    assert error.header("Content-Type") == "application/json" and error.header("X-Content-Type-Options") == "nosniff"
