"""A TCP relay: connections to one address are passed to another, byte for byte, both ways.

The tests' servers (PostgreSQL, RGW) listen on loopback; containers on a Docker network reach the
host at their network's gateway address, where a relay passes them on.
"""
from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Iterator


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


@contextmanager
def relay(listen: tuple[str, int], target: tuple[str, int]) -> Iterator[int]:
    """Relay connections to ``listen`` (port 0: a free one; the port is yielded) to ``target``."""
    listener = socket.create_server(listen)
    open_sockets: list[socket.socket] = [listener]

    def serve() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(target)
            open_sockets.extend((client, upstream))
            threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() above
        except OSError:
            pass
        for sock in open_sockets:
            sock.close()
