"""Compressed inputs: read like zcat (several members/frames, zero padding), and damage is never
silent: InputError names the file and the byte offset after every byte before it was returned."""

from __future__ import annotations

import gzip

import pytest
import zstandard

from cachescope.errors import InputError
from cachescope.compressed import open_decompressed

DATA = b"".join(b"line %06d of a log with some text to compress\n" % i for i in range(60_000))


def _zstd(data: bytes, frames: int = 4) -> bytes:
    c = zstandard.ZstdCompressor(write_checksum=True)
    step = len(data) // frames + 1
    return b"".join(c.compress(data[i:i + step]) for i in range(0, len(data), step))


def _gzip(data: bytes, members: int = 3) -> bytes:
    step = len(data) // members + 1
    return b"".join(gzip.compress(data[i:i + step]) for i in range(0, len(data), step))


def _read(path) -> tuple[bytes, InputError | None]:
    out = []
    with open_decompressed(path) as stream:
        try:
            while block := stream.read1(1 << 16):
                out.append(block)
        except InputError as exc:
            return b"".join(out), exc
    return b"".join(out), None


@pytest.mark.parametrize("compress", [_zstd, _gzip, lambda d: d], ids=["zstd", "gzip", "plain"])
def test_whole_files_read_exactly(tmp_path, compress):
    path = tmp_path / "log"
    path.write_bytes(compress(DATA) + (b"\0" * 512 if compress is _gzip else b""))  # tape padding after gzip
    assert _read(path) == (DATA, None)


@pytest.mark.parametrize("compress, kind", [(_zstd, "zstd"), (_gzip, "gzip")])
def test_a_cut_anywhere_is_reported_with_the_offset_after_the_data_before_it(tmp_path, compress, kind):
    blob = compress(DATA)
    for cut in (len(blob) // 3, len(blob) // 2 + 7, len(blob) - 1):
        path = tmp_path / f"cut-{cut}"
        path.write_bytes(blob[:cut])
        data, error = _read(path)
        assert error is not None and f"truncated {kind}" in str(error) and error.offset == cut
        assert str(path) in str(error) and f"{cut:,}" in str(error)
        assert DATA.startswith(data) and len(data) > 0  # what came before the damage, nothing made up


@pytest.mark.parametrize("compress, kind", [(_zstd, "zstd"), (_gzip, "gzip")])
def test_corruption_is_reported_near_its_offset(tmp_path, compress, kind):
    blob = bytearray(compress(DATA))
    at = len(blob) // 2
    blob[at:at + 16] = b"\xa5" * 16
    path = tmp_path / "corrupt"
    path.write_bytes(bytes(blob))
    data, error = _read(path)
    assert error is not None and f"corrupt {kind}" in str(error)
    assert error.offset <= at + 16 + (1 << 17)  # at the damage, or at the end of its frame (checksum)
    assert len(data) < len(DATA)


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

BLOBS = {"zstd": _zstd(DATA[:200_000], frames=3), "gzip": _gzip(DATA[:200_000], members=2)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(BLOBS)), cut=st.floats(0.0, 1.0), flips=st.lists(st.integers(0, 10**9), max_size=3))
def test_any_damage_is_an_input_error_or_a_clean_read_never_a_crash(tmp_path, kind, cut, flips):
    blob = bytearray(BLOBS[kind][: max(8, int(len(BLOBS[kind]) * cut))])
    for f in flips:
        blob[4 + f % (len(blob) - 4)] ^= 0x5A  # past the magic: still read as compressed
    path = tmp_path / f"damaged-{kind}"
    path.write_bytes(bytes(blob))
    data, error = _read(path)
    if error is None:  # undamaged, cut between frames/members (a valid shorter file), or unseen damage
        assert DATA.startswith(data) or flips
        assert data == DATA[:200_000] or cut < 1.0 or flips
    else:
        assert str(path) in str(error) and 0 <= error.offset <= len(blob)
