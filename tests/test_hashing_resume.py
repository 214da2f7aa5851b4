"""registry.hashing: a SHA-256 or SHA-512 saved after some bytes and resumed elsewhere from the saved
state alone gives hashlib's digest; a state that does not match the byte count it is resumed at, or
is not a state at all, is refused (StateUnavailable), so the caller hashes the stored bytes again."""
from __future__ import annotations

import hashlib
import os
import struct

import pytest

from registry import hashing

DATA = os.urandom(300_000)
# Around the block sizes (64 bytes for SHA-256, 128 for SHA-512): a state saved with a partial block.
SPLITS = [0, 1, 63, 64, 65, 127, 128, 129, 4096, 299_999, 300_000]


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
def test_openssl_gives_this_host_a_resumable_hash(algorithm: str) -> None:
    # Without it every chunked upload spread over workers reads its bytes back: say so, don't skip.
    assert hashing.available(algorithm)


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
@pytest.mark.parametrize("split", SPLITS)
def test_a_hash_resumed_from_its_saved_state_gives_hashlibs_digest(algorithm: str, split: int) -> None:
    first = hashing.new(algorithm)
    first.update(DATA[:split])
    state = first.state()
    del first  # nothing of the first hash but its saved bytes goes on
    resumed = hashing.resume(algorithm, bytes(state), split)
    resumed.update(DATA[split:])  # only the bytes after the split: nothing is read back
    assert resumed.name == algorithm
    assert resumed.hexdigest() == hashlib.new(algorithm, DATA).hexdigest()


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
def test_a_state_survives_many_saves_as_an_upload_of_many_requests_makes(algorithm: str) -> None:
    state, offset = hashing.new(algorithm).state(), 0
    for size in (5, 1000, 64, 128, 77_777, 3, 100_000):
        hasher = hashing.resume(algorithm, state, offset)
        hasher.update(memoryview(DATA)[offset:offset + size])  # request bodies arrive as views too
        state, offset = hasher.state(), offset + size
    assert hashing.resume(algorithm, state, offset).hexdigest() == hashlib.new(algorithm, DATA[:offset]).hexdigest()


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
def test_reading_the_digest_does_not_end_the_hash(algorithm: str) -> None:
    hasher = hashing.new(algorithm)
    hasher.update(DATA[:1000])
    assert hasher.hexdigest() == hashlib.new(algorithm, DATA[:1000]).hexdigest()
    hasher.update(DATA[1000:2000])
    assert hasher.hexdigest() == hashlib.new(algorithm, DATA[:2000]).hexdigest()


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
@pytest.mark.parametrize("length", [0, 999, 1001, 1000 * 8])
def test_a_state_resumed_at_another_byte_count_is_refused(algorithm: str, length: int) -> None:
    hasher = hashing.new(algorithm)
    hasher.update(DATA[:1000])
    with pytest.raises(hashing.StateUnavailable, match="1000 bytes"):
        hashing.resume(algorithm, hasher.state(), length)


def test_a_state_of_the_wrong_size_or_algorithm_is_refused() -> None:
    sha256 = hashing.new("sha256")
    sha256.update(b"abc")
    with pytest.raises(hashing.StateUnavailable):
        hashing.resume("sha512", sha256.state(), 3)  # a SHA-256 state is 112 bytes, not 216
    with pytest.raises(hashing.StateUnavailable):
        hashing.resume("sha256", sha256.state()[:-1], 3)
    with pytest.raises(hashing.StateUnavailable):
        hashing.resume("sha256", b"", 0)


def test_an_algorithm_without_a_resumable_state_is_refused() -> None:
    assert not hashing.available("md5")
    with pytest.raises(hashing.StateUnavailable):
        hashing.new("md5")
    with pytest.raises(hashing.StateUnavailable):
        hashing.resume("md5", b"\0" * 112, 0)


@pytest.mark.parametrize("algorithm, offset, fmt, length", [
    # 2**32 bits is 512 MiB: a SHA-256 count past it carries into the high word (Nh).
    ("sha256", 32, "<II", 512 * 1024 * 1024 + 3),
    ("sha256", 32, "<II", 5 * 1024 ** 4 + 17),  # 5 TiB, the largest S3 object
    ("sha512", 64, "<QQ", 5 * 1024 ** 4 + 17),
])
def test_the_byte_count_of_a_large_upload_is_read_from_both_words(algorithm: str, offset: int, fmt: str,
                                                                   length: int) -> None:
    # Hashing 5 TiB to get such a state is out of reach: the count fields are written as OpenSSL
    # keeps them (bits, low word then high word), the rest of the state left as it is.
    state = bytearray(hashing.new(algorithm).state())
    bits, width = length * 8, 32 if fmt == "<II" else 64
    struct.pack_into(fmt, state, offset, bits & (2 ** width - 1), bits >> width)
    assert hashing.resume(algorithm, bytes(state), length).name == algorithm
    with pytest.raises(hashing.StateUnavailable):
        hashing.resume(algorithm, bytes(state), length % 2 ** 29)  # the low word alone
