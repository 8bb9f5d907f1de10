"""A compressed HTTP answer read as it streams in, however its bytes are split.

The HTTP tool inflates an answer a bounded piece at a time (``corral.tools.http._Body``).
What it reads must not depend on where the network cut the stream into chunks: a gzip of
several members, zero bytes after the last one, "deflate" with or without its zlib
wrapper, and a stream cut short anywhere, which is never taken for a whole answer.
"""

from __future__ import annotations

import gzip
import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.errors import ToolOutputInvalidError
from corral.tools.http import MAX_MEMBERS, _Body

TEXT = json.dumps({"orders": list(range(300)), "note": "x" * 500}).encode()


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


WHOLE = {
    "gzip": ("gzip", gzip.compress(TEXT)),
    "gzip of three members": (
        "gzip",
        gzip.compress(TEXT[:10]) + gzip.compress(TEXT[10:600]) + gzip.compress(TEXT[600:]),
    ),
    "gzip, zero bytes after": ("gzip", gzip.compress(TEXT) + bytes(9)),
    "gzip, one zero byte after": ("gzip", gzip.compress(TEXT) + bytes(1)),
    "gzip, other bytes after": ("gzip", gzip.compress(TEXT) + b"\r\n"),
    "zlib deflate": ("deflate", zlib.compress(TEXT)),
    "raw deflate": ("deflate", raw_deflate(TEXT)),
}


def read(encoding: str, body: bytes, sizes: list[int], cap: int = 1 << 20) -> bytes:
    """``body`` taken in chunks of ``sizes`` (cycled), then ended."""
    reader = _Body(encoding, cap, "t")
    at, k = 0, 0
    while at < len(body):
        size = sizes[k % len(sizes)]
        reader.take(body[at : at + size])
        at, k = at + size, k + 1
    reader.end()
    return bytes(reader.data)


chunks = st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=8)


@pytest.mark.parametrize("shape", list(WHOLE))
@given(sizes=chunks)
def test_a_whole_answer_is_read_whole_however_it_is_split(shape: str, sizes: list[int]) -> None:
    encoding, body = WHOLE[shape]
    assert read(encoding, body, sizes) == TEXT


CUT = {
    "gzip": ("gzip", gzip.compress(TEXT)),
    "the second member": ("gzip", gzip.compress(TEXT[:10]) + gzip.compress(TEXT[10:])),
    "raw deflate": ("deflate", raw_deflate(TEXT)),
}


@pytest.mark.parametrize("shape", list(CUT))
@given(sizes=chunks, data=st.data())
def test_an_answer_cut_short_is_never_taken_for_a_whole_one(
    shape: str, sizes: list[int], data: st.DataObject
) -> None:
    encoding, body = CUT[shape]
    first_member_ends = len(gzip.compress(TEXT[:10])) if shape == "the second member" else 0
    keep = data.draw(st.integers(min_value=first_member_ends + 1, max_value=len(body) - 1))
    with pytest.raises(ToolOutputInvalidError, match="cut short"):
        read(encoding, body[:keep], sizes)


def test_a_later_member_broken_once_it_began_is_invalid_not_ignored() -> None:
    """Bytes after a member that inflate to something are a member: its bad checksum is
    an error, not trailing bytes to drop (the answer would lose its end unseen)."""
    second = bytearray(gzip.compress(TEXT[100:]))
    second[-8] ^= 0xFF  # its CRC-32
    with pytest.raises(ToolOutputInvalidError, match="not valid gzip"):
        read("gzip", gzip.compress(TEXT[:100]) + bytes(second), [64])


@pytest.mark.parametrize("after", [b"\x1f\x00junk", b"\x1f\x8b\x00\x00junk", b"<html>"])
def test_bytes_after_a_member_that_never_begin_one_are_ignored(after: bytes) -> None:
    """As urllib3 reads them: a server's appended bytes, even ones that start as gzip does."""
    assert read("gzip", gzip.compress(TEXT) + after, [7]) == TEXT


def test_raw_deflate_that_starts_as_a_zlib_header_does_is_read_however_split() -> None:
    """Found by a review: a raw stream whose first two bytes pass as a zlib header was read
    raw only when it failed inside its first chunk; its first bytes are now kept until
    they inflate to something."""
    text = b'{"a": 1}'
    size = 0x1D  # 0x08 0x1d is a valid zlib header, and a stored block of this size here
    stored = b"\x08" + size.to_bytes(2, "little") + (size ^ 0xFFFF).to_bytes(2, "little")
    stored += b" " * (size - len(text)) + text
    body = stored + raw_deflate(b"")
    whole = b" " * (size - len(text)) + text
    for sizes in ([len(body)], [2], [3], [1, 2]):
        assert read("deflate", body, sizes) == whole, sizes


def test_a_stream_of_empty_members_ends_at_a_bound() -> None:
    """Found by a review: empty members inflate to nothing, so the cap never stopped them,
    and each costs an inflater; an answer may hold at most MAX_MEMBERS."""
    empty = gzip.compress(b"")
    with pytest.raises(ToolOutputInvalidError, match="gzip members"):
        read("gzip", empty * (MAX_MEMBERS + 1), [65536])
    assert read("gzip", empty * 10 + gzip.compress(TEXT), [65536]) == TEXT


def test_raw_bytes_past_the_cap_are_too_large_even_when_they_inflate_to_nothing() -> None:
    reader = _Body("gzip", 1000, "t")
    reader.take(gzip.compress(b"{}") + bytes(2000))
    assert reader.too_large
    identity = _Body("", 1000, "t")
    identity.take(b" " * 1000)
    assert not identity.too_large


def test_the_cap_holds_across_members() -> None:
    """Many small members of many spaces inflate no further than one byte past the cap."""
    member = gzip.compress(b" " * 100_000)
    reader = _Body("gzip", 250_000, "t")
    for _ in range(10):
        reader.take(member)
    assert len(reader.data) == 250_001
