"""Blob pull over HTTPS ([server] tls_cert) against the same pull over plain HTTP, on one machine.

``.venv/bin/python -m bench.tls_pull [MiB] [rounds]`` starts two of ours (plain and HTTPS, a CA of
its own making), pushes one blob to each, then pulls it A B B A per round with a client that hashes
the body, and prints MiB/s and the server tree's CPU seconds per GiB for each side. Over plain HTTP
the worker sends the file with sendfile; over HTTPS it reads and encrypts it in its loop.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.servers import cpu_seconds, process_tree
from tests.support.certs import CA, tls_env
from tests.support.server import RegistryServer

MIB = 1024 * 1024


def _connection(server: RegistryServer, ca: CA) -> http.client.HTTPConnection:
    if server.ca_file is None:
        return http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    return http.client.HTTPSConnection("127.0.0.1", server.port, context=ca.client_context(), timeout=120)


def _push(server: RegistryServer, ca: CA, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    connection = _connection(server, ca)
    connection.request("POST", f"/v2/bench/tls/blobs/uploads/?digest={digest}", data,
                       {"Content-Type": "application/octet-stream"})
    response = connection.getresponse()
    response.read()
    assert response.status == 201, response.status
    connection.close()
    return digest


def _pull(server: RegistryServer, ca: CA, digest: str) -> tuple[float, float, int]:
    """(seconds, server CPU seconds, bytes) of one pull, hashed as it arrives."""
    pids = process_tree(server.process.pid)  # type: ignore[union-attr]
    connection = _connection(server, ca)
    cpu, started = cpu_seconds(pids), time.perf_counter()
    connection.request("GET", f"/v2/bench/tls/blobs/{digest}")
    response = connection.getresponse()
    hasher, size = hashlib.sha256(), 0
    while piece := response.read(MIB):
        hasher.update(piece)
        size += len(piece)
    took = time.perf_counter() - started
    connection.close()
    assert "sha256:" + hasher.hexdigest() == digest
    return took, cpu_seconds(pids) - cpu, size


def main(mib: int = 256, rounds: int = 3) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bench-tls-"))
    ca = CA(scratch / "ca")
    issued = ca.issue(scratch / "cert.pem", scratch / "key.pem")
    plain = RegistryServer(scratch / "plain").start()
    https = RegistryServer(scratch / "https", env_overrides=tls_env(issued), ca_file=ca.cert_file).start()
    try:
        data = os.urandom(mib * MIB)
        digests = {"plain": _push(plain, ca, data), "https": _push(https, ca, data)}
        del data
        sides = {"plain": plain, "https": https}
        runs: dict[str, list[tuple[float, float, int]]] = {"plain": [], "https": []}
        for _ in range(rounds):
            for name in ("plain", "https", "https", "plain"):
                runs[name].append(_pull(sides[name], ca, digests[name]))
        print(f"blob pull of {mib} MiB, hashed, {rounds * 2} runs per side, load {os.getloadavg()[0]:.1f}")
        rates = {}
        for name, found in runs.items():
            rates[name] = statistics.median(size / MIB / took for took, _cpu, size in found)
            cpu_per_gib = statistics.median(cpu / (size / 1024 / MIB) for _took, cpu, size in found)
            print(f"  {name:6} {rates[name]:7.0f} MiB/s   server CPU {cpu_per_gib:5.2f} s/GiB")
        print(f"  https / plain: {rates['https'] / rates['plain']:.2f}")
    finally:
        plain.stop()
        https.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
