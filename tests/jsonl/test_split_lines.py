"""The scanner's line split finds newlines with ``find`` and must equal ``bytes.split``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsh_store.jsonl.lines import split_lines

# Lines of every length around the split's short-line probe (8 lines within 4 KB),
# empty lines, CRs and a final unterminated piece.
_LINE = st.one_of(
    st.binary(max_size=40),
    st.integers(0, 1500).map(lambda n: b"x" * n),
    st.sampled_from([b"", b"\r", b"{}", b"\x00" * 3]),
).map(lambda line: line.replace(b"\n", b"."))
_BLOCK = st.lists(_LINE, max_size=60).map(b"\n".join)


@given(_BLOCK, st.booleans())
def test_split_lines_is_bytes_split(block: bytes, newline_at_end: bool) -> None:
    block += b"\n" if newline_at_end else b""
    assert split_lines(block) == block.split(b"\n")


def test_split_lines_edges() -> None:
    for block in [b"", b"\n", b"\n\n", b"a", b"a\n", b"a\nb", b"ab\n" * 40 + b"c"]:
        assert split_lines(block) == block.split(b"\n")
    long_then_short = b"y" * 9000 + b"\n" + b"ab\n" * 100
    assert split_lines(long_then_short) == long_then_short.split(b"\n")
