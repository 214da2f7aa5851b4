"""SHA-256 and SHA-512 whose running state can be saved between requests and resumed anywhere.

An upload session is a series of requests that may land on any worker of any replica, and the blob's
digest must be checked when the last one arrives without reading the uploaded bytes back (on S3 that
would mean downloading them all again). Python's ``hashlib`` cannot export its state. The packages
that can were evaluated: ``rehash`` refuses OpenSSL 3 ("OpenSSL 3 is not yet supported"),
``resumablesha256`` has no SHA-512 and hashes several times slower than hashlib (figures in 0b53493),
``cykooz.rehash`` is SHA-1 only. So this module calls OpenSSL's ``SHA256_*`` / ``SHA512_*`` functions
(the library hashlib itself uses, at the same speed, with the GIL released during each call) and
saves the context structure, whose layout is part of OpenSSL's public ``sha.h``.

A saved state carries the number of bytes hashed, checked on restore, so a state that does not match
the session's offset is refused and the caller falls back to hashing the stored bytes again.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


class StateUnavailable(Exception):
    """No resumable implementation here, or a saved state that cannot be resumed."""


@dataclass(frozen=True)
class _Algorithm:
    name: str
    context_size: int
    digest_size: int
    # Where the bit count lives in the context, and how it is stored.
    count_offset: int
    count_format: str
    init: Any
    update: Any
    final: Any


@lru_cache(maxsize=1)
def _library() -> dict[str, _Algorithm] | None:
    path = ctypes.util.find_library("crypto")
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    algorithms: dict[str, _Algorithm] = {}
    # SHA256_CTX: h[8] (u32), Nl, Nh (u32), data[16] (u32), num, md_len (u32) = 112 bytes.
    # SHA512_CTX: h[8] (u64), Nl, Nh (u64), u.p[128], num, md_len (u32) = 216 bytes.
    for name, size, digest_size, count_offset, count_format in (("sha256", 112, 32, 32, "<II"),
                                                                ("sha512", 216, 64, 64, "<QQ")):
        prefix = name.upper()
        try:
            init, update, final = (getattr(lib, f"{prefix}_{fn}") for fn in ("Init", "Update", "Final"))
        except AttributeError:
            continue
        init.argtypes = [ctypes.c_void_p]
        update.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        final.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        algorithm = _Algorithm(name, size, digest_size, count_offset, count_format, init, update, final)
        if _self_test(algorithm):
            algorithms[name] = algorithm
    return algorithms


def _self_test(algorithm: _Algorithm) -> bool:
    """The library must agree with hashlib, across a save and restore, or it is not used at all."""
    data = bytes(range(256)) * 5
    first = ResumableHash(algorithm)
    first.update(data[:777])
    second = ResumableHash(algorithm, first.state(), 777)
    second.update(data[777:])
    return second.hexdigest() == hashlib.new(algorithm.name, data).hexdigest()


class ResumableHash:
    def __init__(self, algorithm: _Algorithm, state: bytes | None = None, length: int = 0) -> None:
        self._algorithm = algorithm
        self._context = ctypes.create_string_buffer(algorithm.context_size)
        if state is None:
            algorithm.init(self._context)
            return
        if len(state) != algorithm.context_size:
            raise StateUnavailable(f"a {algorithm.name} state is {algorithm.context_size} bytes, not {len(state)}")
        low, high = struct.unpack_from(algorithm.count_format, state, algorithm.count_offset)
        bits = (high << (32 if algorithm.count_format == "<II" else 64)) | low
        if bits != length * 8:
            raise StateUnavailable(f"the saved state has hashed {bits // 8} bytes, not {length}")
        ctypes.memmove(self._context, state, algorithm.context_size)

    @property
    def name(self) -> str:
        return self._algorithm.name

    def update(self, data: bytes | bytearray | memoryview) -> None:
        chunk = bytes(data) if not isinstance(data, bytes) else data
        self._algorithm.update(self._context, chunk, len(chunk))

    def state(self) -> bytes:
        return self._context.raw

    def hexdigest(self) -> str:
        copy = ctypes.create_string_buffer(self._context.raw, self._algorithm.context_size)
        out = ctypes.create_string_buffer(self._algorithm.digest_size)
        self._algorithm.final(out, copy)
        return out.raw.hex()


def available(algorithm: str) -> bool:
    return algorithm in (_library() or {})


def new(algorithm: str) -> ResumableHash:
    found = (_library() or {}).get(algorithm)
    if found is None:
        raise StateUnavailable(f"no resumable {algorithm} here")
    return ResumableHash(found)


def resume(algorithm: str, state: bytes, length: int) -> ResumableHash:
    """The hash of ``length`` bytes from its saved ``state``; StateUnavailable if it does not fit."""
    found = (_library() or {}).get(algorithm)
    if found is None:
        raise StateUnavailable(f"no resumable {algorithm} here")
    return ResumableHash(found, state, length)
