"""Soak: 16 clients mixing pushes, pulls, tag lists and token checks against gunicorn with auth on.
Zero errors, and the memory (PSS) of the server's process tree at the end within 10% of what it was
after warm-up. SOAK_SECONDS sets the length: `make test` runs 15 s, `make soak` the full 60 s."""
from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.conftest import require_tool
from tests.faults.wire import Registry
from tests.support.auth import basic
from tests.support.memory import MiB, total_pss

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # timing-sensitive: run alone (make test)

CLIENTS = 16
DURATION = float(os.environ.get("SOAK_SECONDS", "15"))
WARM_UP = max(5.0, DURATION * 0.25)
WINDOW = 2.0  # memory is the median of the samples over this many seconds: PSS moves as pages are shared
PASSWORD = "soak-password"



class Soak:
    def __init__(self, host: str, write_token: str, read_token: str) -> None:
        self.host = host
        self.writer = Registry(host, headers={"Authorization": f"Bearer {write_token}"})
        self.reader = Registry(host, headers={"Authorization": basic("token", read_token)})
        self.user = Registry(host, headers={"Authorization": basic("alice", PASSWORD)})
        self.read_token = read_token
        self.pushed: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.errors: list[str] = []

    def push(self, rng: random.Random, client_id: int) -> None:
        repo, tag = f"soak/app{client_id % 4}", f"t{client_id}-{rng.randrange(1000)}"
        layers = [rng.randbytes(rng.choice((4096, 32 * 1024, 128 * 1024))) for _ in range(rng.randint(1, 2))]
        client = self.writer if rng.random() < 0.5 else self.user
        manifest_digest, _ = client.push_image(repo, tag, layers)
        with self.lock:
            self.pushed.append((repo, manifest_digest))

    def pull(self, rng: random.Random) -> None:
        with self.lock:
            if not self.pushed:
                return
            repo, manifest_digest = rng.choice(self.pushed)
        assert self.reader.pull_image(repo, manifest_digest)

    def list_tags(self, rng: random.Random) -> None:
        reply = self.reader.request("GET", f"/v2/soak/app{rng.randrange(4)}/tags/list?n=50")
        assert reply.status in (200, 404), reply.body  # 404 until the first push to that repository
        assert self.reader.request("GET", "/v2/_catalog").status == 200

    def check_tokens(self, rng: random.Random) -> None:
        good = Registry(self.host, headers={"Authorization": f"Bearer {self.read_token}"})
        assert good.request("GET", "/v2/_catalog").status == 200
        forged = Registry(self.host, headers={"Authorization": f"Bearer svc_{'x' * 43}"})
        assert forged.request("GET", "/v2/_catalog").status == 401
        denied = self.reader.request("DELETE", f"/v2/soak/app0/manifests/nothing-{rng.randrange(99)}")
        assert denied.status == 403  # a read token may not delete
        listed = self.user.request("POST", "/api/tokens/list", json.dumps(
            {"username": "alice", "password": PASSWORD}).encode(), {"Content-Type": "application/json"})
        assert listed.status == 200 and len(json.loads(listed.body)["tokens"]) == 2

    def client(self, client_id: int, stop: threading.Event) -> None:
        rng = random.Random(client_id)
        actions = [("push", lambda: self.push(rng, client_id)), ("pull", lambda: self.pull(rng)),
                   ("tags", lambda: self.list_tags(rng)), ("tokens", lambda: self.check_tokens(rng))]
        while not stop.is_set():
            name, action = rng.choices(actions, weights=(3, 4, 2, 1))[0]
            try:
                action()
                with self.lock:
                    self.counts[name] += 1
            except Exception as exc:  # every failure is a finding: keep it and keep going
                with self.lock:
                    self.errors.append(f"{name}: {exc!r}"[:500])


def test_it_serves_a_mixed_load_without_errors_or_memory_growth(start_registry, tmp_path: Path) -> None:
    workdir = tmp_path / "server"
    workdir.mkdir()
    subprocess.run([require_tool("htpasswd"), "-cbB", str(workdir / "users.htpasswd"), "alice", PASSWORD],
                   check=True, capture_output=True)
    server = start_registry(SVC_AUTH_ENABLED="true", SVC_SERVER_LOG_LEVEL="warning")
    tokens = {}
    for role in ("write", "read"):
        reply = Registry(server.host).request("POST", "/api/tokens", json.dumps(
            {"username": "alice", "password": PASSWORD, "role": role, "ttl_days": 1}).encode(),
            {"Content-Type": "application/json"})
        assert reply.status == 201, reply.body
        tokens[role] = json.loads(reply.body)["token"]
    soak = Soak(server.host, tokens["write"], tokens["read"])

    stop = threading.Event()
    threads = [threading.Thread(target=soak.client, args=(i, stop), daemon=True) for i in range(CLIENTS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    samples: list[tuple[float, int]] = []
    while (elapsed := time.monotonic() - started) < DURATION:
        samples.append((elapsed, total_pss(server.pids())))
        time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    after_warm_up = statistics.median(p for t, p in samples if WARM_UP - WINDOW <= t <= WARM_UP)
    at_end = statistics.median(p for t, p in samples if t >= DURATION - WINDOW)

    done = sum(soak.counts.values())
    summary = (f"{done} operations in {DURATION:.0f}s ({dict(soak.counts)}), PSS {after_warm_up / MiB:.1f} MiB "
               f"after warm-up, {at_end / MiB:.1f} MiB at the end")
    print(summary)
    assert soak.errors == [], soak.errors[:20]
    assert all(soak.counts[name] > 0 for name in ("push", "pull", "tags", "tokens")), summary
    assert at_end <= after_warm_up * 1.10, summary
    assert '"status":5' not in server.log_path.read_text()
