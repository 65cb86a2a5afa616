"""Parse a stream of log lines into AccessEvents: format parser + enrichment + reject accounting.

`LineParser` is what `cachescope parse`, `cachescope replay` and the shippers use:

    parser = LineParser("eos-report", config=load_config(path), site="CERN", source_name=file)
    for batch in parser.batches(open_lines(file)):   # lists of AccessEvent, input order
        ...
    parser.rejects            # callback or list of RejectRecord(line, reason, text, skipped)
    parser.stats              # ParseStats: lines, events, rejected, skipped, clamped, reasons

Every non-blank input line becomes an event or a RejectRecord with its reason: nothing is lost.
"""

from __future__ import annotations

import io
import os
import re
import socket
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator
from zoneinfo import ZoneInfo

import msgspec

from cachescope.config import CachescopeConfig, load_config
from cachescope.core.columns import EventColumns
from cachescope.errors import InputError
from cachescope.events import AccessEvent
from cachescope.tiers import TierClassifier
from cachescope.compressed import open_bounded
from ingest.enrich import Enricher
from ingest.formats import INTERNAL_ERROR, Access, BadRecord, Format, ParseContext, Reject, get_format
from ingest.formats._base import HELD_PENDING, HELD_VERDICT, Held


#: characters of a rejected line kept in its record: enough to see what the line is, while a
#: hostile or binary input (lines of up to 16 MiB) cannot blow up the rejects or the memory
REJECT_TEXT_CHARS = 1024


def reject_text(line: str) -> str:
    """The line as a reject record keeps it: whole, or its first REJECT_TEXT_CHARS characters and
    how many more there were."""
    if len(line) <= REJECT_TEXT_CHARS:
        return line
    return f"{line[:REJECT_TEXT_CHARS]}… [{len(line) - REJECT_TEXT_CHARS:,} more characters]"


class RejectRecord(msgspec.Struct, gc=False):
    """One rejected input line, as written to stderr / --rejects (JSON lines); `text` is the line,
    cut to its first REJECT_TEXT_CHARS characters when longer (see reject_text)."""

    line: int
    reason: str
    text: str
    skipped: bool = False


@dataclass
class ParseStats:
    lines: int = 0  # non-blank lines read
    events: int = 0
    rejected: int = 0  # malformed or unusable lines
    skipped: int = 0  # well-formed lines that are not accesses (door requests, failures ...)
    clamped: int = 0  # events whose bytes_read was cut to file_size
    internal_errors: int = 0  # parser bugs (must stay 0)
    held: int = 0  # lines whose verdict waits for a later line (pieces of a binary g-stream header)
    reasons: Counter = field(default_factory=Counter)  # rejected and skipped lines by reason
    skipped_reasons: Counter = field(default_factory=Counter)  # skipped lines only, by reason

    def unusable(self) -> bool:
        """Lines were read and every one was rejected as malformed (none an event, none even a
        well-formed line skipped by design): a wrong --format, or not a log at all."""
        # a line still held (a header piece nothing completed) is not known to be well-formed
        return self.lines > 0 and self.events == 0 and self.rejected + self.held == self.lines

    def as_dict(self) -> dict:
        return {
            "lines": self.lines,
            "events": self.events,
            "rejected": self.rejected,
            "skipped": self.skipped,
            "clamped": self.clamped,
            "internal_errors": self.internal_errors,
            "reasons": dict(self.reasons.most_common()),
            "skipped_by_reason": dict(self.skipped_reasons.most_common()),
        }


_REASON_KEY = re.compile(r"^[^(:']*")


def reason_key(reason: str) -> str:
    """Reason without its specifics, for counting ("field size: not a number: 'x'" -> "field size")."""
    return _REASON_KEY.match(reason).group(0).strip() or reason[:40]  # type: ignore[union-attr]


def file_origin(name: str | os.PathLike) -> str:
    """The origin id of a log file: host and absolute path (a shipper follows the path, so the id
    survives rotation); standard input is `stdin:HOST` (give --origin to tell runs apart)."""
    host = socket.gethostname()
    name = str(name)
    if not name or name == "-":
        return f"stdin:{host}"
    return f"file:{host}:{os.path.abspath(name)}"


_DATE_IN_NAME = re.compile(r"(?<!\d)((?:19|20)\d\d)[._-]?(0[1-9]|1[0-2])[._-]?(0[1-9]|[12]\d|3[01])(?!\d)")


def year_from_name(name: str) -> int | None:
    """Year of a dated log file name (billing-2019.08.05, 20240131.eosreport ...)."""
    m = _DATE_IN_NAME.search(os.path.basename(name))
    return int(m.group(1)) if m else None


def _until_damaged(lines: Iterable[str], damaged: list[InputError]) -> Iterator[str]:
    """`lines` until a reader raises InputError (kept in `damaged`)."""
    try:
        yield from lines
    except InputError as exc:
        damaged.append(exc)


_BLOCK_LINES = 8192


class LineParser:
    def __init__(
        self,
        fmt: str | Format,
        *,
        config: CachescopeConfig | None = None,
        site: str = "",
        server: str = "",
        source_name: str = "",
        year: int | None = None,
        seq_start: int | None = None,
        origin: str | None = None,
        classifier: TierClassifier | None = None,
        on_reject: Callable[[RejectRecord], None] | None = None,
        record_skipped: bool = True,
    ):
        self.format = get_format(fmt) if isinstance(fmt, str) else fmt
        self.config = config if config is not None else load_config()
        cfg = self.config
        site_name = site or cfg.site
        if year is None and source_name:
            year = year_from_name(source_name)
        if year is None:
            year = cfg.ingest.year
        if year is None and source_name and source_name != "-" and os.path.exists(source_name):
            year = datetime.fromtimestamp(os.path.getmtime(source_name), tz=timezone.utc).year
        if year is None:
            year = datetime.now(tz=timezone.utc).year
        self.ctx = ParseContext(
            site=site_name,
            tz=ZoneInfo(cfg.site_config(site_name).timezone),
            year=year,
            server=server,
            source_name=source_name,
            options={
                "dcache_billing_formats": cfg.ingest.dcache_billing.formats,
                "http_log_format": cfg.ingest.http_access.log_format,
            },
        )
        if self.format.prepare is not None:
            self.format.prepare(self.ctx)
        if classifier is None:
            classifier = TierClassifier.load(cfg.tiers.rules_files)
        self.enrich = Enricher(
            self.format.name,
            config=cfg,
            classifier=classifier,
            site=site_name,
            site_override=bool(site),
            seq_start=cfg.ingest.seq_start if seq_start is None else seq_start,
            origin=file_origin(source_name) if origin is None else origin,
        )
        self.stats = ParseStats()
        self.rejects: list[RejectRecord] = []
        self._on_reject = on_reject if on_reject is not None else self.rejects.append
        # False: skipped lines (well-formed, not accesses) are only counted in stats, by reason,
        # with no RejectRecord (the shippers send none of them; half of a dCache billing log)
        self._record_skipped = record_skipped
        self._line_no = 0
        self._held: list[tuple[int, str, str]] = []  # (line number, text, reason if confirmed)
        self.error: str | None = None  # why reading stopped early (a damaged input), else None
        self._reason_keys: dict[str, str] = {}

    def continue_at_line(self, line_no: int) -> None:
        """Number the next line `line_no + 1` (a shipper resuming mid-file, or a rotated file)."""
        self._line_no = line_no

    def _reject(self, line_no: int, text: str, rej: Reject) -> None:
        stats = self.stats
        reason = rej.reason
        if rej.skipped:
            stats.skipped += 1
        else:
            stats.rejected += 1
            if reason.startswith(INTERNAL_ERROR):
                stats.internal_errors += 1
        key = self._reason_keys.get(reason)
        if key is None:
            key = reason_key(reason)
            if len(self._reason_keys) < 10_000:
                self._reason_keys[reason] = key
        stats.reasons[key] += 1
        if rej.skipped:
            stats.skipped_reasons[key] += 1
        self._on_reject(RejectRecord(line_no, reason, reject_text(text), rej.skipped))

    def _settle(self, verdict: str, quiet: dict[str, int]) -> None:
        """The held lines' verdict, given by a line after them: skipped as they seemed ("") or rejected."""
        for held_no, held_line, reason in self._held:
            self.stats.held -= 1
            if verdict:
                self._reject(held_no, held_line, Reject(verdict))
            elif self._record_skipped:
                self._reject(held_no, held_line, Reject(reason, True))
            else:
                quiet[reason] = quiet.get(reason, 0) + 1
        self._held.clear()

    def _count_skipped(self, quiet: dict[str, int]) -> None:
        stats = self.stats
        for reason, n in quiet.items():
            key = self._reason_keys.get(reason)
            if key is None:
                key = reason_key(reason)
                if len(self._reason_keys) < 10_000:
                    self._reason_keys[reason] = key
            stats.skipped += n
            stats.reasons[key] += n
            stats.skipped_reasons[key] += n
        quiet.clear()

    def batches(self, lines: Iterable[str], batch_size: int = 4096) -> Iterator[list[AccessEvent]]:
        """Events of `lines` in input order, in lists of up to batch_size."""
        return self._parse(lines, batch_size, None)

    def column_batches(self, lines: Iterable[str], batch_size: int = 16_384) -> Iterator[EventColumns]:
        """The events of `lines` as EventColumns of about batch_size events, in input order: what
        `EventColumns.from_events` gives over `batches()`, with the same stats and rejects. A format
        with a compiled column builder (`Format.columns`) parses and enriches the lines it can
        decide itself; each line it declines goes through the Python parser, in its place."""
        builder = self.format.columns(self.ctx, self.enrich) if self.format.columns is not None else None
        if builder is None:
            for batch in self._parse(lines, batch_size, None):
                yield EventColumns.from_events(batch)
        else:
            yield from self._parse(lines, batch_size, builder)

    def _taker(self, quiet: dict) -> Callable:
        """The one handler of a line's parse result: take(line_no, line, result or None (parse it
        here), emit) sends its events to `emit` and records its rejects (skipped ones counted in
        `quiet` when they are not recorded)."""
        raw, ctx, enrich, reject = self.format.raw, self.ctx, self.enrich, self._reject
        record_skipped = self._record_skipped
        held, state, stats = self._held, self.ctx.state, self.stats
        settle = self._settle

        def take(line_no: int, line: str, result, emit: Callable[[AccessEvent], None]) -> None:
            event = None
            try:
                if result is None:
                    result = raw(line, ctx)
                if type(result) is Access:
                    event = enrich(result)  # raises BadRecord for values outside the contract
            except BadRecord as exc:
                result = Reject(exc.reason, exc.skipped)
            except Exception as exc:  # noqa: BLE001 - a parser bug: keep the line, name the bug
                result = Reject(f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}")
            if type(result) is Held:
                held.append((line_no, line, result.reason))
                stats.held += 1
                return
            if held:
                verdict = state.pop(HELD_VERDICT, None)
                if verdict is not None:
                    settle(verdict, quiet)
            if event is not None:
                emit(event)  # outside the try: a value the columns cannot hold raises, as from_events does
            elif type(result) is list:
                events = []
                for item in result:
                    if type(item) is Access:
                        try:
                            events.append(enrich(item))
                        except BadRecord as exc:
                            reject(line_no, line, Reject(exc.reason, exc.skipped))
                    else:
                        reject(line_no, line, item)
                for event in events:
                    emit(event)
            elif record_skipped or not result.skipped:
                reject(line_no, line, result)
            else:
                quiet[result.reason] = quiet.get(result.reason, 0) + 1

        return take

    def _parse(self, lines: Iterable[str], batch_size: int, builder) -> Iterator:
        """The one parse loop, block by block of lines: lists of events (`builder` None), each line
        through the format's compiled block parser when it has one, else its Python parser; or the
        columns a compiled `builder` makes, the lines it declines through the Python parser."""
        ctx, enrich, stats = self.ctx, self.enrich, self.stats
        block_parser = self.format.block if builder is None else None
        record_skipped = self._record_skipped
        quiet: dict[str, int] = {}  # skipped lines by reason, when they are not recorded
        take = self._taker(quiet)
        damaged: list[InputError] = []
        # a list cannot fail mid-way; a reader can (damaged compressed input): the events read
        # before the damage are kept, then it is raised
        source = iter(lines) if type(lines) is list else _until_damaged(lines, damaged)
        first = line_no = self._line_no  # lines before this call
        blank = 0
        lines_before = stats.lines
        out: list[AccessEvent] = []
        skips: list[tuple[int, str]] = []
        if builder is not None:
            builder.seq = enrich.seq

        def emitted():
            if quiet:
                self._count_skipped(quiet)
            stats.lines = lines_before + line_no - first - blank  # so far (a reader may stop here)
            if builder is None:
                stats.events += len(out)
                return out
            cols = EventColumns(**builder.take())
            stats.events += len(cols)
            return cols

        try:
            while True:
                block = list(islice(source, _BLOCK_LINES))
                if not block:
                    break
                if builder is None:
                    results = block_parser(block, ctx) if block_parser is not None else None
                    append = out.append
                    for k, line in enumerate(block):
                        line_no += 1
                        line = line.rstrip("\r\n")
                        if not line or line.isspace():
                            blank += 1
                            continue
                        result = None if results is None else results[k]
                        if type(result) is Reject and result.skipped and not record_skipped:
                            quiet[result.reason] = quiet.get(result.reason, 0) + 1  # half of a billing log
                            continue
                        take(line_no, line, result, append)
                        if len(out) >= batch_size:
                            yield emitted()
                            out = []
                            append = out.append
                    continue
                n = len(block)
                i = 0
                while i < n:
                    if HELD_PENDING not in ctx.state:  # pieces of a binary header: the Python parser decides
                        i = builder.scan(block, i, skips)
                    for k, reason in skips:
                        if record_skipped:
                            self._reject(line_no + k + 1, block[k].rstrip("\r\n"), Reject(reason, True))
                        else:
                            quiet[reason] = quiet.get(reason, 0) + 1
                    skips.clear()
                    if i < n:
                        line = block[i].rstrip("\r\n")
                        if not line or line.isspace():
                            blank += 1
                        else:
                            enrich.seq = builder.seq
                            take(line_no + i + 1, line, None, builder.push)
                            builder.seq = enrich.seq
                        i += 1
                line_no += n
                if len(builder) >= batch_size:
                    yield emitted()
        finally:
            if self._held:  # the end of the input came before the line that decides them
                self.ctx.state.pop(HELD_PENDING, None)
                self._settle(f"not a complete record: {self._held[0][2]}, but the input ended before the rest of it",
                             quiet)
            if quiet:
                self._count_skipped(quiet)
            self._line_no = line_no
            stats.lines = lines_before + line_no - first - blank
            if builder is not None:
                enrich.seq = builder.seq
                enrich.clamped += builder.clamped
            stats.clamped = enrich.clamped
        if out or (builder is not None and len(builder)):
            yield emitted()
        if damaged:
            self.error = str(damaged[0])
            raise damaged[0]

    def parse_all(self, lines: Iterable[str]) -> list[AccessEvent]:
        events: list[AccessEvent] = []
        for batch in self.batches(lines):
            events.extend(batch)
        return events


# ---------------------------------------------------------------------------------------------
# input files (plain, gzip, zstd; '-' is stdin)


def open_lines(source: str | Path) -> IO[str]:
    """Text lines of a file or '-' (stdin), decompressing gzip/zstd (told by magic bytes).

    Undecodable bytes become U+FFFD (the line still parses or is rejected with its reason).
    Raises OSError when the input cannot be opened; reading raises InputError (file and byte
    offset) when compressed data is corrupt or truncated, or at a line longer than 16 MiB
    (`cachescope.compressed.MAX_LINE_BYTES`; memory stays bounded whatever the input).
    """
    text = io.TextIOWrapper(open_bounded(source), encoding="utf-8", errors="replace", newline="\n")  # type: ignore[arg-type]
    text._CHUNK_SIZE = 1 << 16  # type: ignore[attr-defined]  # blocks as the readers below give them: fewer calls
    return text
