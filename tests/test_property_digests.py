"""Property tests of digest parsing: only canonical digests pass, and they map to safe paths."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry.digests import HASHERS, Digest, InvalidDigest
from registry.storage import paths

HEX = "0123456789abcdef"
hostile_digests = st.one_of(
    st.text(),
    st.text(alphabet="sha256:0123456789abcdefABCDEF./%\x00-_=+", max_size=150),
    st.builds(lambda alg, hexpart: f"{alg}:{hexpart}",
              st.sampled_from(["sha256", "sha512", "SHA256", "md5", "sha256+b64", "sha384", ""]),
              st.text(alphabet=HEX + "ABCDEF./-_=", max_size=140)),
    st.sampled_from(["sha256:../../../etc/passwd", "sha256:%2e%2e%2f", "sha256:" + "a" * 63 + "/",
                     "sha256:" + "0" * 64 + "\x00", "sha256:" + "0" * 64 + "\n", "/sha256:" + "0" * 64]),
)


@given(hostile_digests)
def test_it_parses_a_digest_or_raises_invalid_digest_and_nothing_else(text: str) -> None:
    try:
        digest = Digest.parse(text)
    except InvalidDigest:
        return
    assert str(digest) == text
    assert digest.algorithm in HASHERS
    assert set(digest.hex) <= set(HEX)
    assert len(digest.hex) == {"sha256": 64, "sha512": 128}[digest.algorithm]


@given(hostile_digests)
def test_it_builds_only_paths_inside_the_blob_tree(text: str) -> None:
    digest = Digest.parse_or_none(text)
    if digest is None:
        return
    path = paths.blob_data(digest)
    parts = path.split("/")
    assert parts[0] == "blobs" and parts[-1] == "data"
    assert all(part and part not in (".", "..") for part in parts)
    assert paths.digest_from_blob_path(path) == digest


@given(st.binary(max_size=512), st.sampled_from(sorted(HASHERS)))
def test_it_round_trips_the_digest_of_any_content(data: bytes, algorithm: str) -> None:
    digest = Digest.of(data, algorithm)
    assert Digest.parse(str(digest)) == digest


@given(st.binary(max_size=64), st.sampled_from(sorted(HASHERS)), st.data())
def test_it_refuses_a_digest_changed_in_case_or_length(data: bytes, algorithm: str, draw: st.DataObject) -> None:
    text = str(Digest.of(data, algorithm))
    mutated = draw.draw(st.sampled_from([text.upper(), text[:-1], text + "0", text.replace(":", "::")]))
    with pytest.raises(InvalidDigest):
        Digest.parse(mutated)


@given(st.text(max_size=80))
def test_it_builds_upload_paths_only_from_upload_ids(text: str) -> None:
    try:
        path = paths.upload_data(text)
    except ValueError:
        return
    assert path == f"uploads/{text}/data"
    assert len(text) == 32 and set(text) <= set(HEX)
