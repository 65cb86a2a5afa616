"""Datagrams of every server -> AccessEvents: one stream state per server, gaps counted, never guessed.

Senders: only the allowed addresses count (`senders.Senders`; the command line always names
them); the others are counted and dropped before anything is decoded.

A server's stream is (sender address, start time `stod`): a restart is a new stream, with its own
origin `xrootd:<sender address>/<server id>:<stod>` (the 48-bit server id of its g/f-stream
packets) and its own seq from 0 in the order its accesses complete; the origin is fixed when its
first access is numbered. Two senders never share an identity: a server id and start time first
seen from one address and then from another is a conflict, counted, and the second sender's
datagrams are dropped, never merged. Event times come from the records (g-stream attach time; for
the f-stream, the time record `tBeg` before the open), never from the arrival time, so the same
datagrams sent again give the same events.

Packet order (`order.Window`): each stream kind has its own u8 counter (g, f, and one shared by
the detailed monitor's u/d/t/i/... maps); a datagram seen before (same bytes under the same
number) is a counted duplicate, also when it comes late; a datagram arriving within the reorder
window (`collect.reorder_datagrams`, `collect.reorder_seconds`) takes its place in order; a gap
still open when the window passes counts as lost (per server and kind). What a lost datagram held
is not guessed at: a lost g-stream datagram's accesses are missing, a lost f/t datagram leaves its
files' accesses incomplete (dropped at the end, counted as `incomplete`); a cache's lost g-stream
record is replaced by the f-stream's opens it covered, when they came.

Bounded state whatever arrives: at most `collect.max_streams` streams are tracked (a new one past
that closes the one idle longest), a stream silent for `collect.stream_idle_seconds` is closed, the
records held for matching count against `collect.max_held_records` (past it the streams idle
longest are closed), datagrams in the windows against `collect.reorder_max_bytes`, and a g-stream
record dated more than `collect.max_ahead_seconds` past its packet is a reject, never held. A
closed stream's held accesses are written first; its next datagram opens it again, numbering on
where it stopped.

Cache or storage element: the g-stream wins (see the package docstring). A server's f-stream
accesses wait `HOLD_SECONDS` of its own f-stream time before they are written, so that a cache's
first g-stream datagram (flushed every `mongstream ... flush`, 60 s at most in practice) marks it a
cache before any of its f-stream accesses go out; at the end (idle, signal) they are written
unless the server turned out to be a cache.

A cache's f-stream still counts: its g-stream records wait (in order) until the f-stream is past
their detach, and a record whose attach..detach covers k > 1 f-stream opens of its file (a re-open
during XRootD's 30 s deferred detach joins the record) is k accesses; opens no record took are
accesses of their own when a g-stream datagram was lost over their time (`_resolve`).
"""

from __future__ import annotations

import pickle
import socket
import struct
import time
from collections import Counter, OrderedDict, deque
from itertools import combinations
from dataclasses import MISSING, dataclass, field, fields
from typing import Callable

import msgspec
import orjson

from cachescope.config import CachescopeConfig
from cachescope.config.collect import CollectConfig
from cachescope.events import AccessEvent
from cachescope.tiers import TierClassifier
from ingest.enrich import Enricher, clamp_observed
from ingest.formats._base import Access, BadRecord
from ingest.pipeline import LineParser, RejectRecord
from ingest.xrootd_monitoring import fstream, gstream, ident, maps, order, tstream
from ingest.xrootd_monitoring.header import BadDatagram, Header, binary_header, seq_kind
from ingest.xrootd_monitoring.senders import Senders, parse_allow

GSTREAM_FORMAT = "xrootd-gstream"
FSTREAM_SOURCE = "xrootd-fstream"
#: seconds of a server's f-stream time its f-stream accesses wait for a g-stream that would make
#: it a cache (2 x the longest g-stream flush seen in practice, ATLAS's 60 s)
HOLD_SECONDS = 120
#: seconds XRootD defers a detach while XrdPfc still writes the file (an open meanwhile joins its record)
DEFERRAL = 30
_MAP_LIMIT = 200_000  # entries of a server's user/path/file maps before the oldest half goes
#: closed streams whose next seq is remembered (should they send again); the oldest are forgotten
_RETIRED = 100_000
_SID_MASK = (1 << 48) - 1
_TOD = struct.Struct(">bbhIiiq")  # an f-stream datagram's first record: its time record


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
    open_end: int = 0  # tEnd of the open's f-stream packet (s): the open happened in ts..open_end
    close_end: int = 0  # tEnd of the close's packet: the close happened in closed_at..close_end


def _fstream_duration(f: OpenFile) -> int | None:
    """Open..close from the f-stream (µs), where its packets pin it down. Its records carry no
    times of their own, only their packet's tBeg..tEnd (a flush window, ~10 s), so the access
    lasted between closed_at - open_end and close_end - ts: the middle of that, when the two
    are within 20 % of each other (an access of minutes); else None (not known: a short access's
    window-sized guess would overstate its fetch times many times over)."""
    open_end, close_end = getattr(f, "open_end", 0), getattr(f, "close_end", 0)  # a checkpoint's may lack them
    if not open_end or not close_end:
        return None
    t_open = f.ts // 1_000_000
    lower, upper = max(0, f.closed_at - open_end), close_end - t_open
    if upper <= 0 or lower < 0.8 * upper:
        return None
    return (lower + upper) * 500_000


@dataclass(slots=True)
class CacheOpen:
    """An f-stream open of a server that may be a cache: matched to the g-stream record it joined."""

    tb: int  # the open's f-stream packet: tBeg..tEnd (s)
    te: int
    path: str
    size: int
    client: str
    read: int = 0  # f-stream close: read + readv
    traced: int = 0  # trace read bytes of this open
    closed: int = 0  # tEnd of the close's f-stream packet, 0: open
    tclosed: bool = False  # the trace's close of it is in
    claimed: bool = False
    opened_n: int = 0  # its open's place in the f-stream (the stream's records in order)
    closed_n: int = 0  # its close's, 0: open
    ranges: list[tuple[int, int]] | None = None  # (offset, length) of its trace reads, coalesced, bounded
    first: tuple[int, int] | None = None  # (offset, length) of its first trace read

    @property
    def nbytes(self) -> int:
        return max(self.read, self.traced)


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
    fixed_origin: str = ""  # the origin, once its first access is numbered
    last_arrival: float = 0.0
    heard: int = 0  # datagrams since the stream cap last looked at it
    size: int = 0  # records held (counted against collect.max_held_records)
    claims: set[tuple[int, int]] = field(default_factory=set)  # (server id, stod) this sender owns
    window: order.Window = field(default_factory=order.Window)
    lost: Counter = field(default_factory=Counter)  # datagrams missing, by stream kind
    datagrams: Counter = field(default_factory=Counter)  # by code
    ident: ident.Ident | None = None
    users: dict[int, str] = field(default_factory=dict)  # user dictid -> client host
    paths: dict[int, str] = field(default_factory=dict)  # file dictid -> path (`d` map)
    files: dict[int, OpenFile] = field(default_factory=dict)  # f-stream open files by dictid
    traces: dict[int, TraceFile] = field(default_factory=dict)  # trace reads by file dictid
    held: list[tuple[int, Access]] = field(default_factory=list)  # (f-stream time of close, access)
    ftime: int = 0  # tBeg of the current f-stream packet
    ftend: int = 0  # its tEnd
    has_fstream: bool = False
    copens: dict[int, CacheOpen] = field(default_factory=dict)  # f-stream opens by file dictid (cache matching)
    fseq: int = 0  # f-stream opens and closes so far (their order)
    known: OrderedDict = field(default_factory=OrderedDict)  # path -> bitmap of blocks known on disk (verdicts)
    known_bytes: int = 0  # the bitmaps' size
    bypath: dict[str, list[CacheOpen]] = field(default_factory=dict)  # the same, by path
    closing: deque[tuple[int, CacheOpen]] = field(default_factory=deque)  # (dictid, open) in close order
    waiting: list[tuple[int, CacheOpen]] = field(default_factory=list)  # decided once a held record went out
    heldpaths: dict[str, list[int]] = field(default_factory=dict)  # path -> attach of its held records
    gheld: list[tuple[str, str, int, int]] = field(default_factory=list)  # (line, lfn, attach, detach)
    gtime: int = 0  # tBeg of the latest g-stream packet
    ggaps: list[tuple[int, int]] = field(default_factory=list)  # (tEnd before, tBeg after) of lost g datagrams
    glast: tuple[int, int] = (0, 0)  # (tBeg, tEnd) of the latest g-stream packet
    ttime: int = 0  # start of the latest trace window
    gap_pending: bool = False  # g-stream datagrams lost before the next one
    gparser: LineParser | None = None
    fenrich: Enricher | None = None

    @property
    def origin(self) -> str:
        if self.fixed_origin:
            return self.fixed_origin
        addr = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"xrootd:{addr}/{self.sid if self.sid is not None else 0}:{self.stod}"

    def __getstate__(self) -> dict:
        # the parser and enricher are made again on first use (their seq is the stream's)
        return {**self.__dict__, "gparser": None, "fenrich": None}

    def __setstate__(self, state: dict) -> None:
        # a field added since the checkpoint was written starts at its default
        for f in fields(self):
            if f.name not in state:
                state[f.name] = f.default_factory() if f.default_factory is not MISSING else f.default
        self.__dict__.update(state)

    def held_records(self) -> int:
        return (len(self.users) + len(self.paths) + len(self.files) + len(self.traces) + len(self.held)
                + len(self.copens) + len(self.gheld) + len(self.closing) + len(self.waiting) + len(self.ggaps)
                + len(self.window))


@dataclass
class CollectStats:
    datagrams: int = 0
    bytes: int = 0
    dropped: Counter = field(default_factory=Counter)  # undecodable datagrams by kind
    duplicates: int = 0
    reordered: int = 0  # datagrams that came after a later one of their kind and took their place
    late: int = 0  # datagrams behind what had gone out (their gap counted as lost): dropped
    reused: int = 0  # a number waiting in the window came again with other bytes: dropped
    conflicts: int = 0  # a server id and start time seen from a second sender: dropped
    refused: int = 0  # datagrams of senders not allowed: dropped
    refused_by: Counter = field(default_factory=Counter)  # the same, by sender address
    streams_closed: Counter = field(default_factory=Counter)  # by why: idle, cap, budget
    lost: int = 0  # datagrams missing from packet sequences
    closed_lost: Counter = field(default_factory=Counter)  # (server, kind) -> lost, of streams closed since
    events: int = 0
    rejected: int = 0
    skipped: int = 0
    superseded: int = 0  # f-stream opens of caches (their g-stream has their accesses)
    incomplete: int = 0  # f-stream opens without close at the end
    delayed_hits: int = 0  # a cache's opens that fetched nothing but found blocks still on their way
    shared_verdicts: int = 0  # opens of records covering several whose verdict the streams cannot tell apart
    reasons: Counter = field(default_factory=Counter)

    def as_dict(self, streams: dict | None = None) -> dict:
        out = {"datagrams": self.datagrams, "bytes": self.bytes, "events": self.events,
               "lost_datagrams": self.lost, "duplicate_datagrams": self.duplicates,
               "reordered_datagrams": self.reordered, "late_datagrams": self.late,
               "reused_sequence_datagrams": self.reused, "conflict_datagrams": self.conflicts,
               "refused_datagrams": self.refused, "refused_senders": dict(self.refused_by.most_common(20)),
               "streams_closed": sum(self.streams_closed.values()), "streams_closed_by": dict(self.streams_closed),
               "dropped_datagrams": dict(self.dropped), "rejected": self.rejected, "skipped": self.skipped,
               "fstream_superseded": self.superseded, "fstream_incomplete": self.incomplete,
               "observed_delayed_hits": self.delayed_hits, "shared_verdicts": self.shared_verdicts,
               "reasons": dict(self.reasons.most_common(50))}
        if streams is not None:
            out["servers"] = [{"origin": s.origin, "server": s.name, "address": s.ip, "stod": s.stod,
                               "cache": s.is_cache, "datagrams": dict(s.datagrams), "lost": dict(s.lost),
                               "xrootd_version": ident.xrootd_version(s.ident)}
                              for s in streams.values()]
        return out

    def health_metrics(self) -> dict[str, int]:
        """pipeline_health metrics (component `collect`)."""
        m = {"datagrams": self.datagrams, "events": self.events, "lost_datagrams": self.lost,
             "duplicate_datagrams": self.duplicates, "reordered_datagrams": self.reordered,
             "late_datagrams": self.late, "reused_sequence_datagrams": self.reused,
             "conflict_datagrams": self.conflicts, "refused_datagrams": self.refused,
             "streams_closed": sum(self.streams_closed.values()), "rejected": self.rejected,
             "skipped": self.skipped, "dropped_datagrams": sum(self.dropped.values())}
        for kind, n in self.dropped.items():
            m[f"dropped_datagrams:{kind}"] = n
        for why, n in self.streams_closed.items():
            m[f"streams_closed:{why}"] = n
        return m


RejectSink = Callable[[dict], None]


class Assembler:
    """Feed it datagrams in arrival order (with their arrival time); it returns the AccessEvents
    they complete. `tick()` when nothing arrives lets the reorder window and idle streams pass."""

    def __init__(self, config: CachescopeConfig, *, site: str = "", on_reject: RejectSink | None = None,
                 hold_seconds: int = HOLD_SECONDS, name_of: Callable[[str], str] = server_name,
                 seq_of: Callable[[str], int] = lambda origin: 0, senders: Senders | None = None,
                 clock: Callable[[], float] = time.time):
        self.config = config
        self.limits: CollectConfig = config.collect
        self.site = site
        self.classifier = TierClassifier.load(config.tiers.rules_files)
        self.on_reject = on_reject or (lambda rec: None)
        self.hold = hold_seconds
        self.name_of = name_of
        self.seq_of = seq_of
        #: who counts: given, else the configured allow-list, else everyone (library use)
        self.senders = senders or Senders(parse_allow(self.limits.allow, "collect.allow") or None)
        self.clock = clock
        self._names: dict[str, str] = {}
        self.streams: OrderedDict[tuple[str, int], Stream] = OrderedDict()  # least recently heard first
        self.owners: dict[tuple[int, int], str] = {}  # (server id, stod) -> the sender that owns it
        self.retired: OrderedDict[str, int] = OrderedDict()  # origin -> next seq of a closed stream
        self.stats = CollectStats()
        self.now = 0.0  # the latest arrival time (s)
        self.held = 0  # records held by all streams
        self.window_bytes = 0  # datagrams waiting in all windows
        self._slots: deque[tuple[order.Slot, tuple[str, int]]] = deque()  # window slots in arrival order
        self._idle_checked = 0.0
        self._out: list[AccessEvent] = []

    _STATE = ("streams", "stats", "_names", "owners", "retired", "now", "held", "window_bytes", "_slots",
              "_idle_checked")

    def state(self) -> bytes:
        """Everything needed to go on decoding exactly from here (a spool's checkpoints): the
        streams with their windows, owners, closed streams' next seq, the clock."""
        return pickle.dumps({k: getattr(self, k) for k in self._STATE}, protocol=pickle.HIGHEST_PROTOCOL)

    def load_state(self, data: bytes) -> None:
        for k, v in pickle.loads(data).items():
            setattr(self, k, v)

    # ------------------------------------------------------------------ datagrams

    def feed(self, data: bytes, ip: str, now: float | None = None) -> list[AccessEvent]:
        """The events a datagram from `ip`, arrived at `now` (s; default: the clock), completes."""
        st = self.stats
        st.datagrams += 1
        st.bytes += len(data)
        self._advance(now)
        if not self.senders.allowed(ip):
            st.refused = self.senders.refused
            st.refused_by = self.senders.refused_by
        else:
            try:
                self._arrive(data, ip)
            except BadDatagram as exc:
                self._drop(exc.kind, exc.reason, data, ip)
            except (ValueError, IndexError, UnicodeError, OverflowError) as exc:  # struct.error is a ValueError
                self._drop("garbage", f"{type(exc).__name__}: {exc}", data, ip)
        out, self._out = self._out, []
        return out

    def tick(self, now: float | None = None) -> list[AccessEvent]:
        """Nothing arrived: what the reorder window or an idle stream lets go by now."""
        self._advance(now)
        out, self._out = self._out, []
        return out

    def _advance(self, now: float | None) -> None:
        now = self.clock() if now is None else now
        if now > self.now:
            self.now = now
        now = self.now
        slots, seconds = self._slots, self.limits.reorder_seconds
        while slots and (slots[0][0].done or now - slots[0][0].arrived >= seconds):
            slot, key = slots.popleft()
            if not slot.done:
                self._drain(self.streams[key])
        if now - self._idle_checked >= 1.0:
            self._idle_checked = now
            idle = self.limits.stream_idle_seconds
            while self.streams:
                s = next(iter(self.streams.values()))
                if now - s.last_arrival < idle:
                    break
                self._close(s, "idle")

    def _drop(self, kind: str, reason: str, data: bytes, ip: str) -> None:
        self.stats.dropped[kind] += 1
        self.on_reject({"datagram": self.stats.datagrams, "from": ip, "reason": f"{kind} datagram: {reason}",
                        "text": data[:32].hex(), "skipped": False})

    def _stream(self, ip: str, stod: int, sid: int | None) -> Stream | None:
        """The stream of (sender, stod), made if new (past the cap the one idle longest is closed);
        None when another sender owns (sid, stod): a conflict, counted."""
        if sid:
            owner = self.owners.get((sid, stod))
            if owner is not None and owner != ip:
                self.stats.conflicts += 1
                return None
        key = (ip, stod)
        s = self.streams.get(key)
        if s is None:
            self._make_room()
            name = self._names.get(ip)
            if name is None:
                if len(self._names) >= 4096:
                    self._names.clear()
                name = self._names[ip] = self.name_of(ip)
            s = self.streams[key] = Stream(ip, stod, name)
        else:
            self.streams.move_to_end(key)
        if sid and (sid, stod) not in s.claims:
            s.claims.add((sid, stod))
            self.owners[(sid, stod)] = ip
        s.last_arrival = self.now
        s.heard += 1
        return s

    def _make_room(self) -> None:
        """Below collect.max_streams: the stream idle longest is closed, but one heard more than
        once since it was last looked at gets a second chance (a flood of one-datagram streams
        goes before a server that keeps sending)."""
        streams = self.streams
        while len(streams) >= self.limits.max_streams:
            key, s = next(iter(streams.items()))
            if s.heard > 1:
                s.heard = 0
                streams.move_to_end(key)
                continue
            self._close(s, "cap")

    def _arrive(self, data: bytes, ip: str) -> None:
        """Into its stream's window (or at once: what has no packet number)."""
        if not data:
            raise BadDatagram("truncated", "empty datagram")
        if data[:1] == b"{":
            lines = data.split(b"\0", 1)[0].decode("utf-8", "replace").split("\n")
            head = gstream.json_header(lines[0])
            code = head["code"]
            if code == "=":
                stod = head.get("stod")
                if type(stod) is not int:
                    raise BadDatagram("garbage", "JSON ident without an integer stod")
                sid = head.get("sid")
                s = self._stream(ip, stod, sid & _SID_MASK if type(sid) is int else None)
                if s is not None:
                    s.datagrams["="] += 1
                    self._ident(s, ident.from_json(head))
                return
            if code != "g":
                raise BadDatagram("garbage", f"JSON datagram of code {code[:8]!r}")
            packet = gstream.text(head, lines[1:])
            s = self._stream(ip, packet.stod, packet.sid or None)
            kind, pseq, payload, tbeg, tend = "g", packet.pseq, (packet, lines[0]), packet.tbeg, packet.tend
        else:
            head = binary_header(data)
            kind, pseq, payload = seq_kind(head.code), head.pseq, head
            if kind is None:  # no stream is made for it
                raise BadDatagram("garbage", f"unknown stream code {head.code!r}")
            sid, tbeg, tend = _peek(data, head)
            s = self._stream(ip, head.stod, sid)
        if s is None:
            return
        verdict, slot = s.window.offer(kind, pseq, data, payload, self.now, tbeg, tend)
        st = self.stats
        if verdict != order.NEW:
            if verdict == order.DUPLICATE:
                st.duplicates += 1
            elif verdict == order.LATE:
                st.late += 1
            else:
                st.reused += 1
            return
        if slot.behind:
            st.reordered += 1  # it came after a later one of its kind, and takes its place
        self._slots.append((slot, (s.ip, s.stod)))
        self.window_bytes += len(data)
        self._drain(s)
        while self.window_bytes > self.limits.reorder_max_bytes and self._slots:
            slot, key = self._slots.popleft()
            if not slot.done:
                self._drain(self.streams[key], force=1)
        self._fit(s)

    def _drain(self, s: Stream, force: int = 0) -> None:
        """What the stream's window lets go, decoded in order; the gaps before them counted."""
        lim = self.limits
        for item, gap in s.window.release(self.now, lim.reorder_datagrams, lim.reorder_seconds, force):
            self.window_bytes -= len(item.data)
            if gap:
                s.lost[item.kind] += gap
                self.stats.lost += gap
                if item.kind == "g":
                    s.gap_pending = True
            self._dispatch(s, item)
        self._resize(s)

    def _resize(self, s: Stream) -> None:
        n = s.held_records()
        self.held += n - s.size
        s.size = n

    def _fit(self, s: Stream) -> None:
        """Held records within collect.max_held_records: the streams idle longest are closed (this one last)."""
        self._resize(s)
        while self.held > self.limits.max_held_records:
            victim = next((x for x in self.streams.values() if x is not s), None)
            if victim is None:
                if self.streams.get((s.ip, s.stod)) is s:
                    self._close(s, "budget")
                break
            self._close(victim, "budget")

    def _close(self, s: Stream, why: str) -> None:
        """Its window decoded, its held accesses written, its state gone (its next seq remembered)."""
        self._drain(s, force=len(s.window))
        self._out += self._resolve(s, final=True) if s.is_cache else self._release(s, final=True)
        key = (s.ip, s.stod)
        if self.streams.get(key) is s:
            del self.streams[key]
        self.held -= s.size
        for claim in s.claims:
            if self.owners.get(claim) == s.ip:
                del self.owners[claim]
        for kind, n in s.lost.items():
            self.stats.closed_lost[(s.name, kind)] += n
        if s.numbered:
            self.retired[s.origin] = s.seq
            self.retired.move_to_end(s.origin)
            if len(self.retired) > _RETIRED:
                self.retired.popitem(last=False)
        self.stats.streams_closed[why] += 1

    def _number(self, s: Stream) -> None:
        """Its seq from where a closed stream of the same origin (or a restarted collector) stopped."""
        if not s.numbered:
            s.fixed_origin = origin = s.origin
            seq = self.retired.pop(origin, None)
            s.seq, s.numbered = (self.seq_of(origin) if seq is None else seq), True

    def _ident(self, s: Stream, who: ident.Ident) -> None:
        s.ident = who
        if s.sid is None and who.sid is not None:
            s.sid = who.sid

    def _dispatch(self, s: Stream, item: order.Item) -> None:
        try:
            self._out += self._decode(s, item)
        except BadDatagram as exc:
            self._drop(exc.kind, exc.reason, item.data, s.ip)
        except (ValueError, IndexError, UnicodeError, OverflowError) as exc:
            self._drop("garbage", f"{type(exc).__name__}: {exc}", item.data, s.ip)

    def _decode(self, s: Stream, item: order.Item) -> list[AccessEvent]:
        data, payload = item.data, item.payload
        if not isinstance(payload, Header):  # a JSON g-stream packet
            packet, header_line = payload
            s.datagrams["g"] += 1
            return self._gpacket(s, packet, header_line)
        head = payload
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
                self._ident(s, ident.binary(rec.who, rec.info))
        elif code not in "iprx":
            raise BadDatagram("garbage", f"unknown stream code {code!r}")
        return []

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
        if s.gap_pending:
            s.ggaps.append((s.glast[1], p.tbeg))
            s.gap_pending = False
        s.glast = (p.tbeg, p.tend)
        s.gtime = max(s.gtime, p.tbeg)
        if header_line is None:  # the binary header as XRootD's JSON form states it, naming the server
            header_line = orjson.dumps({"code": "g", "pseq": p.pseq, "stod": p.stod, "sid": p.sid,
                                        "src": {"site": "", "host": s.name},
                                        "gs": {"type": p.provider, "tbeg": p.tbeg, "tend": p.tend}}).decode()
        # each file close waits until the f-stream (if the server sends one) is past its detach
        rest = [header_line]
        clock = max(p.tbeg, p.tend)
        ahead = self.limits.max_ahead_seconds
        for line in p.lines:
            rec = _close_record(line)
            if rec is None:
                rest.append(line)
            elif clock and rec[2] - clock > ahead:  # held until its detach passed: never, in effect
                self.stats.rejected += 1
                self._parse_reject(s.origin, RejectRecord(
                    0, f"g-stream record dated past collect.max_ahead_seconds: detach_t {rec[2]} lies "
                    f"{rec[2] - clock} s after its packet's time {clock} (more than {ahead:g} s)", line[:200], False))
            else:
                s.gheld.append((line, *rec))
                s.heldpaths.setdefault(rec[0], []).append(rec[1])
        events = self._parse(s, rest)
        return events + self._resolve(s, final=False)

    def _parse(self, s: Stream, lines: list[str]) -> list[AccessEvent]:
        self._number(s)
        parser = s.gparser
        if parser is None:
            parser = s.gparser = LineParser(GSTREAM_FORMAT, config=self.config, site=self.site, origin=s.origin,
                                            seq_start=s.seq, classifier=self.classifier, record_skipped=False,
                                            on_reject=lambda rec, origin=s.origin: self._parse_reject(origin, rec))
        parser.enrich.seq = s.seq
        before_rejected, before_skipped = parser.stats.rejected, parser.stats.skipped
        events: list[AccessEvent] = []
        for batch in parser.batches(lines):
            events.extend(batch)
        s.seq = parser.enrich.seq
        st = self.stats
        st.events += len(events)
        st.rejected += parser.stats.rejected - before_rejected
        st.skipped += parser.stats.skipped - before_skipped
        return events

    def _resolve(self, s: Stream, final: bool) -> list[AccessEvent]:
        """Held g-stream closes whose detach the f-stream has passed, in arrival order (seq as
        `parse` numbers them): each counts the f-stream opens of its file it covers."""
        out: list[AccessEvent] = []
        n = 0
        for n, (line, lfn, attach, detach) in enumerate(s.gheld):
            if not final and self._waits(s, n, lfn, attach, detach):
                break
            out += self._record(s, line, lfn, attach, detach, n)
        else:
            n = len(s.gheld)
        for _, lfn, attach, _ in s.gheld[:n]:
            same = s.heldpaths[lfn]
            same.remove(attach)
            if not same:
                del s.heldpaths[lfn]
        del s.gheld[:n]
        return out + self._unclaimed(s, final, n > 0)

    def _waits(self, s: Stream, n: int, lfn: str, attach: int, detach: int) -> bool:
        """The f-stream has not passed the record's detach; or, within the hold, the records of the
        file's other opens in its f-stream packets, or the trace's reads of them, may still come."""
        if not s.has_fstream:  # none yet: it may start within the hold
            return s.gtime - detach < self.hold
        if s.ftime <= detach:
            return True
        if s.ftime - detach >= self.hold:
            return False
        cands = _candidates(s, lfn, attach, detach)
        if len(cands) < 2:
            return False  # one access: the record's bytes
        if s.gtime <= max(o.te for o in cands) + DEFERRAL:
            return True
        cands = _claimable(s, n, lfn, cands)
        return len(cands) > 1 and any(self._unread(s, o) for o in cands)

    @staticmethod
    def _unread(s: Stream, o: CacheOpen) -> bool:
        """Its close, or (within the hold) its trace's reads, may still come: their bytes and
        offsets decide its share and its verdict (the trace's buffers go out when full, often
        after the f-stream's close; a server's first trace datagram may come a minute after its
        first records: within the hold, a record covering several opens waits for it)."""
        return not o.closed or not o.tclosed and s.ftime - o.closed < HOLD_SECONDS

    def _record(self, s: Stream, line: str, lfn: str, attach: int, detach: int, n: int) -> list[AccessEvent]:
        cands = _claimable(s, n, lfn, _candidates(s, lfn, attach, detach))
        pool = [o for o in s.bypath.get(lfn, ()) if not o.claimed and o not in cands and o.tb <= detach + DEFERRAL]
        cands = _by_bytes(line, cands, pool)
        for o in cands:
            o.claimed = True
        seq0 = s.seq
        events = self._parse(s, [line])
        k = len(cands)
        if not events or k == 0:
            return events
        rec = orjson.loads(line)
        kinds = _open_verdicts(s, rec, lfn, cands, events[0].observed_hit)
        if k == len(events) == 1:
            return events
        # the record stands for k opens (a re-open joined the deferred detach, or concurrent
        # opens shared its attach): k accesses
        self.stats.events += k - len(events)
        self.stats.delayed_hits += kinds.count(DELAYED) if kinds else 0
        self.stats.shared_verdicts += k if kinds is None and events[0].observed_hit is not None else 0
        s.seq = seq0 + k
        return _apportion(events, cands, seq0, rec, kinds)

    def _unclaimed(self, s: Stream, final: bool, resolved: bool) -> list[AccessEvent]:
        """F-stream opens no g-stream record took: their record was in a lost datagram (then they
        are accesses, without the cache's observed values), else they are left out."""
        ready = []
        keep = []
        # those waiting for a held record are looked at again once records went out
        todo = s.waiting if resolved or final else []
        if todo:
            s.waiting = []
        while todo or s.closing:
            if todo:
                dictid, o = todo.pop()
            else:
                dictid, o = s.closing[0]
                # its record's detach: by the close's packet, or the deferral after it
                if not final and (s.gtime <= o.closed + DEFERRAL or s.ftime <= o.closed + DEFERRAL):
                    break
                s.closing.popleft()
            if not o.claimed and not final and any(a <= o.te for a in s.heldpaths.get(o.path, ())):
                keep.append((dictid, o))  # a held record of its file may take it
                continue
            # (a gap before the g-stream packet past its deferral is known by now)
            if o.claimed or not any(lo <= o.closed + DEFERRAL and hi >= o.tb for lo, hi in s.ggaps):
                _forget(s, dictid, o)
                continue
            if not final and s.has_trace and not o.tclosed and s.ftime - o.closed < self.hold:
                keep.append((dictid, o))
                continue
            _forget(s, dictid, o)
            if o.nbytes == 0:
                self.stats.skipped += 1
                self.stats.reasons["f-stream access that read 0 bytes"] += 1
                continue
            ready.append((o.closed, Access(o.tb * 1_000_000, o.path, o.size, o.nbytes, "read", s.name, o.client)))
        s.waiting += keep
        if final:
            s.copens.clear()
            s.bypath.clear()
        if not ready:
            return []
        s.held.extend(ready)
        return self._release(s, final=True)

    def _parse_reject(self, origin: str, rec: RejectRecord) -> None:
        key = rec.reason.split(":", 1)[0][:60]
        reasons = self.stats.reasons
        reasons[key if key in reasons or len(reasons) < 1000 else "(other reasons)"] += 1  # bounded
        self.on_reject({"origin": origin, "line": rec.line, "reason": rec.reason, "text": rec.text,
                        "skipped": rec.skipped})

    # ------------------------------------------------------------------ f-stream and trace

    def _fpacket(self, s: Stream, records: list[fstream.FRecord]) -> list[AccessEvent]:
        out: list[AccessEvent] = []
        for r in records:
            if r.kind == fstream.TIME:
                s.ftime, s.ftend = r.tbeg, r.tend
                if r.sid and s.sid is None:
                    s.sid = r.sid
                continue
            if r.kind == fstream.OPEN:
                s.fseq += 1
                o = s.copens[r.id] = CacheOpen(s.ftime, s.ftend or s.ftime, r.lfn or s.paths.get(r.id, ""),
                                               r.size, s.users.get(r.user, ""), opened_n=s.fseq)
                s.bypath.setdefault(o.path, []).append(o)
                if len(s.copens) > _MAP_LIMIT:  # opens never closed: the oldest half goes
                    for dictid in list(s.copens)[: _MAP_LIMIT // 2]:
                        _forget(s, dictid, s.copens[dictid])
            elif r.kind == fstream.CLOSE and r.id in s.copens:
                o = s.copens[r.id]
                if not o.closed:
                    s.closing.append((r.id, o))
                    s.fseq += 1
                    o.closed_n = s.fseq
                o.read, o.closed = r.read, s.ftend or s.ftime or 1
            if s.is_cache:
                self.stats.superseded += r.kind == fstream.OPEN
                continue
            if r.kind == fstream.OPEN:
                path = r.lfn or s.paths.pop(r.id, "")
                s.files[r.id] = OpenFile(s.ftime * 1_000_000, path, r.size, s.users.get(r.user, ""),
                                         open_end=s.ftend or s.ftime)
                _bounded(s.files)
            elif r.kind == fstream.CLOSE:
                f = s.files.get(r.id)
                if f is None:
                    self.stats.incomplete += 1  # its open was in a lost datagram (or before we started)
                    continue
                f.read, f.write, f.closed_at, f.close_end = r.read, r.write, s.ftime or 1, s.ftend or s.ftime
                self._complete(s, r.id, f)
            elif r.kind == fstream.DISC:
                s.users.pop(r.id, None)
        s.has_fstream = True
        if s.is_cache:
            return self._resolve(s, final=False)
        cut = s.ftime - self.hold  # a storage element's opens are kept only for a g-stream that may come
        while s.closing and s.closing[0][1].closed < cut:
            _forget(s, *s.closing.popleft())
        out += self._release(s, final=False)
        return out

    def _trace(self, s: Stream, t: tstream.Trace) -> list[AccessEvent]:
        s.has_trace = True
        s.ttime = max(s.ttime, t.window)
        for dictid, n in t.read_bytes.items():
            o = s.copens.get(dictid)
            if o is not None:
                o.traced += n
        for dictid, offset, length in t.ranges:
            o = s.copens.get(dictid)
            if o is not None:
                if o.first is None:
                    o.first = (offset, length)
                o.ranges = _add_range(getattr(o, "ranges", None), offset, length)
        for dictid in t.closes:
            o = s.copens.get(dictid)
            if o is not None:
                o.tclosed = True
        if s.is_cache:
            return self._resolve(s, final=False)
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
        s.held.append((f.closed_at, Access(f.ts, f.path, size, nbytes, op, s.name, f.client,
                                           duration_us=_fstream_duration(f))))

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
        self._number(s)
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
        for s in list(self.streams.values()):
            self._drain(s, force=len(s.window))
        out, self._out = self._out, []
        for s in self.streams.values():
            out += self._resolve(s, final=True) if s.is_cache else self._release(s, final=True)
            self._resize(s)
        return out


def _candidates(s: Stream, lfn: str, attach: int, detach: int) -> list[CacheOpen]:
    """The unclaimed opens of the file whose f-stream packet overlaps the record's attach..detach."""
    return [o for o in s.bypath.get(lfn, ()) if not o.claimed and o.tb <= detach and o.te >= attach]


def _claimable(s: Stream, n: int, lfn: str, cands: list[CacheOpen]) -> list[CacheOpen]:
    """The candidates the n-th held record takes: opens a later held record of the file may hold
    (its attach within their packets) are left to it."""
    if len(cands) < 2:
        return cands
    top = max(o.te for o in cands)
    taken = sum(1 for (_, f, a, _) in s.gheld[n + 1:] if f == lfn and a <= top)
    return cands[:max(1, len(cands) - taken)]


#: candidates a record's bytes are matched against (2^n subsets at most); more: all are taken
_MAX_MATCH = 12


def _by_bytes(line: str, cands: list[CacheOpen], pool: list[CacheOpen] = ()) -> list[CacheOpen]:
    """The candidates a record covers: the f-stream packets (a flush window, ~10 s) put every
    open of the file in that window in it, also those of the file's next records; the record's
    served bytes (b_hit + b_miss + b_bypass, what XrdPfc gave its clients) are the sum of its
    opens' bytes. The fewest, earliest candidates whose bytes sum to it exactly; when all of them
    sum to less, the fewest other unclaimed opens of the file (`pool`, an open whose packet the
    record's times missed) that make up the rest; none do (a byte count not known, an f-stream
    count above what was served): all the candidates."""
    if not cands or len(cands) > _MAX_MATCH or any(o.nbytes == 0 for o in cands):
        return cands
    if len(cands) < 2 and not pool:
        return cands
    try:
        rec = orjson.loads(line)
        served = sum(rec.get(k, 0) for k in ("b_hit", "b_miss", "b_bypass"))
    except (orjson.JSONDecodeError, TypeError):
        return cands
    if type(served) is not int or served <= 0:
        return cands
    for size in range(1, len(cands) + 1):
        for pick in combinations(range(len(cands)), size):
            if sum(cands[i].nbytes for i in pick) == served:
                return [cands[i] for i in pick]
    rest = served - sum(o.nbytes for o in cands)
    pool = [o for o in pool if o.nbytes][:_MAX_MATCH]
    if rest > 0:
        for size in range(1, len(pool) + 1):
            for pick in combinations(pool, size):
                if sum(o.nbytes for o in pick) == rest:
                    return sorted([*cands, *pick], key=lambda o: o.opened_n)
    return cands


def _forget(s: Stream, dictid: int, o: CacheOpen) -> None:
    if s.copens.get(dictid) is o:
        del s.copens[dictid]
    same = s.bypath.get(o.path)
    if same is not None:
        try:
            same.remove(o)
        except ValueError:
            pass
        if not same:
            del s.bypath[o.path]


def _close_record(line: str) -> tuple[str, int, int] | None:
    """(lfn, attach, detach) of a g-stream file close, None for any other line (the parser judges it)."""
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(rec) is not dict or rec.get("event") != "file_close":
        return None
    lfn, attach, detach = rec.get("lfn"), rec.get("attach_t"), rec.get("detach_t")
    if type(lfn) is not str or type(detach) is not int:
        return None
    return lfn, attach if type(attach) is int and attach else detach, detach


def _shares(total: int, weights: list[int]) -> list[int]:
    """total split in proportion to weights (evenly when they are all 0), remainders to the first."""
    k, w = len(weights), sum(weights)
    if w == 0:
        return [total // k + (i < total % k) for i in range(k)]
    out = [total * x // w for x in weights]
    out[0] += total - sum(out)
    return out


#: an open's verdict within a record covering several (`_open_verdicts`)
MISS, HIT, DELAYED = 0, 1, 2
# the server passes a client's read to the cache in pieces of its largest buffer (xrootd's
# default 2 MiB: a real 5.5.3 cache's block log shows a 6 MiB read as `req` of 2 MiB, the next
# asked once the previous one's blocks were written)
_SERVER_CHUNK = 2 << 20
_MAX_RANGES = 256  # an open's trace ranges kept; past it neighbours merge (blocks over-counted, never missed)
_MAX_BLOCKS = 1 << 22  # blocks of a file a verdict looks at (a bitmap); a larger file's verdict is shared
#: bytes of block bitmaps remembered per stream (1 MiB: 8 M blocks, ~8,000 files of 1 GiB at
#: 1 MiB blocks); past it the files seen longest ago are forgotten (their blocks count as not on disk)
_KNOWN_BYTES = 1 << 20


def _add_range(ranges: list[tuple[int, int]] | None, offset: int, length: int) -> list[tuple[int, int]]:
    if ranges is None:
        ranges = []
    if ranges and ranges[-1][0] <= offset <= ranges[-1][0] + ranges[-1][1]:
        o0, l0 = ranges[-1]
        ranges[-1] = (o0, max(l0, offset + length - o0))
    else:
        ranges.append((offset, length))
    if len(ranges) > _MAX_RANGES:
        ranges.sort()
        ranges[:] = [(p[0][0], max(o + n for o, n in p) - p[0][0]) for p in (ranges[i:i + 2]
                                                                          for i in range(0, len(ranges), 2))]
    return ranges


def _bitmap_bytes(mask: int) -> int:
    return 16 + (mask.bit_length() + 7) // 8  # with a little for the entry


def _blocks(ranges: list[tuple[int, int]], block: int, nblocks: int) -> int:
    """The blocks the ranges touch, as a bitmap (bit i: block i), within the file's blocks."""
    mask = 0
    for off, ln in ranges:
        first = off // block
        if ln <= 0 or off < 0 or first >= nblocks:
            continue
        last = min((off + ln - 1) // block, nblocks - 1)
        mask |= ((1 << (last - first + 1)) - 1) << first
    return mask


def _open_verdicts(s: Stream, rec: dict, lfn: str, opens: list[CacheOpen], verdict: int | None) -> list[int] | None:
    """Which of a record's opens fetched (MISS), found every block on disk (HIT) or fetched
    nothing but needed blocks an earlier open of the record, still open, had surely asked for by
    then (DELAYED; `_asked_at_open`): each open's blocks (its trace reads' offsets) against the blocks on disk when it
    opened (those of earlier records of the file, and of the record's opens closed before it, in
    f-stream order). None when the streams cannot tell (no trace offsets, no block size, a
    record that fetched though none of its opens did by this account): the verdict is shared.
    Remembers the file's blocks on disk after the record (all of them when it is complete;
    none before a record with access_cnt 1: a new cinfo)."""
    block, size, count = rec.get("blk_size"), rec.get("size"), rec.get("access_cnt")
    if type(block) is not int or block <= 0 or type(size) is not int or size < 0 or -(-size // block) > _MAX_BLOCKS:
        return None
    nblocks = -(-size // block)
    known = s.known.pop(lfn, 0)
    s.known_bytes -= _bitmap_bytes(known)
    if count == 1:
        known = 0
    masks = [None if getattr(o, "ranges", None) is None else _blocks(o.ranges, block, nblocks) for o in opens]
    after = known
    for m in masks:
        after |= m or 0
    done, n = rec.get("n_blks_done"), rec.get("n_blks")
    if type(done) is int and type(n) is int and done >= n == nblocks:
        after = (1 << nblocks) - 1
    s.known[lfn] = after
    s.known_bytes += _bitmap_bytes(after)
    while s.known_bytes > _KNOWN_BYTES and len(s.known) > 1:
        s.known_bytes -= _bitmap_bytes(s.known.popitem(last=False)[1])
    if verdict is None:
        return None
    if verdict == 1:
        return [HIT] * len(opens)
    if any(m is None for m in masks):
        return None
    kinds, asked = [], []
    for i, (o, m) in enumerate(zip(opens, masks)):
        on_disk, coming = known, 0
        for j in range(i):
            if opens[j].closed_n and opens[j].closed_n < o.opened_n:
                on_disk |= masks[j]
            else:
                coming |= asked[j]
        kinds.append(HIT if not m & ~on_disk else DELAYED if not m & ~(on_disk | coming) else MISS)
        asked.append(_asked_at_open(o.first, on_disk, block, nblocks))
    return kinds if MISS in kinds else None


def _asked_at_open(first: tuple[int, int] | None, on_disk: int, block: int, nblocks: int) -> int:
    """The blocks an open had surely asked the cache for before a later open came: its first
    request's, as the server passes it on (pieces of _SERVER_CHUNK, one after another, each
    waiting for its missing blocks), up to its first piece with a block not on disk. The trace
    carries no times of its own (one window a flush), so its later pieces and requests may come
    after the later open's."""
    if first is None:
        return 0
    offset, length = first
    asked = 0
    for at in range(offset, offset + min(length, nblocks * block), _SERVER_CHUNK):
        piece = _blocks([(at, min(_SERVER_CHUNK, offset + length - at))], block, nblocks)
        asked |= piece
        if piece & ~on_disk or not piece:
            break
    return asked


def _apportion(events: list[AccessEvent], opens: list[CacheOpen], seq0: int, rec: dict,
               kinds: list[int] | None = None) -> list[AccessEvent]:
    """One record's events (1, or the parser's access_cnt split) as one access per f-stream open:
    the bytes each open's close/trace states (else the record's served bytes left, split evenly).
    With each open's verdict (`kinds`): a hit or delayed hit served all its bytes from the cache,
    the misses share the record's miss, bypass and origin bytes (and its hit bytes left) in
    proportion to their bytes; without (shared): the record's hit/miss/bypass bytes split in
    proportion over all (each within its access's bytes, as the Enricher clamps), so no byte is
    counted twice."""
    e0 = events[0]
    raw = [rec.get(k) for k in ("b_hit", "b_miss", "b_bypass")]
    raw = [v if type(v) is int and v >= 0 else 0 for v in raw]
    known = sum(o.nbytes for o in opens)
    unknown = [i for i, o in enumerate(opens) if o.nbytes == 0]
    nbytes = [o.nbytes for o in opens]
    if unknown:
        for i, b in zip(unknown, _shares(max(sum(raw) - known, 0), [0] * len(unknown))):
            nbytes[i] = b
    if e0.file_size:
        nbytes = [min(b, e0.file_size) for b in nbytes]
    total = sum(raw)
    if not unknown and total and sum(nbytes) != total:
        # the f-stream's count can exceed what was served (a read past what the client got):
        # the record's count is XrdPfc's own, the opens share it in proportion
        nbytes = _shares(total, nbytes)
        if e0.file_size:  # a share never above the file (the contract's clamp): a record whose
            # opens were lost with their datagrams holds more than the opens left can carry
            nbytes = [min(b, e0.file_size) for b in nbytes]
    says = e0.observed_hit_bytes is not None
    observed, verdicts = [], []
    if kinds is not None:
        served = sum(b for b, kind in zip(nbytes, kinds) if kind != MISS)
        misses = [i for i, kind in enumerate(kinds) if kind == MISS]
        parts = [max(raw[0] - served, 0), raw[1], raw[2]]
        split = [[0] * len(nbytes) for _ in raw]
        for v, row in zip(parts, split):
            for i, x in zip(misses, _shares(v, [nbytes[i] for i in misses])):
                row[i] = x
        for i, b in enumerate(nbytes):
            if kinds[i] == MISS:
                observed.append(clamp_observed(b, split[0][i], split[1][i], split[2][i]) if says else (None,) * 3)
            else:
                observed.append((b, 0, 0) if says else (None,) * 3)
            verdicts.append(1 if kinds[i] == HIT else 0)
    else:
        split = [_shares(v, nbytes) for v in raw]
        for i, b in enumerate(nbytes):
            hit, miss, bypass = clamp_observed(b, split[0][i], split[1][i], split[2][i]) if says else (None,) * 3
            verdict = e0.observed_hit
            if verdict == 0 and i > 0 and not miss and not bypass:
                verdict = 1  # the origin fetch is the first access's, counted once
            observed.append((hit, miss, bypass))
            verdicts.append(verdict)
    # the origin bytes (prefetch included, not bounded by an access's bytes): the misses' in
    # proportion to their bytes (a hit or delayed hit fetched nothing), all to the first when none is a miss
    origin: list = [None] * len(nbytes)
    if e0.observed_origin_bytes is not None:
        total = sum(e.observed_origin_bytes or 0 for e in events)
        if kinds is not None:
            misses = [i for i, kind in enumerate(kinds) if kind == MISS]
        else:
            misses = [i for i, v in enumerate(verdicts) if v != 1] or [0]
        origin = [0] * len(nbytes)
        for i, o in zip(misses, _shares(total, [nbytes[i] for i in misses])):
            origin[i] = o
    # each open at its own time: the first at the attach, a later one in the middle of its
    # f-stream packet (the open happened within tBeg..tEnd) when that is later, in open order;
    # a later open's own duration is not known (the record's attach..detach is all of them)
    times, t = [], e0.ts
    for i, o in enumerate(opens):
        t = max(t + 1, (o.tb + o.te) * 500_000) if i else t  # after the attach, never at it
        times.append(t)
    out = []
    for i, b in enumerate(nbytes):
        hit, miss, bypass = observed[i]
        out.append(msgspec.structs.replace(e0, ts=times[i], bytes_read=b, observed_hit_bytes=hit,
                                           observed_miss_bytes=miss, observed_bypass_bytes=bypass,
                                           observed_hit=verdicts[i], observed_origin_bytes=origin[i], seq=seq0 + i,
                                           duration_us=e0.duration_us if i == 0 else None))
    return out


def _peek(data: bytes, head: Header) -> tuple[int | None, int, int]:
    """(server id, tBeg, tEnd) a binary datagram states before it is decoded (g and f packets;
    the ident's server id), for the owner check and the window's clock."""
    code = head.code
    if code == "g" and head.plen >= 24:
        tbeg, tend, sid = struct.unpack_from(">iiq", data, 8)
        return (sid & _SID_MASK) or None, tbeg, tend
    if code == "f" and head.plen >= _TOD.size + 8 and data[8] == fstream.TIME:
        _, _, _, _, tbeg, tend, sid = _TOD.unpack_from(data, 8)
        return (sid & _SID_MASK) or None, tbeg, tend
    if code == "=":
        rec = maps.decode(data, head)
        return ident.binary(rec.who, rec.info).sid, 0, 0
    return None, 0, 0
