"""Property tests of the repository-name and tag grammar: what passes can never escape a path."""
from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from registry.names import MAX_NAME_LENGTH, TAG_RE, is_valid_name, is_valid_tag

NAME_ALPHABET = set("abcdefghijklmnopqrstuvwxyz0123456789._-/")
TAG_ALPHABET = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
# The spec's grammar written out again, independently of registry.names.
SPEC_NAME = re.compile(
    r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*"
)
SPEC_TAG = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}")

ALNUM = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)
SEPARATOR = st.sampled_from([".", "_", "__", "-", "--", "---"])
COMPONENT = st.builds(
    lambda first, rest: first + "".join(sep + part for sep, part in rest),
    ALNUM, st.lists(st.tuples(SEPARATOR, ALNUM), max_size=3),
)
# Names built from the grammar's parts (hypothesis' from_regex is slow on this nested pattern).
GRAMMAR_NAMES = st.lists(COMPONENT, min_size=1, max_size=6).map("/".join)

hostile_text = st.one_of(
    st.text(),
    st.text(alphabet="./%2eEfF0\x00\\:-_aZ", max_size=40),
    st.sampled_from(["..", "../x", "a/..", "a/../b", "/abs", "a//b", "a/", "%2e%2e", "a%2fb", "a\x00b",
                     "a/./b", ".hidden", "a\nb", "é", "A", "a" * 300]),
)


@given(hostile_text)
def test_it_accepts_a_name_exactly_when_the_spec_grammar_does(text: str) -> None:
    expected = SPEC_NAME.fullmatch(text) is not None and len(text) <= MAX_NAME_LENGTH
    assert is_valid_name(text) is expected


@given(hostile_text)
def test_it_never_accepts_a_name_that_could_leave_a_directory(text: str) -> None:
    if is_valid_name(text):
        assert set(text) <= NAME_ALPHABET
        components = text.split("/")
        assert all(c and c not in (".", "..") and c[0].isalnum() and c[-1].isalnum() for c in components)


@settings(max_examples=200)
@given(GRAMMAR_NAMES.filter(lambda s: len(s) <= MAX_NAME_LENGTH))
def test_it_accepts_every_name_the_grammar_generates(name: str) -> None:
    assert is_valid_name(name)
    assert SPEC_NAME.fullmatch(name)
    assert not is_valid_name(name + "/")
    assert not is_valid_name("/" + name)
    assert not is_valid_name(name + "/..")


@given(GRAMMAR_NAMES)
def test_it_refuses_names_over_the_length_limit(name: str) -> None:
    long_name = (name + "/") * (MAX_NAME_LENGTH // (len(name) + 1) + 1) + name
    assert not is_valid_name(long_name)


@given(hostile_text)
def test_it_accepts_a_tag_exactly_when_the_spec_grammar_does(text: str) -> None:
    assert is_valid_tag(text) is (SPEC_TAG.fullmatch(text) is not None)


@given(hostile_text)
def test_it_never_accepts_a_tag_that_is_a_path_or_a_digest(text: str) -> None:
    if is_valid_tag(text):
        assert set(text) <= TAG_ALPHABET
        assert 1 <= len(text) <= 128
        assert text[0] not in ".-"
        assert ":" not in text and "/" not in text


@given(st.from_regex(TAG_RE, fullmatch=True))
def test_it_accepts_every_tag_the_grammar_generates(tag: str) -> None:
    assert is_valid_tag(tag)
    assert not is_valid_tag(tag + "x" * 128)
