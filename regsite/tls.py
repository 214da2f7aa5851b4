"""HTTPS served by the registry itself: ``[server] tls_cert`` and ``tls_key``, reloaded when they change.

``Certificates`` holds the SSL context that new connections are wrapped with (regsite/worker.py).
The gunicorn master builds it at start-up, where a file that cannot be read, a key that is not the
certificate's or a file holding no PEM stops the server with one line naming the key; an expired
certificate is only a warning (the operator may be about to replace it). Workers inherit the
context when they fork and look at the files' identity (device, inode, size, times) about once a
second: a changed pair is loaded into a new context, which the next connections get, while open
connections keep theirs. A pair that does not load (a key written before its certificate, a file
half copied) keeps the previous context and is logged once; the next change is tried again. This
is zot's certificate watcher, by polling: Kubernetes replaces a mounted secret by swapping a
symlink, which a stat of the path sees as well as any notification would.

SIGHUP (gunicorn's graceful reload) reloads the files in the master and starts new workers with
them; there too a pair that does not load keeps the previous one instead of stopping the server.
"""
from __future__ import annotations

import logging
import os
import ssl
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from regsite.config import ConfigError

log = logging.getLogger("gunicorn.error")

CHECK_SECONDS = 1.0  # how often a worker looks at the files
_PEM_CERT = b"-----BEGIN CERTIFICATE-----"
_PEM_KEY = b"PRIVATE KEY-----"


def _no_passphrase() -> str:
    raise ConfigError("[server] tls_key: the key is encrypted (it needs a passphrase); give an unencrypted key "
                      "file, readable by the server only")


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """A context for serving HTTP/1.1 over TLS 1.2 or 1.3 with ``cert`` (the certificate, then any
    intermediates) and ``key``; ConfigError naming the key at fault."""
    for name, path, marker in (("tls_cert", cert, _PEM_CERT), ("tls_key", key, _PEM_KEY)):
        try:
            with open(path, "rb") as fh:
                text = fh.read()
        except OSError as exc:
            raise ConfigError(f"[server] {name}: cannot read {path}: {exc.strerror}") from None
        if marker not in text:
            what = "certificate" if name == "tls_cert" else "private key"
            raise ConfigError(f"[server] {name}: {path} holds no PEM {what} ({marker.decode()} ...)")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(cert, key, password=_no_passphrase)
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise ConfigError(f"[server] tls_key: {key} is not the key of the certificate in {cert}") from None
        which = "tls_key" if exc.library == "PEM" and "key" in str(exc).lower() else "tls_cert"
        raise ConfigError(f"[server] {which}: cannot load {cert if which == 'tls_cert' else key}: "
                          f"{exc.reason or exc}") from None
    return context


def warnings_of(cert: str, now: datetime | None = None) -> list[str]:
    """What is wrong with the certificate in ``cert`` that should not stop the server: its dates."""
    try:
        with open(cert, "rb") as fh:
            validity = validity_of(ssl.PEM_cert_to_DER_cert(fh.read().decode("ascii", "replace")))
    except (OSError, ValueError):
        return []
    not_before, not_after = validity
    now = now or datetime.now(timezone.utc)
    if not_after < now:
        return [f"[server] tls_cert: the certificate in {cert} expired on {not_after:%Y-%m-%d %H:%M} UTC: "
                "clients refuse it; replace the file (it is reloaded without a restart)"]
    if not_before > now:
        return [f"[server] tls_cert: the certificate in {cert} is not valid before {not_before:%Y-%m-%d %H:%M} "
                "UTC: clients refuse it until then (is this machine's clock right?)"]
    return []


def validity_of(der: bytes) -> tuple[datetime, datetime]:
    """(notBefore, notAfter) of a DER certificate (RFC 5280 4.1), read without a parser library."""
    _tag, start, _end = _element(der, 0)  # Certificate
    _tag, pos, _end = _element(der, start)  # tbsCertificate
    tag, _start, end = _element(der, pos)
    if tag == 0xA0:  # [0] version
        pos = end
    for _skipped in ("serialNumber", "signature", "issuer"):
        pos = _element(der, pos)[2]
    tag, pos, _end = _element(der, pos)  # validity
    if tag != 0x30:
        raise ValueError("no validity in the certificate")
    before_tag, before_start, before_end = _element(der, pos)
    after_tag, after_start, after_end = _element(der, before_end)
    return (_time(before_tag, der[before_start:before_end]), _time(after_tag, der[after_start:after_end]))


def _element(der: bytes, pos: int) -> tuple[int, int, int]:
    """The DER element at ``pos``: (tag, where its content starts, where it ends)."""
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(der[pos:pos + count], "big")
        pos += count
    if pos + length > len(der):
        raise ValueError("truncated certificate")
    return tag, pos, pos + length


def _time(tag: int, value: bytes) -> datetime:
    text = value.decode("ascii")
    if tag == 0x17:  # UTCTime, YYMMDDHHMMSSZ: years 1950-2049 (RFC 5280 4.1.2.5.1)
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif tag != 0x18:  # GeneralizedTime
        raise ValueError("not a certificate time")
    return datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=timezone.utc)


def _identity(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)  # through symlinks: a swapped Kubernetes secret changes it
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class Certificates:
    """The certificate and key of ``[server] tls_cert`` / ``tls_key``, as the context new
    connections get; ``refresh`` reloads them when the files changed."""

    cert: str
    key: str
    context: ssl.SSLContext = field(init=False)
    warnings: list[str] = field(init=False, default_factory=list)
    _seen: tuple[Any, ...] = field(init=False, default=())
    _refused: tuple[Any, ...] = field(init=False, default=())
    _checked: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        seen = self._files()
        self.context = server_context(self.cert, self.key)
        self._seen = seen
        self.warnings = warnings_of(self.cert)
        self._checked = time.monotonic()

    def _files(self) -> tuple[Any, ...]:
        return (_identity(self.cert), _identity(self.key))

    def refresh(self, now: float | None = None, force: bool = False) -> bool:
        """Load the files again if they changed since the last look (at most every CHECK_SECONDS
        unless ``force``); whether the context is new. A pair that does not load is logged once."""
        now = time.monotonic() if now is None else now
        if not force and now - self._checked < CHECK_SECONDS:
            return False
        self._checked = now
        seen = self._files()
        if seen == self._seen or seen == self._refused:
            return False
        try:
            context = server_context(self.cert, self.key)
        except ConfigError as exc:
            self._refused = seen
            log.warning("TLS certificate not reloaded, the previous one is still served: %s", exc)
            return False
        self.context, self._seen, self._refused = context, seen, ()
        self.warnings = warnings_of(self.cert)
        log.info("TLS certificate reloaded from %s: new connections get it", self.cert)
        for warning in self.warnings:
            log.warning("%s", warning)
        return True


_loaded: Certificates | None = None


def serving(cert: str, key: str) -> Certificates | None:
    """The master's certificates (None without TLS). The first load raises ConfigError; a reload
    (gunicorn.conf.py runs again on SIGHUP) of the same files keeps the previous pair when the new
    one does not load, as a worker does, rather than stop a running server."""
    global _loaded
    if not cert:
        _loaded = None
        return None
    if _loaded is not None and (_loaded.cert, _loaded.key) == (cert, key):
        _loaded.refresh(force=True)
        return _loaded
    _loaded = Certificates(cert, key)
    return _loaded


def loaded() -> Certificates | None:
    return _loaded
