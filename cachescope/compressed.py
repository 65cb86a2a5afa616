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

from cachescope.errors import InputError

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: compressed bytes fed to the decoder per step: bounds what a corrupt chunk can lose and what one
#: step can expand to
_CHUNK = 1 << 16
_SLICE = 4 << 10


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
            chunk = self.raw.read(_CHUNK)
            if not chunk:
                if self.fed and not self.decoder.eof:
                    raise InputError(self.source, self.offset,
                                     f"truncated {self.kind} data (the file ends inside a compressed block)")
                return 0
            at = self.offset
            self.offset += len(chunk)
            # in slices, so a corruption is located to within _SLICE bytes
            self.pending = b"".join(self._feed(chunk[i:i + _SLICE], at + i) for i in range(0, len(chunk), _SLICE))
        n = min(len(buffer), len(self.pending) - self.at)
        buffer[:n] = self.pending[self.at:self.at + n]
        self.at += n
        if self.at == len(self.pending):  # an index, not slicing: a big output is copied once
            self.pending, self.at = b"", 0
        return n

    def _feed(self, data: bytes, at: int) -> bytes:
        out = []
        while data:
            if self.decoder.eof:  # the next member/frame
                if not data.strip(b"\x00"):  # zero padding after the last member (tape, dd)
                    return b"".join(out)
                self.decoder = self._new_decoder()
                self.fed = False
            self.fed = True
            try:
                out.append(self.decoder.decompress(data))
            except Exception as exc:  # zlib.error, zstandard.ZstdError
                raise InputError(self.source, at, f"corrupt {self.kind} data ({exc}) in the {_SLICE:,} bytes "
                                                  "from") from None
            data = self.decoder.unused_data if self.decoder.eof else b""
        return b"".join(out)

    def close(self) -> None:
        try:
            self.raw.close()
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
