"""The file shipper's block reader: the same lines, numbers and byte offsets as reading the file
line by line, whatever the block size, and batches as large as asked for."""

from __future__ import annotations

import random

import pytest

from ingest.shipper import FileFollower, Position, prefix_lines


def _log(path, rng: random.Random) -> bytes:
    parts = []
    for i in range(3000):
        kind = rng.randrange(6)
        if kind == 0:
            parts.append(b"")  # a blank line
        elif kind == 1:
            parts.append(b"\xe9t\xc3\xa9 \xff bad utf-8 " + str(i).encode())  # undecodable bytes
        elif kind == 2:
            parts.append(b"crlf line %d\r" % i)
        elif kind == 3:
            parts.append(b"x" * rng.randrange(1, 3000))  # longer than a small block
        else:
            parts.append(b"01.01 00:00:%02d line %d \xe2\x82\xac" % (i % 60, i))
    data = b"\n".join(parts) + b"\n"
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("block", [64, 1000, 1 << 16])
@pytest.mark.parametrize("batch", [1, 7, 500, 100_000])
def test_blocks_give_the_lines_offsets_and_batches_of_readline(tmp_path, monkeypatch, block, batch):
    f = tmp_path / "x.log"
    data = _log(f, random.Random(block * 31 + batch))
    expected = [line.decode("utf-8", "replace") for line in data.split(b"\n")[:-1]]
    monkeypatch.setattr(FileFollower, "BLOCK", block)
    fol = FileFollower(f, Position())
    got: list[str] = []
    while True:
        chunk = fol.read_lines(batch)
        if not chunk:
            break
        assert len(chunk) == batch or len(got) + len(chunk) == len(expected)  # full batches until the end
        got += chunk
        # the position is exactly after the lines handed out: a restart resumes at the next one
        assert fol.pos.line == len(got)
        assert fol.pos.offset == sum(len(line) + 1 for line in data.split(b"\n")[:len(got)])
    fol.close()
    assert got == expected
    assert list(prefix_lines(str(f), len(data), block=block)) == expected


def test_a_partial_last_line_waits_for_its_newline(tmp_path, monkeypatch):
    monkeypatch.setattr(FileFollower, "BLOCK", 4)
    f = tmp_path / "x.log"
    f.write_bytes(b"one\ntwo-long\nthr")
    fol = FileFollower(f, Position())
    assert fol.read_lines(10) == ["one", "two-long"]
    assert fol.read_lines(10) == []
    with f.open("ab") as h:
        h.write(b"ee\n")
    assert fol.read_lines(10) == ["three"]
    assert (fol.pos.line, fol.pos.offset) == (3, 19)
    fol.close()
