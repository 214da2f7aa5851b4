"""Property tests of the manifest and index parser: arbitrary bytes or JSON never escape as anything
but ManifestInvalid, and what it accepts is consistent with what it was given."""
from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from registry import media_types as mt
from registry.digests import Digest
from registry.services import manifest_format as mf
from registry.services.exceptions import ManifestInvalid

DIGESTS = st.one_of(
    st.binary(max_size=16).map(lambda b: str(Digest.of(b))),
    st.sampled_from(["sha256:abc", "md5:00", "", "sha256:" + "G" * 64]),
    st.text(max_size=20),
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False), st.text(max_size=20),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=20,
)
MEDIA_TYPES = st.one_of(
    st.sampled_from(sorted(mt.SUPPORTED_TYPES | mt.SCHEMA1_TYPES) + ["application/json", "text/html"]),
    st.text(max_size=30),
)


def descriptor() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries(
            {"mediaType": MEDIA_TYPES, "digest": DIGESTS, "size": st.one_of(st.integers(), JSON)},
            optional={"annotations": st.one_of(JSON, st.dictionaries(st.text(max_size=8), st.text(max_size=8))),
                      "urls": JSON, "artifactType": st.one_of(st.text(max_size=10), JSON),
                      "platform": JSON},
        ),
        JSON,
    )


MANIFEST_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "schemaVersion": st.one_of(st.just(2), st.just(1), JSON),
        "mediaType": st.one_of(MEDIA_TYPES, JSON),
        "config": descriptor(),
        "layers": st.one_of(st.lists(descriptor(), max_size=3), JSON),
        "manifests": st.one_of(st.lists(descriptor(), max_size=3), JSON),
        "subject": st.one_of(descriptor(), st.none()),
        "artifactType": st.one_of(st.text(max_size=20), JSON),
        "annotations": st.one_of(st.dictionaries(st.text(max_size=8), st.text(max_size=8)), JSON),
    },
)
# Text a well-formed manifest can carry: valid Unicode (no lone surrogates) without NUL.
GOOD_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8)
GOOD_ANNOTATIONS = st.dictionaries(GOOD_TEXT, GOOD_TEXT, max_size=2)
GOOD_DESCRIPTOR = st.fixed_dictionaries(
    {"mediaType": st.sampled_from(["application/vnd.oci.image.layer.v1.tar+gzip", "application/x-any"]),
     "digest": st.binary(max_size=8).map(lambda b: str(Digest.of(b))),
     "size": st.integers(min_value=0, max_value=2**62)},
    optional={"annotations": GOOD_ANNOTATIONS},
)
GOOD_IMAGES = st.fixed_dictionaries({
    "schemaVersion": st.just(2),
    "mediaType": st.sampled_from(sorted(mt.IMAGE_TYPES)),
    "config": GOOD_DESCRIPTOR,
    "layers": st.lists(GOOD_DESCRIPTOR, max_size=4),
}, optional={"subject": GOOD_DESCRIPTOR, "artifactType": GOOD_TEXT})
GOOD_INDEXES = st.fixed_dictionaries({
    "schemaVersion": st.just(2),
    "mediaType": st.sampled_from(sorted(mt.INDEX_TYPES)),
    "manifests": st.lists(GOOD_DESCRIPTOR, max_size=4),
}, optional={"subject": GOOD_DESCRIPTOR, "annotations": GOOD_ANNOTATIONS})
CONTENT_TYPES = st.one_of(st.none(), MEDIA_TYPES, MEDIA_TYPES.map(lambda t: t + "; charset=utf-8"))


def parse_or_invalid(body: bytes, content_type: str | None) -> mf.ParsedManifest | None:
    try:
        return mf.parse(body, content_type)
    except ManifestInvalid as exc:
        assert exc.message
        return None


@given(st.binary(max_size=300), CONTENT_TYPES)
def test_it_refuses_arbitrary_bytes_with_manifest_invalid_only(body: bytes, content_type: str | None) -> None:
    parse_or_invalid(body, content_type)


@given(JSON, CONTENT_TYPES)
def test_it_refuses_arbitrary_json_with_manifest_invalid_only(doc: Any, content_type: str | None) -> None:
    parse_or_invalid(json.dumps(doc).encode(), content_type)


def check_consistent(doc: dict[str, Any], content_type: str | None) -> None:
    parsed = parse_or_invalid(json.dumps(doc).encode(), content_type)
    if parsed is None:
        return
    assert parsed.media_type in mt.SUPPORTED_TYPES
    assert doc["schemaVersion"] == 2
    for d in parsed.blobs + parsed.children + ([parsed.subject] if parsed.subject else []):
        assert Digest.parse_or_none(d.digest) is not None
        assert isinstance(d.size, int) and d.size >= 0
    if parsed.is_index:
        assert parsed.blobs == [] and len(parsed.children) == len(doc["manifests"])
    else:
        assert parsed.children == [] and len(parsed.blobs) == len(doc["layers"]) + 1


@settings(max_examples=200)
@given(MANIFEST_LIKE, CONTENT_TYPES)
def test_it_accepts_only_consistent_manifests(doc: dict[str, Any], content_type: str | None) -> None:
    check_consistent(doc, content_type)


@given(st.one_of(GOOD_IMAGES, GOOD_INDEXES))
def test_it_accepts_every_well_formed_manifest_and_index(doc: dict[str, Any]) -> None:
    parsed = mf.parse(json.dumps(doc).encode(), doc["mediaType"])
    assert parsed.media_type == doc["mediaType"]
    assert len(parsed.blobs) == (len(doc["layers"]) + 1 if "layers" in doc else 0)
    assert len(parsed.children) == len(doc.get("manifests", []))
    assert (parsed.subject.digest if parsed.subject else None) == doc.get("subject", {}).get("digest")


@settings(max_examples=300)
@given(st.one_of(GOOD_IMAGES, GOOD_INDEXES), st.text(max_size=12), st.one_of(JSON, descriptor()), CONTENT_TYPES)
def test_it_accepts_or_refuses_a_corrupted_manifest_cleanly(
    doc: dict[str, Any], key: str, value: Any, content_type: str | None
) -> None:
    field = key if key in doc or not doc else sorted(doc)[len(key) % len(doc)]
    doc = {**doc, field: value}
    check_consistent(doc, content_type)


@given(st.integers(min_value=1, max_value=200_000), st.sampled_from(["[", '{"a":', '{"config":[']))
def test_it_refuses_deeply_nested_json_without_crashing(depth: int, opener: str) -> None:
    closer = {"[": "]", '{"a":': "}", '{"config":[': "]}"}[opener]
    parse_or_invalid((opener * depth + "1" + closer * depth).encode(), mt.OCI_MANIFEST)


def test_it_refuses_json_nested_deeper_than_python_can_decode() -> None:
    assert parse_or_invalid(b"[" * 1_000_000 + b"]" * 1_000_000, mt.OCI_MANIFEST) is None


@given(st.sampled_from(["NaN", "Infinity", "-Infinity", "1" * 5000, '"\\ud800"', "\"\\u0000\""]))
def test_it_refuses_json_oddities(value: str) -> None:
    body = ('{"schemaVersion":2,"mediaType":"%s","config":%s,"layers":[]}' % (mt.OCI_MANIFEST, value)).encode()
    assert parse_or_invalid(body, mt.OCI_MANIFEST) is None


NASTY_TEXT = st.one_of(
    st.text(alphabet=st.characters(categories=["Cs", "Cc"]), min_size=1, max_size=4),
    st.sampled_from(["\ud800", "a\x00b", "x" * 256, "application/" + "y" * 300]),
    st.text(max_size=10),
)


def storable(text: str, limit: int | None = None) -> bool:
    """Text that SQLite and PostgreSQL both store: valid UTF-8, no NUL, within the column."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text and (limit is None or len(text) <= limit)


@settings(max_examples=300)
@given(GOOD_IMAGES, st.sampled_from(["artifactType", "config.mediaType", "config.artifactType",
                                     "annotations.key", "annotations.value"]), NASTY_TEXT)
def test_it_accepts_only_text_the_database_can_store(doc: dict[str, Any], field: str, text: str) -> None:
    doc = json.loads(json.dumps(doc))
    if field == "artifactType":
        doc["artifactType"] = text
    elif field.startswith("config."):
        doc["config"][field.split(".")[1]] = text
    elif field == "annotations.key":
        doc["annotations"] = {text: "v"}
    else:
        doc["annotations"] = {"k": text}
    parsed = parse_or_invalid(json.dumps(doc).encode(), doc["mediaType"])
    if parsed is None:
        return
    assert storable(parsed.referrer_artifact_type, 255)
    assert all(storable(k) and storable(v) for k, v in parsed.annotations.items())


STORED_TYPES = st.one_of(st.sampled_from(sorted(mt.SUPPORTED_TYPES)), st.text(max_size=30))


@given(st.one_of(st.binary(max_size=300), JSON.map(lambda doc: json.dumps(doc).encode()),
                 MANIFEST_LIKE.map(lambda doc: json.dumps(doc).encode())), STORED_TYPES)
def test_the_lenient_reading_of_a_stored_body_never_raises(body: bytes, media_type: str) -> None:
    stored = mf.read_stored(body, media_type)
    assert stored.media_type == media_type
    for d in stored.blobs + stored.children + ([stored.subject] if stored.subject else []):
        assert Digest.parse_or_none(d.digest) is not None  # it keeps only what parse would accept


@settings(max_examples=200)
@given(st.one_of(MANIFEST_LIKE, GOOD_IMAGES, GOOD_INDEXES), CONTENT_TYPES)
def test_the_pages_read_every_accepted_manifest_as_the_api_did(
    doc: dict[str, Any], content_type: str | None
) -> None:
    body = json.dumps(doc).encode()
    parsed = parse_or_invalid(body, content_type)
    if parsed is not None:
        assert mf.read_stored(body, parsed.media_type) == parsed
