"""A TCP proxy on loopback whose faults a test switches on and off: between the registry and its
database or its object store, to show what the registry does when the path to them breaks.

Modes, applied at once to the connections already open and to new ones:

- ``PASS``: bytes flow both ways;
- ``STALL``: connections are accepted and stay open, but nothing is answered: what the client sends
  is swallowed and nothing comes back (a server that hangs, or a path that blackholes packets; a
  proxy in user space cannot drop a SYN, so a new connection is accepted, as the kernel accepts it
  for a listener that never answers);
- ``RESET``: every connection is reset (RST), and a new one is reset as soon as it is accepted.

A connection accepted during a stall is never joined to the server, so it stays silent when the
mode returns to ``PASS``; one that was open before the stall resumes. Threads only, stopped by stop().
"""
from __future__ import annotations

import select
import socket
import struct
import threading
from dataclasses import dataclass, field

from tests.support.ports import free_port

PASS, STALL, RESET = "pass", "stall", "reset"
POLL = 0.1  # how soon a pump notices a new mode


def _reset(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


@dataclass
class _Link:
    client: socket.socket
    server: socket.socket | None
    closed: threading.Event = field(default_factory=threading.Event)

    def close(self, reset: bool = False) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.server):
            if sock is not None:
                _reset(sock) if reset else sock.close()


@dataclass
class FaultProxy:
    target: tuple[str, int]
    mode: str = PASS
    port: int = 0
    accepted: int = 0
    _listener: socket.socket | None = None
    _links: list[_Link] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "FaultProxy":
        self.port = free_port()
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        listener.settimeout(POLL)
        self._listener = listener
        threading.Thread(target=self._accept, daemon=True, name=f"faultproxy-{self.port}").start()
        return self

    def set(self, mode: str) -> None:
        assert mode in (PASS, STALL, RESET), mode
        with self._lock:
            self.mode = mode
            links = list(self._links)
        if mode == RESET:
            for link in links:
                link.close(reset=True)

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            links, self._links = list(self._links), []
        for link in links:
            link.close()
        if self._listener is not None:
            self._listener.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            if self.mode == RESET:
                _reset(client)
                continue
            server = None
            if self.mode == PASS:
                try:
                    server = socket.create_connection(self.target, timeout=5)
                    server.settimeout(None)
                except OSError:
                    _reset(client)
                    continue
            link = _Link(client, server)
            with self._lock:
                self._links.append(link)
            for source, dest in ((client, server), (server, client)):
                if source is not None:
                    threading.Thread(target=self._pump, args=(link, source, dest), daemon=True).start()

    def _pump(self, link: _Link, source: socket.socket, dest: socket.socket | None) -> None:
        while not link.closed.is_set():
            try:
                if not select.select([source], [], [], POLL)[0]:
                    continue
                data = source.recv(256 * 1024)
            except (OSError, ValueError):  # closed by set(RESET) meanwhile
                break
            if not data:
                break
            if self.mode == STALL or dest is None:
                continue  # swallowed
            try:
                dest.sendall(data)
            except OSError:
                break
        link.close(reset=self.mode == RESET)
        with self._lock:
            if link in self._links:
                self._links.remove(link)
