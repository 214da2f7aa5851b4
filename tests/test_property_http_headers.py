"""Property tests of the Range and Content-Range parsers: a window inside the blob or a clean refusal."""
from __future__ import annotations

import io

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from registry.http import BadHeader, RangeFile, Unsatisfiable, parse_content_range, parse_range

NUMBER = st.integers(min_value=0, max_value=10**20)
# Positions of up to 19 digits are honoured; longer ones make the header ignored (RFC 9110 allows it).
POSITION = st.integers(min_value=0, max_value=10**19 - 1)
SIZE = st.integers(min_value=0, max_value=10**12)
hostile_headers = st.one_of(
    st.text(max_size=60),
    st.text(alphabet="bytes=0123456789-,/* \t\n", max_size=40),
    st.builds(lambda a, b: f"bytes={a}-{b}", NUMBER, NUMBER),
    st.builds(lambda a: f"bytes={a}-", NUMBER),
    st.builds(lambda a: f"bytes=-{a}", NUMBER),
    st.builds(lambda a, b: f"{a}-{b}", NUMBER, NUMBER),
    st.builds(lambda a, b, t: f"bytes {a}-{b}/{t}", NUMBER, NUMBER, st.one_of(NUMBER.map(str), st.just("*"))),
)


@given(hostile_headers, SIZE)
def test_it_returns_a_window_inside_the_blob_or_refuses(header: str, size: int) -> None:
    try:
        window = parse_range(header, size)
    except Unsatisfiable:
        return
    if window is not None:
        start, end = window
        assert 0 <= start <= end < size


@given(POSITION, POSITION, SIZE)
def test_it_serves_a_closed_range_clipped_to_the_blob(first: int, last: int, size: int) -> None:
    assume(first <= last)
    header = f"bytes={first}-{last}"
    if first >= size:
        with pytest.raises(Unsatisfiable):
            parse_range(header, size)
    else:
        assert parse_range(header, size) == (first, min(last, size - 1))


@given(POSITION.filter(bool), st.integers(min_value=1, max_value=10**12))
def test_it_serves_the_last_bytes_of_a_suffix_range(suffix: int, size: int) -> None:
    assert parse_range(f"bytes=-{suffix}", size) == (max(size - suffix, 0), size - 1)


@given(st.binary(min_size=1, max_size=300), hostile_headers)
def test_it_reads_exactly_the_window_of_the_file(data: bytes, header: str) -> None:
    try:
        window = parse_range(header, len(data))
    except Unsatisfiable:
        return
    if window is None:
        return
    start, end = window
    reader = RangeFile(io.BytesIO(data), start, end - start + 1)
    read = b""
    while chunk := reader.read(7):
        read += chunk
    assert read == data[start:end + 1]


@given(hostile_headers)
def test_it_parses_a_content_range_or_raises_bad_header(header: str) -> None:
    try:
        parsed = parse_content_range(header)
    except BadHeader:
        return
    if parsed is not None:
        start, end = parsed
        assert 0 <= start <= end


@given(POSITION, POSITION)
def test_it_reads_the_start_and_end_of_a_chunk(start: int, end: int) -> None:
    if start <= end:
        assert parse_content_range(f"{start}-{end}") == (start, end)
        assert parse_content_range(f"bytes {start}-{end}/*") == (start, end)
    else:
        with pytest.raises(BadHeader):
            parse_content_range(f"{start}-{end}")
