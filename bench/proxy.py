"""The pull-through cache's workloads: an image pulled through ``[[proxy]]`` against the same pull
elsewhere.

- ``proxy-cold``: a pull of an image the cache has never seen (a new one each run), through our
  cache, against the same cold pull through the CNCF registry's own pull-through cache (distribution
  2.8 with ``proxy: remoteurl:``, one instance per upstream since it mirrors only one). Our side
  also pulls an image of the same size straight from the upstream (the CNCF registry) in the same
  run: issue 16's target is ours against that, at least 0.91 of the upstream's rate ("adds less
  than 10%"). Our cache streams each blob to the client while it stores and hashes it, fetching it
  once; distribution's sends the client a fetch of its own and stores a second, concurrent fetch
  (registry/proxy/proxyblobstore.go: ``copyContent`` to the client, ``storeLocal`` in a goroutine),
  so its client's bytes are not checked against the digest by the cache.
- ``proxy-cached``: a pull of an image the cache holds, against a pull of an image of the same
  size pushed into an ordinary repository of the same server (ratio at least 0.95).

A pull is what a client does: the manifest by tag, then every blob (config and layers) in turn,
each hashed as it arrives. ``Sizes.proxy_upstream_rate`` (bytes per second) paces the upstream's
answers through a relay in this process, for every cache and the direct pull alike: an upstream is
another registry across a network, a link all of a cache's connections to it share, and unpaced on
loopback the comparison measures three processes sharing this machine's two cores instead (both
figures are shown).
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.client import ACCEPT, EMPTY_JSON, MIB, BlobSource, Client, tiny_manifest
from bench.servers import Endpoint, Reference, process_tree

PREFIX = "mirror"  # the cache's [[proxy]] table for the upstream as it is
PACED_PREFIX = f"{PREFIX}-paced"  # and through the paced relay
OURS, CNCF = "ours", "cncf proxy"  # the sides of proxy-cold
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
    """A TCP relay to ``target`` sending the upstream's answers at most ``rate`` bytes per second in
    all (0: as fast as they come), as a link to a remote registry would: concurrent connections share
    it, so a cache that fetches a blob twice at once gets half the rate for each fetch."""

    def __init__(self, target: Endpoint, rate: int) -> None:
        self.target, self.rate = target, rate
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        self._lock = threading.Lock()
        self._free_at = 0.0  # when the link has sent everything handed to it so far
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
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, bool(self.rate)), daemon=True).start()

    def _pace(self, size: int) -> None:
        """Wait until the link would have carried ``size`` more bytes."""
        with self._lock:
            now = time.perf_counter()
            # An idle link banks at most 50 ms of credit (a sleep's overshoot, not a burst).
            self._free_at = max(self._free_at, now - 0.05) + size / self.rate
            ahead = self._free_at - now
        if ahead > 0:
            time.sleep(ahead)

    def _pipe(self, source: socket.socket, dest: socket.socket, paced: bool) -> None:
        try:
            while data := source.recv(256 * 1024):
                dest.sendall(data)
                if paced:
                    self._pace(len(data))
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


CNCF_PROXY = """\
proxy:
  remoteurl: {url}
"""


class CncfProxies:
    """The CNCF registry's pull-through cache, as its documentation configures it: one instance for
    the upstream as it is, one for the upstream through the paced relay (each mirrors one upstream).
    Started, stopped and measured (CPU, ``pids``) as one server."""

    label = "reference"

    def __init__(self, workdir: Path, upstream: Endpoint, relay: PacedRelay) -> None:
        self.upstream = upstream
        self.direct = Reference(workdir / "direct", extra_config=CNCF_PROXY.format(url=f"http://{upstream.netloc}"))
        self.paced = Reference(workdir / "paced", extra_config=CNCF_PROXY.format(url=relay.url))

    def start(self) -> None:
        # distribution asks its upstream for /v2/ as it starts and exits when nothing answers; the
        # upstream starts beside it (bench.__main__.Servers).
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection((self.upstream.host, self.upstream.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        for server in (self.direct, self.paced):
            server.start()

    def stop(self) -> None:
        for server in (self.direct, self.paced):
            server.stop()

    @property
    def endpoint(self) -> Endpoint:
        return self.direct.endpoint

    def pids(self) -> list[int]:
        return [pid for server in (self.direct, self.paced) if server.process
                for pid in process_tree(server.process.pid)]


def _image_for(key: str, side: Any, sizes: Any, i: int) -> Image:
    image = new_image(f"{key}-{side.label.replace(' ', '-')}-{i}", sizes.proxy_layers, sizes.proxy_layer)
    push(side.server.proxy_upstream.endpoint, image)
    return image


def run_cold(side: Any, sizes: Any, i: int) -> dict[str, float]:
    """Side "ours" pulls new images through our cache and, for issue 16's target, images of the same
    size from the upstream itself, in turn (the order alternates between runs); side "cncf proxy"
    pulls new images through the CNCF registry's cache. Each straight, and through the paced relay."""
    upstream, relay = side.server.proxy_upstream, side.server.proxy_relay
    figures = {}
    for key, paced in (("proxy_cold", False), ("proxy_cold_paced", True)):
        if side.label == CNCF:
            cache = side.server.paced if paced else side.server.direct
            image = _image_for(key, side, sizes, i)
            figures[key] = image.size / MIB / pull(cache.endpoint, image.repo, image)
            continue
        direct = relay.endpoint("upstream (paced)") if paced else upstream.endpoint
        prefix = PACED_PREFIX if paced else PREFIX
        pulls = [(key, side.endpoint, prefix + "/"), (key.replace("cold", "direct"), direct, "")]
        for figure, endpoint, repo_prefix in pulls[::-1] if i % 2 else pulls:
            image = _image_for(figure, side, sizes, i)
            figures[figure] = image.size / MIB / pull(endpoint, repo_prefix + image.repo, image)
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
