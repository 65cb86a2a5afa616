"""Reading plain, gzip and zstd inputs (told by magic bytes, not by name) so that damage is never
silent: a corrupt or truncated compressed file raises InputError naming the file and the byte
offset, after every byte before the damage has been returned."""

from __future__ import annotations

import errno
import io
import os
import sys
from pathlib import Path
from typing import IO

from cachescope.errors import InputError, UserError

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: compressed bytes fed to the decoder per step: bounds what a corrupt chunk can lose and what one
#: step can expand to
_CHUNK = 1 << 16
_SLICE = 4 << 10
#: compressed bytes of zstd per decoder call (its blocks of zeros expand ~32,000 times)
_ZSTD_SLICE = 512
#: decompressed bytes one gzip step may give (a gzip of zeros expands 1,000 times)
_OUT = 1 << 20
#: the longest line a log reader accepts (as `simulate`'s CSV reader): a longer one is not a log
#: record, and reading it whole would take memory without bound (a gzip of zeros: 6 GB in 28 MB)
MAX_LINE_BYTES = 16 << 20


class _Decompressed(io.RawIOBase):
    """gzip or zstd members/frames one after another, like `zcat`, that raise InputError naming
    the file and the byte offset when the data is corrupt or ends inside a member/frame (the
    standard readers report a truncated zstd file as complete, a truncated gzip as EOFError)."""

    def __init__(self, raw: IO[bytes], kind: str, source: str):
        super().__init__()
        self.raw = raw
        self.kind = kind
        self.source = source
        self.offset = 0  # compressed bytes read from the file
        self.pending = b""
        self.at = 0  # bytes of `pending` already returned
        self.tail, self.tail_pos, self.tail_at = b"", 0, 0  # the compressed chunk in hand, where it starts
        # gzip caps each step's output itself (max_length); zstd cannot: smaller slices bound it
        self.slice = _SLICE if kind == "gzip" else _ZSTD_SLICE
        self.decoder = self._new_decoder()
        self.fed = False  # the current decoder has been given bytes (a member/frame is open)

    def _new_decoder(self):
        if self.kind == "gzip":
            import zlib

            return zlib.decompressobj(wbits=31)  # gzip header and trailer, CRC-32 checked
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        while not self.pending:
            if self.tail_pos >= len(self.tail):
                chunk = self.raw.read(_CHUNK)
                if not chunk:
                    if self.fed and not self.decoder.eof:
                        raise InputError(self.source, self.offset,
                                         f"truncated {self.kind} data (the file ends inside a compressed block)")
                    return 0
                self.tail, self.tail_pos, self.tail_at = chunk, 0, self.offset
                self.offset += len(chunk)
            # in slices, so a corruption is located to within a slice, and what one step expands
            # to stays small (zstd: 512 bytes of a bomb give up to 16 MiB); several slices make a
            # step's output, up to _CHUNK
            out, size = [], 0
            while self.tail_pos < len(self.tail) and size < _CHUNK:
                at = self.tail_at + self.tail_pos
                piece, used = self._feed(self.tail[self.tail_pos:self.tail_pos + self.slice], at)
                self.tail_pos += used
                if not used and not piece:  # never expected: a decoder that takes nothing
                    self.tail_pos = len(self.tail)
                if piece:
                    out.append(piece)
                    size += len(piece)
            self.pending = out[0] if len(out) == 1 else b"".join(out)
        n = min(len(buffer), len(self.pending) - self.at)
        buffer[:n] = self.pending[self.at:self.at + n]
        self.at += n
        if self.at == len(self.pending):  # an index, not slicing: a big output is copied once
            self.pending, self.at = b"", 0
        return n

    def _feed(self, data: bytes, at: int) -> tuple[bytes, int]:
        """(output, bytes of `data` used): one step of the decoder. gzip gives at most _OUT bytes a
        step (the rest of the input is fed again), so a bomb never expands in memory at once."""
        if self.decoder.eof:  # the next member/frame
            if not data.strip(b"\x00"):  # zero padding after the last member (tape, dd)
                return b"", len(data)
            self.decoder = self._new_decoder()
            self.fed = False
        self.fed = True
        decoder = self.decoder
        try:
            if self.kind == "gzip":
                out = decoder.decompress(data, _OUT)
                left = len(decoder.unconsumed_tail)
            else:
                out, left = decoder.decompress(data), 0
        except Exception as exc:  # zlib.error, zstandard.ZstdError
            raise InputError(self.source, at, f"corrupt {self.kind} data ({exc}) in the {self.slice:,} bytes "
                                              "from") from None
        if decoder.eof:
            left = len(decoder.unused_data)
        return out, len(data) - left

    def close(self) -> None:
        try:
            self.raw.close()
        finally:
            super().close()


class LineTooLong(InputError):
    """A line longer than the bound: reading stops there (the lines before it were returned)."""

    def __init__(self, source: str, offset: int, line: int, limit: int, compressed: bool):
        self.source, self.offset, self.problem = source, offset, "line too long"
        where = f"byte {offset:,} of the decompressed data" if compressed else f"byte {offset:,}"
        UserError.__init__(self, f"{source}: line {line:,} (from {where}) is longer than {limit >> 20} MiB: not a log "
                                 "record (a binary or damaged file?); the lines before it were read")


class _LineBound(io.BufferedIOBase):
    """The bytes of a stream, refusing a line longer than `limit`: raises LineTooLong once that
    many bytes follow the last newline, so a reader above never holds more than one bounded line
    (every whole line before it has been returned: they precede the block that raises). A
    buffered stream itself (read1 passes the inner stream's blocks on, no copy)."""

    def __init__(self, inner: IO[bytes], source: str, limit: int, compressed: bool):
        super().__init__()
        self.inner, self.source, self.limit, self.compressed = inner, source, limit, compressed
        self.offset = 0  # bytes returned
        self.line_start = 0  # offset of the current (unfinished) line
        self.lines = 0  # newlines returned

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:  # type: ignore[override]
        data = self.inner.read1(size if size > 0 else _CHUNK)  # type: ignore[attr-defined]
        n = len(data)
        if not n:
            return data
        first = data.find(b"\n")
        # the line running into this block ends in it (at `first`) or goes on past its end; the
        # lines that start in it are shorter than a block
        end = self.offset + (first if first >= 0 else n)
        if end - self.line_start > self.limit:
            raise LineTooLong(self.source, self.line_start, self.lines + 1, self.limit, self.compressed)
        if first >= 0:
            self.lines += data.count(b"\n")
            self.line_start = self.offset + data.rfind(b"\n") + 1
        self.offset += n
        return data

    def read(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        if size is not None and size >= 0:
            return self.read1(size)
        return b"".join(iter(self.read1, b""))

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            super().close()


def open_decompressed(source: str | Path) -> IO[bytes]:
    """Binary stream of a file or '-' (stdin), decompressed. Raises OSError when it cannot be opened."""
    name = "stdin" if str(source) == "-" else str(source)
    if str(source) == "-":
        raw: io.BufferedIOBase = sys.stdin.buffer  # type: ignore[assignment]
        if not hasattr(raw, "peek"):
            raw = io.BufferedReader(raw)  # type: ignore[arg-type]
    else:
        if os.path.isdir(source):
            raise IsADirectoryError(errno.EISDIR, "is a directory, not a log file", str(source))
        raw = open(source, "rb")  # noqa: SIM115 - returned to the caller
    head = raw.peek(4)[:4]  # type: ignore[attr-defined]
    stream: IO[bytes]
    if head[:2] == _GZIP_MAGIC:
        stream = io.BufferedReader(_Decompressed(raw, "gzip", name), _CHUNK)  # type: ignore[arg-type]
    elif head == _ZSTD_MAGIC:
        stream = io.BufferedReader(_Decompressed(raw, "zstd", name), _CHUNK)  # type: ignore[arg-type]
    else:
        stream = raw  # type: ignore[assignment]
    return stream


def open_bounded(source: str | Path, max_line: int = MAX_LINE_BYTES) -> IO[bytes]:
    """`open_decompressed`, refusing a line longer than max_line bytes (LineTooLong, an InputError
    naming the file, the line and its byte offset)."""
    stream = open_decompressed(source)
    name = "stdin" if str(source) == "-" else str(source)
    compressed = isinstance(stream, io.BufferedReader) and isinstance(stream.raw, _Decompressed)
    return _LineBound(stream, name, max_line, compressed)
