"""Clients that push, pull and delete without pause while something underneath fails (a database
failover, a store restarting), and a ledger of everything the registry acknowledged: a 201 for a
blob or a manifest, a 202 for a delete. Afterwards ``verify`` checks that nothing acknowledged was
lost or half-applied, and ``Outcomes`` says how long the registry was unavailable and how it failed.

A client behaves as docker's does: a 503 is retried after its Retry-After; any other failure
starts the blob's upload again with a new session. Used by tests/e2e/test_database_failover.py and
by the benchmark's ``failover`` workload.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from tests.faults.wire import OCI_MANIFEST, Registry, digest, image_manifest
from tests.support.rawhttp import Reply
from tests.support.server import RegistryServer

MiB = 1024 * 1024
LARGE = 6 * MiB  # above S3's 5 MiB part minimum: stored as a part of a multipart upload
STEP_DEADLINE = 120.0  # the longest one step keeps being retried on 503s
DELETE_EVERY = 4  # a client deletes one of its images after every fourth push
# How long the load may go on after the fault, until it has shown what the checks need (a loaded
# machine pushes only a few images while the fault runs, and may not have deleted one yet).
EXERCISE_DEADLINE = 90.0


@dataclass(frozen=True)
class Outcome:
    started: float
    ended: float
    what: str
    status: int  # 0: the connection failed
    retry_after: str


@dataclass
class Ledger:
    """What the registry acknowledged, by every client."""

    blobs: dict[tuple[str, str], int] = field(default_factory=dict)  # (repository, digest): size
    manifests: dict[tuple[str, str], tuple[str, bytes]] = field(default_factory=dict)  # (repo, tag): (digest, bytes)
    deleted: set[tuple[str, str]] = field(default_factory=set)  # (repository, manifest digest)
    # Deletes sent without a 202 (a 503 may answer a delete that went through): either way is right.
    delete_sent: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def exercised(self, clients: int) -> bool:
        """Whether the load did enough to check: more images than clients, and a delete."""
        with self.lock:
            return len(self.manifests) > clients and bool(self.deleted)


@dataclass
class Outcomes:
    items: list[Outcome] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, outcome: Outcome) -> None:
        with self.lock:
            self.items.append(outcome)

    def failures(self) -> list[Outcome]:
        return [o for o in self.items if o.status == 0 or o.status >= 500]

    def counts(self) -> Counter[str]:
        """Answers by status, and a failure without a Retry-After counted apart."""
        counts: Counter[str] = Counter()
        for o in self.items:
            counts[str(o.status)] += 1
            if (o.status == 0 or o.status >= 500) and not o.retry_after:
                counts[f"{o.status} without Retry-After"] += 1
        return counts

    def window(self) -> tuple[float, float] | None:
        """(when the first failure ended, seconds from its start to the end of the first success
        that started after it); None when nothing failed."""
        failed = self.failures()
        if not failed:
            return None
        first = min(failed, key=lambda o: o.started)
        after = [o for o in self.items if o.started >= first.ended and 0 < o.status < 500]
        if not after:
            return first.started, float("inf")
        return first.started, min(o.ended for o in after) - first.started

    def errors_span(self) -> float:
        failed = self.failures()
        return max(o.ended for o in failed) - min(o.started for o in failed) if failed else 0.0


class Unavailable(Exception):
    """A step kept failing with 503 past STEP_DEADLINE."""


class LoadClient(threading.Thread):
    """Pushes images (small layers, every fifth a large one), pulls acknowledged ones back, deletes
    some; every request's outcome goes to ``outcomes``, every acknowledgement to ``ledger``. Between
    one image and the next it rests ``rest`` seconds on average (0: not at all)."""

    def __init__(self, number: int, host: str, ledger: Ledger, outcomes: Outcomes, stop: threading.Event,
                 problems: list[str], rest: float = 0.0) -> None:
        super().__init__(daemon=True, name=f"load-{number}")
        self.number, self.ledger, self.outcomes, self.stop, self.problems = number, ledger, outcomes, stop, problems
        self.rest = rest
        self.registry = Registry(host, timeout=90)
        self.repository = f"load/c{number}"
        self.random = random.Random(number)

    def call(self, what: str, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> Reply:
        """One request, retried after its Retry-After while the registry answers 503."""
        deadline = time.monotonic() + STEP_DEADLINE
        while True:
            started = time.monotonic()
            try:
                reply = self.registry.request(method, path, body, headers)
            except OSError:
                self.outcomes.add(Outcome(started, time.monotonic(), what, 0, ""))
                reply = Reply(0, {}, b"")
            else:
                self.outcomes.add(Outcome(started, time.monotonic(), what, reply.status, reply.header("Retry-After")))
            if reply.status not in (0, 503) or self.stop.is_set():
                return reply
            if time.monotonic() > deadline:
                raise Unavailable(f"{what}: still {reply.status} after {STEP_DEADLINE:g} s")
            time.sleep(float(reply.header("Retry-After") or 1))

    def push_blob(self, data: bytes) -> bool:
        """POST, PATCH, PUT; True when acknowledged (201). A failure other than 503 starts over."""
        for _ in range(5):
            if self.stop.is_set():
                return False
            started = self.call("blob POST", "POST", f"/v2/{self.repository}/blobs/uploads/")
            if started.status != 202:
                continue
            chunk = f"0-{len(data) - 1}"
            patched = self.call("blob PATCH", "PATCH", started.header("Location"), data,
                                {"Content-Type": "application/octet-stream", "Content-Range": chunk})
            # A 416 whose Range is the whole chunk: an attempt whose answer was lost (a 503 for a
            # commit that went through) had stored it.
            if not (patched.status == 202 or patched.status == 416 and patched.header("Range") == chunk):
                continue
            location = patched.header("Location") or started.header("Location")
            put = self.call("blob PUT", "PUT", f"{location}{'&' if '?' in location else '?'}digest={digest(data)}")
            if put.status == 201:
                with self.ledger.lock:
                    self.ledger.blobs[(self.repository, digest(data))] = len(data)
                return True
        return False

    def push_image(self, serial: int) -> None:
        tag = f"t{serial}"
        size = LARGE if serial % 5 == 4 else self.random.randrange(1024, 64 * 1024)
        layers = [os.urandom(size)]
        config = json.dumps({"architecture": "amd64", "os": "linux", "client": self.number, "serial": serial}).encode()
        if not all(self.push_blob(blob) for blob in (config, *layers)):
            return
        manifest = image_manifest(config, layers)
        reply = self.call("manifest PUT", "PUT", f"/v2/{self.repository}/manifests/{tag}", manifest,
                          {"Content-Type": OCI_MANIFEST})
        if reply.status == 201:
            with self.ledger.lock:
                self.ledger.manifests[(self.repository, tag)] = (digest(manifest), manifest)

    def pull_one(self) -> None:
        with self.ledger.lock:
            known = [(key, value) for key, value in self.ledger.manifests.items()
                     if (key[0], value[0]) not in self.ledger.delete_sent]
        if not known:
            return
        (repository, tag), (manifest_digest, manifest) = self.random.choice(known)
        reply = self.call("manifest GET", "GET", f"/v2/{repository}/manifests/{manifest_digest}",
                          headers={"Accept": OCI_MANIFEST})
        if reply.status == 200 and reply.body != manifest:
            self.problems.append(f"{repository}@{manifest_digest}: other bytes than pushed")
        elif reply.status == 404 and not self._delete_asked(repository, manifest_digest):
            self.problems.append(f"{repository}:{tag} ({manifest_digest}) acknowledged, then 404")

    def _delete_asked(self, repository: str, manifest_digest: str) -> bool:
        """Whether the manifest's owner has asked to delete it: a pull chosen before the owner's
        DELETE may reach the registry after it (the owner records the delete before sending it)."""
        with self.ledger.lock:
            return (repository, manifest_digest) in self.ledger.delete_sent

    def delete_one(self) -> None:
        with self.ledger.lock:
            mine = [(tag, value[0]) for (repo, tag), value in self.ledger.manifests.items()
                    if repo == self.repository and (repo, value[0]) not in self.ledger.delete_sent]
        if len(mine) < 3:
            return
        tag, manifest_digest = mine[0]
        with self.ledger.lock:  # asked for: whatever the answer, it may have been done
            self.ledger.delete_sent.add((self.repository, manifest_digest))
        reply = self.call("manifest DELETE", "DELETE", f"/v2/{self.repository}/manifests/{manifest_digest}")
        if reply.status == 202:
            with self.ledger.lock:
                self.ledger.deleted.add((self.repository, manifest_digest))

    def run(self) -> None:
        serial = 0
        try:
            while not self.stop.is_set():
                self.push_image(serial)
                self.pull_one()
                if serial % DELETE_EVERY == DELETE_EVERY - 1:
                    self.delete_one()
                serial += 1
                if self.rest:  # random around it: clients resting in step would leave moments with none in flight
                    self.stop.wait(self.random.uniform(0, 2 * self.rest))
        except Unavailable as exc:
            self.problems.append(f"client {self.number}: {exc}")


def fetch_blob(registry: Registry, repository: str, blob_digest: str) -> bytes | None:
    """A blob's bytes, following the redirect to the store; None when the registry does not have it."""
    reply = registry.request("GET", f"/v2/{repository}/blobs/{blob_digest}")
    if reply.status == 307:
        with urllib.request.urlopen(reply.header("Location"), timeout=120) as response:
            return response.read()
    return reply.body if reply.status == 200 else None


def verify(host: str, ledger: Ledger) -> list[str]:
    """What is wrong with what was acknowledged: a blob or manifest missing or with other bytes, a
    deleted manifest back. Empty when nothing was lost."""
    registry = Registry(host, timeout=120)
    wrong: list[str] = []
    for (repository, blob_digest), size in sorted(ledger.blobs.items()):
        data = fetch_blob(registry, repository, blob_digest)
        if data is None or len(data) != size or "sha256:" + hashlib.sha256(data).hexdigest() != blob_digest:
            wrong.append(f"blob {repository}@{blob_digest}: {'missing' if data is None else 'other bytes'}")
    for (repository, tag), (manifest_digest, manifest) in sorted(ledger.manifests.items()):
        deleted = (repository, manifest_digest) in ledger.deleted
        if not deleted and (repository, manifest_digest) in ledger.delete_sent:
            continue
        for reference in (manifest_digest,) if deleted else (tag, manifest_digest):
            reply = registry.request("GET", f"/v2/{repository}/manifests/{reference}",
                                     headers={"Accept": OCI_MANIFEST})
            if deleted and reply.status != 404:
                wrong.append(f"manifest {repository}@{manifest_digest}: deleted (202), then {reply.status}")
            elif not deleted and (reply.status != 200 or reply.body != manifest):
                wrong.append(f"manifest {repository}:{tag} by {reference}: {reply.status}")
    return wrong


def run_load(host: str, clients: int, during: Callable[[], None], outcomes: Outcomes | None = None,
             rest: float = 0.0) -> tuple[Ledger, Outcomes, list[str]]:
    """``clients`` clients push, pull and delete through ``host`` while ``during()`` runs (the
    fault), then until the ledger holds enough to check (``Ledger.exercised``), within
    EXERCISE_DEADLINE. ``outcomes``: where the answers go (``during`` may read them as they come);
    ``rest``: each client's mean pause between one image and the next."""
    ledger, problems, stop = Ledger(), [], threading.Event()
    outcomes = Outcomes() if outcomes is None else outcomes
    threads = [LoadClient(n, host, ledger, outcomes, stop, problems, rest) for n in range(clients)]
    for thread in threads:
        thread.start()
    try:
        during()
        deadline = time.monotonic() + EXERCISE_DEADLINE
        while not ledger.exercised(clients) and time.monotonic() < deadline and not problems:
            time.sleep(0.2)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=STEP_DEADLINE + 60)
    return ledger, outcomes, problems


def unresumable_sessions(server: RegistryServer, host: str) -> list[str]:
    """The upload sessions left behind (a client starts a new one after a failure) that a client could
    neither go on with nor cancel. Once the lease of a request that failed has run out, each must
    take a chunk at its offset (or refuse it with 400 if a PUT whose commit failed had closed it: that
    PUT, sent again, finishes it), and then be cancelled. Empty when no session is stuck."""
    registry = Registry(host)
    listed = server.manage("shell", "-c", (
        "from registry.models import Upload\n"
        "for u in Upload.objects.select_related('repository'):\n"
        "    print('session', u.repository.name, u.id, u.offset)\n"))
    assert listed.returncode == 0, listed.stderr
    sessions = [line.split()[1:] for line in listed.stdout.splitlines() if line.startswith("session ")]
    stuck = []
    deadline = time.monotonic() + 75  # the upload lease (60 s), and slack
    for name, upload_id, offset in sessions:
        location = f"/v2/{name}/blobs/uploads/{upload_id}"
        while True:
            reply = registry.request("PATCH", location, b"more", {
                "Content-Type": "application/octet-stream", "Content-Range": f"{offset}-{int(offset) + 3}"})
            if reply.status in (202, 400) or time.monotonic() > deadline:
                break
            time.sleep(2)
        closed = reply.status == 400 and b"closed by a PUT" in reply.body
        if not (reply.status == 202 or closed) or registry.request("DELETE", location).status != 204:
            stuck.append(f"{name} {upload_id} at {offset}: {reply.status} {reply.body[:200]!r}")
    return stuck
