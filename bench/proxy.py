"""The pull-through cache's workloads: an image pulled through ``[[proxy]]`` against the same pull
elsewhere.

- ``proxy-cold``: a pull of an image the cache has never seen (a new one each run), through the
  cache, against the same pull straight from the upstream (the CNCF registry). The cache streams
  each blob to the client while it stores and hashes it, so it should add little: a ratio of at
  least 0.91 of the upstream's rate is "less than 10% slower".
- ``proxy-cached``: a pull of an image the cache holds, against a pull of an image of the same
  size pushed into an ordinary repository of the same server (ratio at least 0.95).

A pull is what a client does: the manifest by tag, then every blob (config and layers) in turn,
each hashed as it arrives. ``Sizes.proxy_upstream_rate`` (bytes per second) paces the upstream's
answers through a relay in this process for both sides of ``proxy-cold``: an upstream is another
registry across a network, and unpaced on loopback the comparison measures three processes sharing
this machine's two cores instead (both figures are shown).
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from bench.client import ACCEPT, EMPTY_JSON, MIB, BlobSource, Client, tiny_manifest
from bench.servers import Endpoint

PREFIX = "mirror"  # the cache's [[proxy]] table for the upstream as it is
PACED_PREFIX = f"{PREFIX}-paced"  # and through the paced relay
CACHED, NORMAL = "ours cached", "ours normal"  # the sides of proxy-cached


@dataclass(frozen=True)
class Image:
    repo: str
    tag: str
    blobs: list[BlobSource]

    @property
    def size(self) -> int:
        return sum(blob.size for blob in self.blobs)


def new_image(label: str, layers: int, layer_size: int) -> Image:
    return Image(f"bench/{label}", "v1", [BlobSource(f"{label}-{n}", layer_size) for n in range(layers)])


def push(endpoint: Endpoint, image: Image) -> None:
    client = Client(endpoint)
    try:
        client.push_small(image.repo, EMPTY_JSON)
        for blob in image.blobs:
            client.push_monolithic(image.repo, blob)
        client.put_manifest(image.repo, image.tag,
                            tiny_manifest(image.repo, [(blob.digest, blob.size) for blob in image.blobs]))
    finally:
        client.close()


def pull(endpoint: Endpoint, repo: str, image: Image) -> float:
    """Seconds to pull ``image`` as ``repo`` (the manifest, then each blob hashed); checks the bytes."""
    client = Client(endpoint)
    try:
        start = time.perf_counter()
        client.call("GET", f"/v2/{repo}/manifests/{image.tag}", headers={"Accept": ACCEPT})
        for blob in image.blobs:
            size, digest = client.pull_hashed(repo, blob.digest)
            if (size, digest) != (blob.size, blob.digest):
                raise RuntimeError(f"{endpoint.label}: {repo} gave {size} bytes hashing to {digest}")
        return time.perf_counter() - start
    finally:
        client.close()


class PacedRelay:
    """A TCP relay to ``target`` sending the upstream's answers at most ``rate`` bytes per second
    (0: as fast as they come), as a link to a remote registry would."""

    def __init__(self, target: Endpoint, rate: int) -> None:
        self.target, self.rate = target, rate
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def endpoint(self, label: str) -> Endpoint:
        return Endpoint(label, "127.0.0.1", self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection((self.target.host, self.target.port))
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pipe, args=(client, server, 0), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, self.rate), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, dest: socket.socket, rate: int) -> None:
        started, sent = time.perf_counter(), 0
        try:
            while data := source.recv(256 * 1024):
                dest.sendall(data)
                sent += len(data)
                if rate:
                    ahead = sent / rate - (time.perf_counter() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                    elif ahead < -0.05:  # idle between requests: do not bank the idle time as credit
                        started, sent = time.perf_counter(), 0
        except OSError:
            pass
        finally:
            for sock in (source, dest):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()


def config_toml(upstream: Endpoint, relay: PacedRelay) -> str:
    """The cache's [[proxy]] tables: the upstream straight, and through the paced relay."""
    return (f'[[proxy]]\nprefix = "{PREFIX}"\nurl = "http://{upstream.netloc}"\n\n'
            f'[[proxy]]\nprefix = "{PACED_PREFIX}"\nurl = "{relay.url}"\n')


def run_cold(side: Any, sizes: Any, i: int) -> dict[str, float]:
    """Side "ours" pulls new images through the cache, side "upstream" pulls them from the upstream
    itself (straight, and through the paced relay)."""
    upstream, relay = side.server.proxy_upstream, side.server.proxy_relay
    through_cache = side.server is not upstream
    figures = {}
    for key, prefix, direct in (("proxy_cold", PREFIX, upstream.endpoint),
                                ("proxy_cold_paced", PACED_PREFIX, relay.endpoint("upstream (paced)"))):
        image = new_image(f"{key}-{side.label.replace(' ', '-')}-{i}", sizes.proxy_layers, sizes.proxy_layer)
        push(upstream.endpoint, image)
        if through_cache:
            took = pull(side.endpoint, f"{prefix}/{image.repo}", image)
        else:
            took = pull(direct, image.repo, image)
        figures[key] = image.size / MIB / took
    return figures


def _cached_image(side: Any, sizes: Any) -> Image:
    return new_image(f"proxy-cached-{side.label.replace(' ', '-')}", sizes.proxy_layers, sizes.proxy_layer)


def prepare_cached(side: Any, sizes: Any) -> None:
    """Side "ours cached": an image pulled once through the cache; "ours normal": one of the same
    size pushed into an ordinary repository of the same server."""
    image = _cached_image(side, sizes)
    if side.label == CACHED:
        push(side.server.proxy_upstream.endpoint, image)
        pull(side.endpoint, f"{PREFIX}/{image.repo}", image)
    else:
        push(side.endpoint, image)


def run_cached(side: Any, sizes: Any, i: int) -> dict[str, float]:
    image = _cached_image(side, sizes)
    repo = f"{PREFIX}/{image.repo}" if side.label == CACHED else image.repo
    return {"proxy_cached": image.size / MIB / pull(side.endpoint, repo, image)}
