"""Loopback ports for the servers tests start, free of collisions between test processes.

Binding port 0 and closing the socket hands out a port of the kernel's ephemeral range that stays
free only until the server binds it; in between (a ``migrate`` and an interpreter start: seconds)
another test process binding port 0 can be handed the same port, and any outgoing connection on
the machine can take it as its source port. With the suite spread over several processes
(pytest-xdist) and other runs on the same machine, that turns into servers that fail to start.

So ports come from below the ephemeral range, and each one handed out is leased for LEASE_SECONDS
by a file in a directory every test process on the machine shares; the lease is taken under an
exclusive lock, only for a port that nothing is listening on. Past its lease a port is taken again
only if its server is gone (it no longer binds).
"""
from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import time
from pathlib import Path

LEASES = Path(tempfile.gettempdir()) / "registry-test-ports"
# Longer than any gap between choosing a port and binding it (an RGW cluster starting under load),
# and than any test that needs a port nothing listens on.
LEASE_SECONDS = 600.0
LOWEST = 10000


def _candidates() -> range:
    """The largest span of ports at or above LOWEST that the kernel never hands out by itself."""
    try:
        low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    spans = [range(LOWEST, low), range(high + 1, 65536)]
    best = max(spans, key=len)
    return best if len(best) >= 1000 else range(LOWEST, 65536)


def _bindable(port: int) -> bool:
    """Nothing listens on the port nor holds it (no SO_REUSEADDR: a port in TIME_WAIT counts as taken)."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that no other test process will be handed for LEASE_SECONDS."""
    LEASES.mkdir(exist_ok=True)
    try:
        LEASES.chmod(0o1777)  # every user's test runs share it, as they share /tmp
    except PermissionError:
        pass
    ports = _candidates()
    with open(LEASES / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        now = time.time()
        start = random.randrange(len(ports))
        for offset in range(len(ports)):
            port = ports[(start + offset) % len(ports)]
            lease = LEASES / str(port)
            try:
                if now - lease.stat().st_mtime < LEASE_SECONDS:
                    continue
            except FileNotFoundError:
                pass
            if not _bindable(port):
                continue
            lease.write_text(f"{os.getpid()}\n")
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1} (leases in {LEASES})")
