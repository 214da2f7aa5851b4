"""Upstream registries for the pull-through cache tests, all on loopback, none reaching the internet.

- ``Distribution``: the CNCF registry (Debian's ``docker-registry``, distribution 2.8) in a temp
  directory, anonymous, with htpasswd (Basic), or with distribution's own ``auth: token`` checking
  JWTs that a ``TokenRealm`` issues (the Bearer token flow of Docker Hub and GHCR). Its access log
  counts the requests it served.
- ``TokenRealm``: the token service of that flow, written here: it checks Basic credentials and signs
  an ES256 JWT with a self-signed certificate, which distribution trusts through its
  ``rootcertbundle`` and finds in the token's ``x5c`` header.
- ``CorruptUpstream``: a small registry that serves a valid manifest whose layer it sends with one
  byte changed (the same length, a different digest).
- ``push_image``: an image pushed over HTTP, as any client pushes (monolithic blob uploads).
"""
from __future__ import annotations

import base64
import datetime
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.server import free_port

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


class UpstreamUnavailable(RuntimeError):
    """docker-registry is not installed (scripts/install-test-deps.sh installs it)."""


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def htpasswd_file(path: Path, username: str, password: str) -> Path:
    subprocess.run(["htpasswd", "-cbB", str(path), username, password], check=True, capture_output=True)
    return path


# -- the token service ---------------------------------------------------------------------------

def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenRealm:
    """``GET /token?service=&scope=`` with Basic credentials -> ``{"token", "expires_in"}``."""

    def __init__(self, workdir: Path, username: str, password: str, service: str = "upstream",
                 issuer: str = "test-token-issuer", expires_in: int = 300, host: str = "127.0.0.1") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.username, self.password, self.service, self.issuer = username, password, service, issuer
        self.expires_in, self.host = expires_in, host  # the host its URL names (it listens on 127.0.0.1)
        self.requests: list[dict[str, str]] = []
        self.credentialed: list[bool] = []  # per request: whether it came with Basic credentials
        self.issued: list[str] = []
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test token signer")])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(days=1))
                      .not_valid_after(now + datetime.timedelta(days=30))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .sign(self._key, hashes.SHA256()))
        workdir.mkdir(parents=True, exist_ok=True)
        self.cert_path = workdir / "token-signer.pem"
        self.cert_path.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://{self.host}:{self._server.server_address[1]}/token"

    def token(self, subject: str, scope: str) -> str:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        access = []
        for item in scope.split(" ") if scope else []:
            kind, _, rest = item.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": [a for a in actions.split(",") if a]})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256",
                  "x5c": [base64.b64encode(self._cert.public_bytes(serialization.Encoding.DER)).decode()]}
        claims = {"iss": self.issuer, "sub": subject, "aud": self.service, "exp": now + self.expires_in,
                  "nbf": now - 10, "iat": now, "jti": uuid.uuid4().hex, "access": access}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def start(self) -> "TokenRealm":
        realm = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
                realm.requests.append(query)
                realm.credentialed.append(self.headers.get("Authorization") is not None)
                if self.headers.get("Authorization") != basic(realm.username, realm.password):
                    self._answer(401, {"details": "wrong credentials"})
                    return
                token = realm.token(realm.username, query.get("scope", ""))
                realm.issued.append(token)
                self._answer(200, {"token": token, "access_token": token, "expires_in": realm.expires_in})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# -- the CNCF registry -----------------------------------------------------------------------------

CONFIG = """\
version: 0.1
log:
  level: info
  fields:
    service: registry
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
{auth}"""

HTPASSWD_AUTH = """\
auth:
  htpasswd:
    realm: basic-realm
    path: {path}
"""

TOKEN_AUTH = """\
auth:
  token:
    realm: {realm}
    service: {service}
    issuer: {issuer}
    rootcertbundle: {bundle}
"""

_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[0-9.]+" (?P<status>\d{3}) ')


@dataclass
class Distribution:
    """``docker-registry serve`` in ``workdir``: anonymous, Basic (``credentials``) or token auth."""

    workdir: Path
    credentials: tuple[str, str] | None = None
    realm: TokenRealm | None = None
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "registry.log"

    def start(self, timeout: float = 30.0) -> "Distribution":
        binary = shutil.which("docker-registry")
        if binary is None:
            raise UpstreamUnavailable("docker-registry is not installed (scripts/install-test-deps.sh installs it)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        auth = ""
        if self.realm is not None:
            auth = TOKEN_AUTH.format(realm=self.realm.url, service=self.realm.service, issuer=self.realm.issuer,
                                     bundle=self.realm.cert_path)
        elif self.credentials is not None:
            path = htpasswd_file(self.workdir / "users.htpasswd", *self.credentials)
            auth = HTPASSWD_AUTH.format(path=path)
        config = self.workdir / "config.yml"
        config.write_text(CONFIG.format(root=self.workdir / "storage", port=self.port, auth=auth))
        log = self.log_path.open("ab")
        self.process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"docker-registry exited:\n{self.log_path.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/v2/", timeout=1).close()
                return self
            except urllib.error.HTTPError:
                return self  # 401: it answers
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"docker-registry did not answer:\n{self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def served(self, method: str, path: str, status: int | None = None) -> int:
        """How many requests ``method path`` (the path without its query) the access log shows."""
        count = 0
        for match in _ACCESS.finditer(self.log_path.read_text(errors="replace")):
            if match["method"] == method and match["path"].split("?")[0] == path and (
                    status is None or int(match["status"]) == status):
                count += 1
        return count

    def authorization(self, name: str = "") -> str | None:
        """What a client pushing to ``name`` sends: Basic, or a Bearer token of the realm."""
        if self.realm is not None:
            return "Bearer " + self.realm.token(self.realm.username, f"repository:{name}:pull,push")
        if self.credentials is not None:
            return basic(*self.credentials)
        return None


# -- pushing images -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Pushed:
    name: str
    tag: str
    digest: str  # of the manifest or index
    media_type: str
    blobs: dict[str, bytes]  # every layer and config, by digest
    children: list[str] = field(default_factory=list)  # an index's manifests


def _request(url: str, method: str, body: bytes | None = None, headers: dict[str, str] | None = None,
             authorization: str | None = None) -> tuple[int, dict[str, str], bytes]:
    sent = dict(headers or {})
    if authorization:
        sent["Authorization"] = authorization
    request = urllib.request.Request(url, data=body, method=method, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def push_blob(base: str, name: str, data: bytes, authorization: str | None = None) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    status, headers, body = _request(f"{base}/v2/{name}/blobs/uploads/", "POST", b"",
                                     {"Content-Length": "0"}, authorization)
    assert status == 202, (status, body)
    location = headers["Location"]
    if location.startswith("/"):
        location = base + location
    joiner = "&" if "?" in location else "?"
    status, _, body = _request(f"{location}{joiner}digest={digest}", "PUT", data,
                               {"Content-Type": "application/octet-stream"}, authorization)
    assert status == 201, (status, body)
    return digest


def push_manifest(base: str, name: str, reference: str, body: bytes, media_type: str,
                  authorization: str | None = None) -> str:
    status, headers, answer = _request(f"{base}/v2/{name}/manifests/{reference}", "PUT", body,
                                       {"Content-Type": media_type}, authorization)
    assert status == 201, (status, answer)
    return "sha256:" + hashlib.sha256(body).hexdigest()


def layer(size: int) -> bytes:
    """A gzipped tar of one file of ``size`` random bytes, as image layers are: podman unpacks it and
    checks it against the config's diff_ids, skopeo keeps its media type as it is."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo(f"{uuid.uuid4().hex}.bin")
        info.size, info.mtime = size, 0
        tar.addfile(info, io.BytesIO(os.urandom(size)))
    return gzip.compress(raw.getvalue(), compresslevel=1, mtime=0)


def _diff_id(data: bytes) -> str:
    uncompressed = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return "sha256:" + hashlib.sha256(uncompressed).hexdigest()


def image_manifest(layers: list[bytes], seed: str, arch: str = "amd64") -> tuple[bytes, dict[str, bytes]]:
    config = json.dumps({"architecture": arch, "os": "linux", "config": {"Labels": {"seed": seed}},
                         "rootfs": {"type": "layers", "diff_ids": [_diff_id(data) for data in layers]}}).encode()
    blobs = {"sha256:" + hashlib.sha256(data).hexdigest(): data for data in [config, *layers]}
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": "sha256:" + hashlib.sha256(config).hexdigest(),
                   "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": "sha256:" + hashlib.sha256(d).hexdigest(), "size": len(d)}
                   for d in layers],
    }).encode()
    return manifest, blobs


def push_image(base: str, name: str, tag: str, layers: int = 3, layer_size: int = 64 * 1024,
               seed: str = "", authorization: str | None = None) -> Pushed:
    """A single-platform OCI image of ``layers`` random layers."""
    seed = seed or uuid.uuid4().hex
    manifest, blobs = image_manifest([layer(layer_size) for _ in range(layers)], seed)
    for data in blobs.values():
        push_blob(base, name, data, authorization)
    digest = push_manifest(base, name, tag, manifest, OCI_MANIFEST, authorization)
    return Pushed(name, tag, digest, OCI_MANIFEST, blobs)


def push_multiarch(base: str, name: str, tag: str, arches: tuple[str, ...] = ("amd64", "arm64"),
                   layer_size: int = 32 * 1024, authorization: str | None = None) -> Pushed:
    """An OCI index of one two-layer image per architecture."""
    children, all_blobs = [], {}
    for arch in arches:
        manifest, blobs = image_manifest([layer(layer_size) for _ in range(2)], uuid.uuid4().hex, arch)
        for data in blobs.values():
            push_blob(base, name, data, authorization)
        digest = push_manifest(base, name, "sha256:" + hashlib.sha256(manifest).hexdigest(), manifest,
                               OCI_MANIFEST, authorization)
        children.append({"mediaType": OCI_MANIFEST, "digest": digest, "size": len(manifest),
                         "platform": {"architecture": arch, "os": "linux"}})
        all_blobs |= blobs
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children}).encode()
    digest = push_manifest(base, name, tag, index, OCI_INDEX, authorization)
    return Pushed(name, tag, digest, OCI_INDEX, all_blobs, [c["digest"] for c in children])


# -- a corrupting upstream ---------------------------------------------------------------------

class CorruptUpstream:
    """Serves ``library/bad:latest`` (a manifest listing one layer) and that layer with its last
    byte changed: same length, wrong digest. Counts the blob GETs it answered. With
    ``corrupt_manifest`` the manifest gains a byte too (still valid JSON, still sent under its
    original digest); with ``truncate`` the layer's own bytes stop halfway and the connection closes
    (an upstream lost mid-stream)."""

    NAME = "library/bad"

    def __init__(self, layer: bytes) -> None:
        self.layer = layer
        self.manifest, self.blobs = image_manifest([layer], "corrupt")
        self.manifest_digest = "sha256:" + hashlib.sha256(self.manifest).hexdigest()
        self.layer_digest = "sha256:" + hashlib.sha256(layer).hexdigest()
        self.blob_gets = 0
        self.corrupt_manifest = False
        self.truncate = False
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "CorruptUpstream":
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_HEAD(self) -> None:  # noqa: N802
                self._serve(head=True)

            def do_GET(self) -> None:  # noqa: N802
                self._serve(head=False)

            def _serve(self, head: bool) -> None:
                path = urlsplit(self.path).path
                prefix = f"/v2/{CorruptUpstream.NAME}/"
                body, media_type = None, "application/octet-stream"
                if path in (prefix + "manifests/latest", prefix + "manifests/" + upstream.manifest_digest):
                    body, media_type = upstream.manifest + (b"\n" if upstream.corrupt_manifest else b""), OCI_MANIFEST
                elif path.startswith(prefix + "blobs/"):
                    digest = path[len(prefix + "blobs/"):]
                    body = upstream.blobs.get(digest)
                    if digest == upstream.layer_digest and not head:
                        upstream.blob_gets += 1
                        body = upstream.layer[:-1] + bytes([upstream.layer[-1] ^ 0xFF])
                        if upstream.truncate:
                            self._send_half(upstream.layer)
                            return
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", media_type)
                self.send_header("Content-Length", str(len(body)))
                if media_type == OCI_MANIFEST:
                    self.send_header("Docker-Content-Digest", upstream.manifest_digest)
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _send_half(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
