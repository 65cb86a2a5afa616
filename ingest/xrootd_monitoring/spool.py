"""The collector's durable spool: every datagram, raw, on disk before it is decoded.

The receiving process (recv_process) appends what it receives to the newest segment file of the
spool directory and fsyncs each batch before it tells the collector how far the spool reaches; the
collector decodes from the spool, never from memory. A datagram is therefore either in the spool
(and decoded after any crash) or it was never received (then the server's packet sequence shows
the gap, and it is counted as lost).

Layout: `DIR/<base>.seg`, `base` the spool position (bytes since the spool began) of the segment's
first record; positions only grow, so a position names one record boundary for the spool's
life. A record is {u32 payload length; u32 crc32 of the rest; i64 arrival time (UTC µs); u16
sender address length; address; payload}. A torn tail (power loss mid-write) fails its length or
CRC and is cut off when the spool is opened (`recover`).

Bounds: segments wholly before the position whose results are stored (or shipped) are removed;
beyond `max_bytes` or older than `max_age_s`, the oldest segments go even if not decoded yet
(the store or Kafka down too long): the reader counts the bytes it had to skip, and the servers'
packet sequences count the datagrams as lost.

Imports only the standard library: recv_process uses the writer.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections import deque
from pathlib import Path

HEAD = struct.Struct("<IIqH")  # payload length, crc32(arrival, address, payload), arrival µs, address length
SUFFIX = ".seg"
SEGMENT_BYTES = 16 << 20


def segments(directory: Path) -> list[tuple[int, Path]]:
    """(base position, file) of every segment, oldest first."""
    out = []
    for p in directory.iterdir():
        if p.suffix == SUFFIX and p.stem.isdigit():
            out.append((int(p.stem), p))
    out.sort()
    return out


def _crc(arrival: int, addr: bytes, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(addr, zlib.crc32(struct.pack("<q", arrival))))


def encode(arrival: int, addr: bytes, payload: bytes) -> bytes:
    return HEAD.pack(len(payload), _crc(arrival, addr, payload), arrival, len(addr)) + addr + payload


def _scan(data: bytes, check: bool = False):
    """(end, arrival, address, payload) of each whole record at the start of `data`; with `check`,
    up to the first whose CRC fails."""
    off = 0
    while off + HEAD.size <= len(data):
        plen, crc, arrival, alen = HEAD.unpack_from(data, off)
        end = off + HEAD.size + alen + plen
        if end > len(data):
            return
        addr, payload = data[off + HEAD.size:off + HEAD.size + alen], data[off + HEAD.size + alen:end]
        if check and _crc(arrival, addr, payload) != crc:
            return
        yield end, arrival, addr, payload
        off = end


def recover(directory: Path) -> int:
    """Open the spool at `directory` (created if missing): cut a torn or damaged tail off the
    newest segment; returns the spool's end position (where the next record goes)."""
    directory.mkdir(parents=True, exist_ok=True)
    segs = segments(directory)
    if not segs:
        return 0
    base, path = segs[-1]
    data = path.read_bytes()
    off = 0
    for off, *_ in _scan(data, check=True):
        pass
    if off < len(data):
        with open(path, "r+b") as f:
            f.truncate(off)
            os.fsync(f.fileno())
    return base + off


class SpoolWriter:
    """Appends batches of datagrams to the newest segment (a new one every `segment_bytes`),
    each batch fsynced before `append` returns the new end position."""

    def __init__(self, directory: Path, end: int, segment_bytes: int = SEGMENT_BYTES):
        self.dir = directory
        self.end = end
        self.segment_bytes = segment_bytes
        segs = segments(directory)
        if segs and segs[-1][0] + segs[-1][1].stat().st_size == end and end - segs[-1][0] < segment_bytes:
            self.base = segs[-1][0]
            self.fd = os.open(segs[-1][1], os.O_WRONLY | os.O_APPEND)
        else:
            self._new_segment()

    def _new_segment(self) -> None:
        self.base = self.end
        self.fd = os.open(self.dir / f"{self.end:020d}{SUFFIX}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)  # the new file's name survives a crash too
        finally:
            os.close(dfd)

    def append(self, records: bytes) -> int:
        """`records`: encoded records (`encode`), whole. Returns the end position, durable."""
        if self.end - self.base >= self.segment_bytes:
            os.close(self.fd)
            self._new_segment()
        view = memoryview(records)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        os.fdatasync(self.fd)
        self.end += len(records)
        return self.end

    def close(self) -> None:
        os.close(self.fd)


class SpoolReader:
    """Reads records from a position on, up to the end the writer announced."""

    def __init__(self, directory: Path, pos: int):
        self.dir = directory
        self.pos = pos
        self.skipped_bytes = 0  # removed (bounds) before they were decoded
        self._f = None
        self._base = 0

    def _open_at(self) -> bool:
        """Open the segment holding `pos` (or the first after it: what lay between was removed by
        the bounds, and is counted); False when none does yet."""
        self.close()
        for base, path in segments(self.dir):
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if base + size <= self.pos and base < self.pos:
                continue  # wholly before
            if base > self.pos:
                self.skipped_bytes += base - self.pos
                self.pos = base
            try:
                self._f = open(path, "rb")  # noqa: SIM115
            except FileNotFoundError:
                continue
            self._base = base
            return True
        return False

    def read(self, end: int, limit: int = 4 << 20) -> list[tuple[bytes, str, int, int]]:
        """Records from `pos` up to `end` (at most about `limit` bytes of them): (payload, sender
        address, arrival µs, position after the record)."""
        out: list[tuple[bytes, str, int, int]] = []
        reopened = False
        while self.pos < end and limit > 0:
            if self._f is None:
                if not self._open_at():
                    break
                reopened = True
            self._f.seek(self.pos - self._base)
            asked = min(limit, end - self.pos)
            data = self._f.read(asked)
            if not data:  # the end of this segment: the next one starts here
                if reopened:
                    break
                self.close()
                continue
            i = 0
            for i, arrival, addr, payload in _scan(data):
                out.append((payload, addr.decode(), arrival, self.pos + i))
            self.pos += i
            limit -= i
            if i == 0:
                if len(data) < asked:
                    break  # only a part of the next record is written yet
                limit = HEAD.size + (2 << 16)  # a record larger than the limit: read it whole
            reopened = False
        return out

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


class SpoolCursor:
    """The decoding side of a spool, for every source that spools (receiver.Receiver, bus.BusSource):
    one record at a time from `pos` (the position after the record given last) up to the end the
    writer announced."""

    def __init__(self, directory: Path, pos: int):
        self.dir = directory
        self.pos = pos
        self.arrival = 0  # of the record given last (UTC µs)
        self._reader: SpoolReader | None = None
        self._items: deque = deque()

    def next(self, end: int) -> tuple[bytes, str] | None:
        if not self._items:
            if self._reader is None or self._reader.pos != self.pos:  # a resume moved it
                if self._reader is not None:
                    self._reader.close()
                self._reader = SpoolReader(self.dir, self.pos)
            self._items.extend(self._reader.read(end))
            if not self._items:
                return None
        payload, addr, self.arrival, self.pos = self._items.popleft()
        return payload, addr

    def behind(self, end: int) -> bool:
        """True while records before `end` are still to be given."""
        return bool(self._items) or (self._reader.pos if self._reader is not None else self.pos) < end

    def skipped_bytes(self) -> int:
        """Removed by the bounds before they were decoded."""
        return self._reader.skipped_bytes if self._reader is not None else 0

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()


def tail(directory: Path, count: int, key) -> list:
    """`key(payload, sender)` of the last `count` records of the spool (fewer when it holds fewer),
    oldest first; one segment in memory at a time. Read once at a bus source's start (the messages
    spooled before a death may still be unacked)."""
    out: deque = deque()
    for base, path in reversed(segments(directory)):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        reader = SpoolReader(directory, base)
        records: list = []
        while reader.pos < base + size and (batch := reader.read(base + size)):
            records += [key(payload, addr) for payload, addr, _, _ in batch]
        reader.close()
        out.extendleft(reversed(records[-(count - len(out)):]))
        if len(out) >= count:
            break
    return list(out)


def prune(directory: Path, done: int, max_bytes: int, max_age_s: float, now: float | None = None) -> int:
    """Remove segments wholly before `done` (their results are stored), then the oldest beyond
    `max_bytes` or `max_age_s` (never the newest: it is being written). Returns the bytes removed
    that were not done."""
    now = time.time() if now is None else now
    segs = []
    for base, path in segments(directory):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        segs.append((base, path, st.st_size, st.st_mtime))
    lost = 0
    total = sum(s[2] for s in segs)
    for k, (base, path, size, mtime) in enumerate(segs[:-1]):
        nxt = segs[k + 1][0]
        if nxt <= done or total > max_bytes or now - mtime > max_age_s:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            total -= size
            if nxt > done:
                lost += nxt - max(base, done)
        else:
            break
    return lost


class Positions:
    """The spool's state files beside the segments: `NAME.state`, written atomically."""

    def __init__(self, directory: Path):
        self.dir = directory

    def write(self, name: str, data: bytes) -> None:
        tmp = self.dir / f".{name}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / f"{name}.state")
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def read(self, name: str) -> bytes | None:
        try:
            return (self.dir / f"{name}.state").read_bytes()
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.dir.glob("*.state"))

    def remove(self, name: str) -> None:
        try:
            (self.dir / f"{name}.state").unlink()
        except FileNotFoundError:
            pass
