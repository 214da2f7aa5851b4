"""Property tests of the ``n`` pagination parameter: an int within bounds or PAGINATION_NUMBER_INVALID."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from registry.services.exceptions import PaginationInvalid
from registry.services.pagination import parse_limit

raw_values = st.one_of(
    st.none(),
    st.text(max_size=30),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(["", "-0", "+5", " 7 ", "1e3", "0x10", "1_000", "9" * 5000, "NaN", "\x00", "٣"]),
)
DEFAULTS = st.one_of(st.none(), st.integers(min_value=0, max_value=100))
MAXIMUM = st.integers(min_value=1, max_value=10_000)


@given(raw_values, DEFAULTS, MAXIMUM, st.booleans())
def test_it_returns_a_bounded_count_or_raises_pagination_invalid(
    raw: str | None, default: int | None, maximum: int, strict: bool
) -> None:
    try:
        n = parse_limit(raw, default, maximum, strict)
    except PaginationInvalid as exc:
        assert exc.message
        return
    if raw in (None, ""):
        assert n == default
    else:
        assert n is not None and 0 <= n <= maximum


@given(st.integers(min_value=0, max_value=10**9), MAXIMUM)
def test_it_caps_a_large_count_unless_strict(value: int, maximum: int) -> None:
    assert parse_limit(str(value), None, maximum, strict=False) == min(value, maximum)
    try:
        assert parse_limit(str(value), None, maximum, strict=True) == value
        assert value <= maximum
    except PaginationInvalid:
        assert value > maximum


@given(st.integers(max_value=-1), MAXIMUM, st.booleans())
def test_it_refuses_negative_counts(value: int, maximum: int, strict: bool) -> None:
    try:
        parse_limit(str(value), None, maximum, strict)
    except PaginationInvalid:
        return
    raise AssertionError(f"n={value} was accepted")
