"""Datagrams of every server -> AccessEvents: one stream state per server, gaps counted, never guessed.

A server's stream is (sender address, start time `stod`): a restart is a new stream, with its own
origin `xrootd:<server id>:<stod>` (the 48-bit server id of its g/f-stream packets) and its own seq
from 0 in the order its accesses complete. Event times come from the records (g-stream attach
time; for the f-stream, the time record `tBeg` before the open), never from the arrival time, so
the same datagrams sent again give the same events.

Packet sequences: each stream kind has its own u8 counter (g, f, and one shared by the detailed
monitor's u/d/t/i/... maps), so a missing datagram shows as a jump; jumps are counted per server
and kind (`lost`), a repeated number as a duplicate (dropped). What a lost datagram held is not
guessed at: a lost g-stream datagram's accesses are missing, a lost f/t datagram leaves its files'
accesses incomplete (dropped at the end, counted as `incomplete`).

Cache or storage element: the g-stream wins (see the package docstring). A server's f-stream
accesses wait `HOLD_SECONDS` of its own f-stream time before they are written, so that a cache's
first g-stream datagram (flushed every `mongstream ... flush`, 60 s at most in practice) marks it a
cache before any of its f-stream accesses go out; at the end (idle, signal) they are written
unless the server turned out to be a cache.
"""

from __future__ import annotations

import socket
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import orjson

from cachescope.config import CachescopeConfig
from cachescope.events import AccessEvent
from cachescope.tiers import TierClassifier
from ingest.enrich import Enricher
from ingest.formats._base import Access, BadRecord
from ingest.pipeline import LineParser, RejectRecord
from ingest.xrootd_monitoring import fstream, gstream, ident, maps, tstream
from ingest.xrootd_monitoring.header import BadDatagram, binary_header, seq_kind

GSTREAM_FORMAT = "xrootd-gstream"
FSTREAM_SOURCE = "xrootd-fstream"
#: seconds of a server's f-stream time its f-stream accesses wait for a g-stream that would make
#: it a cache (2 x the longest g-stream flush seen in practice, ATLAS's 60 s)
HOLD_SECONDS = 120
_MAP_LIMIT = 200_000  # entries of a server's user/path/file maps before the oldest half goes


def server_name(ip: str) -> str:
    """The host name of a sender address (reverse DNS), else the address."""
    try:
        return socket.getnameinfo((ip, 0), socket.NI_NAMEREQD)[0]
    except OSError:
        return ip


def _bounded(d: dict) -> None:
    if len(d) > _MAP_LIMIT:
        for k in list(d)[: len(d) // 2]:
            del d[k]


@dataclass(slots=True)
class OpenFile:
    ts: int  # open time, UTC microseconds
    path: str
    size: int
    client: str
    read: int = 0  # f-stream close: read + readv bytes
    write: int = 0
    closed_at: int = 0  # f-stream time (s) of the close, 0: open


@dataclass(slots=True)
class TraceFile:
    read: int = 0
    size: int = 0
    closed: bool = False


@dataclass
class Stream:
    """What the collector knows of one server run (sender address, stod)."""

    ip: str
    stod: int
    name: str
    sid: int | None = None
    is_cache: bool = False
    has_trace: bool = False
    numbered: bool = False  # seq taken from `Assembler.seq_of` (a restarted collector continues it)
    seq: int = 0
    last_pseq: dict[str, int] = field(default_factory=dict)
    lost: Counter = field(default_factory=Counter)  # datagrams missing, by stream kind
    datagrams: Counter = field(default_factory=Counter)  # by code
    ident: ident.Ident | None = None
    users: dict[int, str] = field(default_factory=dict)  # user dictid -> client host
    paths: dict[int, str] = field(default_factory=dict)  # file dictid -> path (`d` map)
    files: dict[int, OpenFile] = field(default_factory=dict)  # f-stream open files by dictid
    traces: dict[int, TraceFile] = field(default_factory=dict)  # trace reads by file dictid
    held: list[tuple[int, Access]] = field(default_factory=list)  # (f-stream time of close, access)
    ftime: int = 0  # tBeg of the current f-stream packet
    gparser: LineParser | None = None
    fenrich: Enricher | None = None

    @property
    def origin(self) -> str:
        return f"xrootd:{self.sid if self.sid is not None else self.ip}:{self.stod}"


@dataclass
class CollectStats:
    datagrams: int = 0
    bytes: int = 0
    dropped: Counter = field(default_factory=Counter)  # undecodable datagrams by kind
    duplicates: int = 0
    lost: int = 0  # datagrams missing from packet sequences
    events: int = 0
    rejected: int = 0
    skipped: int = 0
    superseded: int = 0  # f-stream opens of caches (their g-stream has their accesses)
    incomplete: int = 0  # f-stream opens without close at the end
    reasons: Counter = field(default_factory=Counter)

    def as_dict(self, streams: dict | None = None) -> dict:
        out = {"datagrams": self.datagrams, "bytes": self.bytes, "events": self.events,
               "lost_datagrams": self.lost, "duplicate_datagrams": self.duplicates,
               "dropped_datagrams": dict(self.dropped), "rejected": self.rejected, "skipped": self.skipped,
               "fstream_superseded": self.superseded, "fstream_incomplete": self.incomplete,
               "reasons": dict(self.reasons.most_common(50))}
        if streams is not None:
            out["servers"] = [{"origin": s.origin, "server": s.name, "address": s.ip, "stod": s.stod,
                               "cache": s.is_cache, "datagrams": dict(s.datagrams), "lost": dict(s.lost)}
                              for s in streams.values()]
        return out

    def health_metrics(self) -> dict[str, int]:
        """pipeline_health metrics (component `collect`)."""
        m = {"datagrams": self.datagrams, "events": self.events, "lost_datagrams": self.lost,
             "duplicate_datagrams": self.duplicates, "rejected": self.rejected, "skipped": self.skipped,
             "dropped_datagrams": sum(self.dropped.values())}
        for kind, n in self.dropped.items():
            m[f"dropped_datagrams:{kind}"] = n
        return m


RejectSink = Callable[[dict], None]


class Assembler:
    """Feed it datagrams in arrival order; it returns the AccessEvents they complete."""

    def __init__(self, config: CachescopeConfig, *, site: str = "", on_reject: RejectSink | None = None,
                 hold_seconds: int = HOLD_SECONDS, name_of: Callable[[str], str] = server_name,
                 seq_of: Callable[[str], int] = lambda origin: 0):
        self.config = config
        self.site = site
        self.classifier = TierClassifier.load(config.tiers.rules_files)
        self.on_reject = on_reject or (lambda rec: None)
        self.hold = hold_seconds
        self.name_of = name_of
        self.seq_of = seq_of
        self._names: dict[str, str] = {}
        self.streams: dict[tuple[str, int], Stream] = {}
        self.stats = CollectStats()

    # ------------------------------------------------------------------ datagrams

    def feed(self, data: bytes, ip: str) -> list[AccessEvent]:
        st = self.stats
        st.datagrams += 1
        st.bytes += len(data)
        try:
            return self._datagram(data, ip)
        except BadDatagram as exc:
            self._drop(exc.kind, exc.reason, data, ip)
        except (ValueError, IndexError, UnicodeError, OverflowError) as exc:  # struct.error is a ValueError
            self._drop("garbage", f"{type(exc).__name__}: {exc}", data, ip)
        return []

    def _drop(self, kind: str, reason: str, data: bytes, ip: str) -> None:
        self.stats.dropped[kind] += 1
        self.on_reject({"datagram": self.stats.datagrams, "from": ip, "reason": f"{kind} datagram: {reason}",
                        "text": data[:32].hex(), "skipped": False})

    def _stream(self, ip: str, stod: int) -> Stream:
        s = self.streams.get((ip, stod))
        if s is None:
            name = self._names.get(ip)
            if name is None:
                name = self._names[ip] = self.name_of(ip)
            s = self.streams[(ip, stod)] = Stream(ip, stod, name)
        return s

    def _sequence(self, s: Stream, kind: str | None, pseq: int) -> bool:
        """Count a jump in the kind's packet sequence; False for a duplicate (drop it)."""
        if kind is None:
            return True
        last = s.last_pseq.get(kind)
        s.last_pseq[kind] = pseq
        if last is None:
            return True
        if pseq == last:
            self.stats.duplicates += 1
            return False
        gap = (pseq - last - 1) & 0xFF
        if gap:
            s.lost[kind] += gap
            self.stats.lost += gap
        return True

    def _datagram(self, data: bytes, ip: str) -> list[AccessEvent]:
        if not data:
            raise BadDatagram("truncated", "empty datagram")
        if data[:1] == b"{":
            return self._text(data, ip)
        head = binary_header(data)
        s = self._stream(ip, head.stod)
        if not self._sequence(s, seq_kind(head.code), head.pseq):
            return []
        s.datagrams[head.code] += 1
        code = head.code
        if code == "g":
            return self._gpacket(s, gstream.binary(data, head))
        if code == "f":
            return self._fpacket(s, fstream.decode(data, head))
        if code == "t":
            return self._trace(s, tstream.decode(data, head))
        if code in "ud=":
            rec = maps.decode(data, head)
            if code == "u":
                s.users[rec.dictid] = maps.client_host(rec.who)
                _bounded(s.users)
            elif code == "d":
                s.paths[rec.dictid] = rec.info
                _bounded(s.paths)
            else:
                s.ident = ident.binary(rec.who, rec.info)
                if s.sid is None and s.ident.sid is not None:
                    s.sid = s.ident.sid
        elif code not in "iprx":
            raise BadDatagram("garbage", f"unknown stream code {code!r}")
        return []

    def _text(self, data: bytes, ip: str) -> list[AccessEvent]:
        lines = data.split(b"\0", 1)[0].decode("utf-8", "replace").split("\n")
        head = gstream.json_header(lines[0])
        code = head["code"]
        if code == "=":
            stod = head.get("stod")
            if type(stod) is not int:
                raise BadDatagram("garbage", "JSON ident without an integer stod")
            s = self._stream(ip, stod)
            s.datagrams["="] += 1
            s.ident = ident.from_json(head)
            if s.sid is None and s.ident.sid is not None:
                s.sid = s.ident.sid
            return []
        if code != "g":
            raise BadDatagram("garbage", f"JSON datagram of code {code[:8]!r}")
        packet = gstream.text(head, lines[1:])
        s = self._stream(ip, packet.stod)
        if not self._sequence(s, "g", packet.pseq):
            return []
        s.datagrams["g"] += 1
        return self._gpacket(s, packet, lines[0])

    # ------------------------------------------------------------------ g-stream

    def _gpacket(self, s: Stream, p: gstream.GPacket, header_line: str | None = None) -> list[AccessEvent]:
        if p.provider != "C":
            return []  # other providers (ccm, tcpmon, tpc) give no file accesses
        if s.sid is None and p.sid:
            s.sid = p.sid
        if not s.is_cache:
            s.is_cache = True
            self.stats.superseded += len(s.held) + len(s.files)
            s.held.clear()
            s.files.clear()
            s.traces.clear()
        if header_line is None:  # the binary header as XRootD's JSON form states it, naming the server
            header_line = orjson.dumps({"code": "g", "pseq": p.pseq, "stod": p.stod, "sid": p.sid,
                                        "src": {"site": "", "host": s.name},
                                        "gs": {"type": p.provider, "tbeg": p.tbeg, "tend": p.tend}}).decode()
        if not s.numbered:
            s.seq, s.numbered = self.seq_of(s.origin), True
        parser = s.gparser
        if parser is None:
            parser = s.gparser = LineParser(GSTREAM_FORMAT, config=self.config, site=self.site, origin=s.origin,
                                            seq_start=s.seq, classifier=self.classifier, record_skipped=False,
                                            on_reject=lambda rec, origin=s.origin: self._parse_reject(origin, rec))
        parser.enrich.seq = s.seq
        before_rejected, before_skipped = parser.stats.rejected, parser.stats.skipped
        events: list[AccessEvent] = []
        for batch in parser.batches([header_line, *p.lines]):
            events.extend(batch)
        s.seq = parser.enrich.seq
        st = self.stats
        st.events += len(events)
        st.rejected += parser.stats.rejected - before_rejected
        st.skipped += parser.stats.skipped - before_skipped
        return events

    def _parse_reject(self, origin: str, rec: RejectRecord) -> None:
        self.stats.reasons[rec.reason.split(":", 1)[0][:60]] += 1
        self.on_reject({"origin": origin, "line": rec.line, "reason": rec.reason, "text": rec.text,
                        "skipped": rec.skipped})

    # ------------------------------------------------------------------ f-stream and trace

    def _fpacket(self, s: Stream, records: list[fstream.FRecord]) -> list[AccessEvent]:
        out: list[AccessEvent] = []
        for r in records:
            if r.kind == fstream.TIME:
                s.ftime = r.tbeg
                if r.sid and s.sid is None:
                    s.sid = r.sid
                continue
            if s.is_cache:
                self.stats.superseded += r.kind == fstream.OPEN
                continue
            if r.kind == fstream.OPEN:
                path = r.lfn or s.paths.pop(r.id, "")
                s.files[r.id] = OpenFile(s.ftime * 1_000_000, path, r.size, s.users.get(r.user, ""))
                _bounded(s.files)
            elif r.kind == fstream.CLOSE:
                f = s.files.get(r.id)
                if f is None:
                    self.stats.incomplete += 1  # its open was in a lost datagram (or before we started)
                    continue
                f.read, f.write, f.closed_at = r.read, r.write, s.ftime or 1
                self._complete(s, r.id, f)
            elif r.kind == fstream.DISC:
                s.users.pop(r.id, None)
        if not s.is_cache:
            out += self._release(s, final=False)
        return out

    def _trace(self, s: Stream, t: tstream.Trace) -> list[AccessEvent]:
        if s.is_cache:
            return []
        s.has_trace = True
        traces = s.traces
        for dictid, size in t.opens.items():
            traces.setdefault(dictid, TraceFile()).size = size
        for dictid, n in t.read_bytes.items():
            tf = traces.get(dictid)
            if tf is None:
                tf = traces[dictid] = TraceFile()
            tf.read += n
        _bounded(traces)
        for dictid in t.closes:
            traces.setdefault(dictid, TraceFile()).closed = True
            f = s.files.get(dictid)
            if f is not None and f.closed_at:
                self._complete(s, dictid, f)
        return self._release(s, final=False)

    def _complete(self, s: Stream, dictid: int, f: OpenFile, final: bool = False) -> None:
        """An f-stream access whose close is in: held once its trace (if the server sends one) is in."""
        tf = s.traces.get(dictid)
        if not final and s.has_trace and (tf is None or not tf.closed) and s.ftime - f.closed_at < self.hold:
            return  # the trace's reads of this file may still come
        del s.files[dictid]
        if tf is not None:
            del s.traces[dictid]
        nread = max(f.read, tf.read if tf is not None else 0)
        size = f.size or (tf.size if tf is not None else 0)
        if nread == 0 and f.write == 0:
            self.stats.skipped += 1
            self.stats.reasons["f-stream access that read 0 bytes"] += 1
            return
        if not f.path:
            self.stats.rejected += 1
            self._parse_reject(s.origin, RejectRecord(0, "f-stream open without a path (its `d` map record was "
                                                      "lost, or `lfn`/`files` is not configured)", "", False))
            return
        op, nbytes = ("read", nread) if nread or not f.write else ("write", f.write)
        s.held.append((f.closed_at, Access(f.ts, f.path, size, nbytes, op, s.name, f.client)))

    def _release(self, s: Stream, final: bool) -> list[AccessEvent]:
        if final:
            for dictid, f in list(s.files.items()):
                if f.closed_at:
                    self._complete(s, dictid, f, final=True)
                else:
                    self.stats.incomplete += 1
            s.files.clear()
        if not s.held:
            return []
        if final:
            ready, s.held = s.held, []
        else:
            cut = s.ftime - self.hold
            ready = [h for h in s.held if h[0] <= cut]
            if not ready:
                return []
            s.held = [h for h in s.held if h[0] > cut]
        if not s.numbered:
            s.seq, s.numbered = self.seq_of(s.origin), True
        enrich = s.fenrich
        if enrich is None:
            enrich = s.fenrich = Enricher(FSTREAM_SOURCE, config=self.config, classifier=self.classifier,
                                          site=self.site, site_override=bool(self.site), origin=s.origin)
        enrich.origin = s.origin
        enrich.seq = s.seq
        out = []
        for _, a in ready:
            try:
                out.append(enrich(a))
            except BadRecord as exc:
                self.stats.rejected += 1
                self._parse_reject(s.origin, RejectRecord(0, exc.reason, a.path, False))
        s.seq = enrich.seq
        self.stats.events += len(out)
        return out

    def finish(self) -> list[AccessEvent]:
        """Everything still held (the end of a run: idle, a signal): f-stream accesses of servers
        that are no caches."""
        out: list[AccessEvent] = []
        for s in self.streams.values():
            if not s.is_cache:
                out += self._release(s, final=True)
        return out
