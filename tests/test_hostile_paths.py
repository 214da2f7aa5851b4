"""Path traversal and injection through gunicorn: hostile names, digests, tags and upload ids (`..`,
`%2e%2e`, `%2f`, NUL, absolute paths, 10 KB components) get 400/404, and no file outside the
storage root is created, changed or served. An upload session works only in its own repository."""
from __future__ import annotations

import hashlib
import os
import socket
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from tests.faults.wire import Registry, digest, storage_problems
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e
MARK = f"pwned{uuid.uuid4().hex[:12]}"
ZERO = "sha256:" + "0" * 64
HOSTILE_NAMES = [
    "..", "../..", "a/../../..", f"../../{MARK}", "%2e%2e", f"%2e%2e/%2e%2e/{MARK}", f"a%2f..%2f..%2f{MARK}",
    "a/%2E%2E/b", "a%00b", "%00", f"/{MARK}", f"..%5c..%5c{MARK}", "a/./b", "Team", "a//b", "a" * 10240,
    "a/" * 2000 + "a", f"%252e%252e/{MARK}", "a%0d%0aX-Injected:%201",
]
HOSTILE_DIGESTS = [
    f"sha256:../../../../{MARK}", f"sha256:%2e%2e%2f%2e%2e%2f{MARK}", ZERO + "%00", "sha256:" + "0" * 62 + "/..",
    "..", "%2e%2e", "sha256:" + "a" * 10240, "sha256:" + "../" * 20 + MARK, "/etc/passwd", "%2fetc%2fpasswd",
    f"sha256%3a..%2f..%2f{MARK}", "sha256:" + "A" * 64, f"../{MARK}:" + "0" * 64, "sha256:%00",
]
HOSTILE_TAGS = ["..", f"../{MARK}", f"%2e%2e%2f{MARK}", "a%00", "x" * 10240, "-a", ".a", "a%0d%0aX-Injected:%201"]
HOSTILE_UPLOADS = ["..", "%2e%2e", "..%2f..%2fblobs", f"..%2f..%2f{MARK}", "0" * 32, "A" * 32, "%00", "x" * 10240,
                   "*", str(uuid.uuid4()), "0" * 31 + "%00"]
CLEAN = {400, 404}
TOO_LONG = {400, 404, 414, 431}  # gunicorn refuses request lines over 8190 bytes itself


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    workdir = tmp_path_factory.mktemp("hostile")
    sentinel = workdir / "sentinel"
    for rel in ("secret.txt", "blobs/sha256/00/data", "uploads/x/data", f"{MARK}-guard"):
        (sentinel / rel).parent.mkdir(parents=True, exist_ok=True)
        (sentinel / rel).write_text(f"do not touch {rel}")
    server = RegistryServer(workdir)
    yield server.start()
    server.stop()


def escaped_marks(workdir: Path) -> list[str]:
    """Files named after MARK anywhere under the server's directory (but the sentinel's guard), and
    near every directory above it up to / (where a ``../`` can reach): not the whole of a shared
    /tmp, which on a busy machine takes minutes to walk."""
    found = [str(p) for p in workdir.rglob(f"*{MARK}*") if "sentinel" not in p.relative_to(workdir).parts]
    for above in [*workdir.parents, Path(__file__).parents[1]]:
        for root, dirs, files in os.walk(above):
            if root.startswith(("/proc", "/sys", "/dev")):
                dirs.clear()
                continue
            found += [os.path.join(root, n) for n in dirs + files if MARK in n and "sentinel" not in root]
            if Path(root) == above or len(Path(root).relative_to(above).parts) < 2:
                continue
            dirs.clear()  # two levels below each directory above the server's: where ../ lands
    return found


def snapshot(server: RegistryServer) -> dict[str, tuple[int, int, str]]:
    """Every file of the server's directory but its own storage, database, log and temporary
    files (its metrics, which the requests change)."""
    skip = ("registry", "db.sqlite3", "gunicorn.log", "tokens", "tmp")
    state = {}
    for path in sorted(server.workdir.rglob("*")):
        rel = path.relative_to(server.workdir).as_posix()
        if rel.startswith(skip):
            continue
        st = path.lstat()
        content = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state[rel] = (st.st_size, st.st_mtime_ns, content)
    return state


def raw(server: RegistryServer, method: str, target: str, body: bytes = b"") -> tuple[int, bytes, bytes]:
    """Send the request line exactly as given (no client-side normalisation); return the status, the
    response head and the body, read until the server closes."""
    host, port = server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        head = [f"{method} {target} HTTP/1.1", f"Host: {server.host}", "Connection: close",
                f"Content-Length: {len(body)}", "Content-Type: application/octet-stream"]
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
    response_head, _, response_body = bytes(received).partition(b"\r\n\r\n")
    return int(response_head.split(b" ", 2)[1]), response_head, response_body


def allowed(method: str, target: str) -> set[int]:
    if len(target) > 8000:
        return TOO_LONG
    if "?mount=" in target:
        return CLEAN | {202}  # a mount it will not do starts an ordinary upload session, as the spec says
    if "?last=" in target:
        return CLEAN | {200}  # `last` is only compared with tag names, never used as a path
    return CLEAN


def requests_for_names() -> list[tuple[str, str]]:
    out = []
    for name in HOSTILE_NAMES:
        out += [("GET", f"/v2/{name}/tags/list"), ("POST", f"/v2/{name}/blobs/uploads/"),
                ("POST", f"/v2/{name}/blobs/uploads/?digest={digest(b'x')}"), ("PUT", f"/v2/{name}/manifests/v1"),
                ("GET", f"/v2/{name}/blobs/{ZERO}"), ("DELETE", f"/v2/{name}/manifests/{ZERO}"),
                ("GET", f"/v2/{name}/referrers/{ZERO}"),
                ("POST", f"/v2/team/app/blobs/uploads/?mount={ZERO}&from={name}")]
    return out


def requests_for_digests() -> list[tuple[str, str]]:
    out = []
    for d in HOSTILE_DIGESTS:
        out += [(m, f"/v2/team/app/blobs/{d}") for m in ("GET", "HEAD", "DELETE")]
        out += [("POST", f"/v2/team/app/blobs/uploads/?digest={d}"), ("GET", f"/v2/team/app/referrers/{d}"),
                ("GET", f"/v2/team/app/manifests/{d}"), ("PUT", f"/v2/team/app/manifests/{d}"),
                ("DELETE", f"/v2/team/app/manifests/{d}")]
    return out


def requests_for_tags() -> list[tuple[str, str]]:
    out = []
    for tag in HOSTILE_TAGS:
        out += [(m, f"/v2/team/app/manifests/{tag}") for m in ("GET", "HEAD", "PUT", "DELETE")]
        out += [("GET", f"/v2/team/app/tags/list?last={tag}")]
    return out


def requests_for_uploads() -> list[tuple[str, str]]:
    return [(m, f"/v2/team/app/blobs/uploads/{u}{q}") for u in HOSTILE_UPLOADS
            for m, q in (("GET", ""), ("PATCH", ""), ("PUT", f"?digest={digest(b'x')}"), ("DELETE", ""))]


@pytest.mark.parametrize("requests", [requests_for_names, requests_for_digests, requests_for_tags,
                                      requests_for_uploads], ids=["names", "digests", "tags", "upload-ids"])
def test_it_refuses_hostile_path_components_without_touching_anything(server, requests) -> None:
    client = Registry(server.host)
    client.push_image("team/app", "v1", [os.urandom(1024)])
    before = snapshot(server)
    answers = []
    for method, target in requests():
        body = b"x" if method in ("POST", "PUT", "PATCH") else b""
        status, head, reply = raw(server, method, target, body)
        answers.append((method, target[:120], status))
        assert status in allowed(method, target), (method, target[:200], status, reply[:300])
        assert b"do not touch" not in reply and b"root:x:0:0" not in reply
        assert b"\nX-Injected" not in head
    assert len(answers) >= 40
    assert snapshot(server) == before
    assert storage_problems(server) == []
    assert escaped_marks(server.workdir) == []
    assert client.pull_image("team/app", "v1")
    assert "Traceback" not in server.log_path.read_text()


def test_it_serves_an_upload_session_only_through_its_own_repository(server) -> None:
    client = Registry(server.host)
    blob = os.urandom(4096)
    location = client.request("POST", "/v2/team/owner/blobs/uploads/").header("Location")
    upload_id = location.rsplit("/", 1)[1]
    assert client.request("PATCH", location, blob[:1000]).status == 202
    for other in ("team/other", "team/owner/sub", "team"):
        theirs = f"/v2/{other}/blobs/uploads/{upload_id}"
        for method, path, body in (("GET", theirs, None), ("PATCH", theirs, blob[1000:]),
                                   ("PUT", f"{theirs}?digest={digest(blob)}", blob[1000:]), ("DELETE", theirs, None)):
            reply = client.request(method, path, body)
            assert reply.status == 404 and reply.code() == "BLOB_UPLOAD_UNKNOWN", (method, other, reply.body)
    assert client.request("GET", location).header("Range") == "0-999"
    assert client.request("PUT", f"{location}?digest={digest(blob)}", blob[1000:]).status == 201
    assert client.request("HEAD", f"/v2/team/owner/blobs/{digest(blob)}").status == 200
    assert client.request("HEAD", f"/v2/team/other/blobs/{digest(blob)}").status == 404
