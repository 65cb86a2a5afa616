"""XrdPfc's purge runs, read from an XCache's own log (`pfc.trace debug` or `dump`).

Two layouts: XRootD up to 5.6 (`XrdPfc_Cache: … Purge()`, read here) and XRootD 5.7 and later,
6.x included (`XrdPfc_ResourceMonitor`, ingest/xrdpfc_resmon_log.py); `parse_purges` reads
either, telling them apart by their lines. docs/xrootd-versions.md has what changed.

XRootD 5.5's `Cache::Purge()` logs, every `purgeinterval` (the first run 1 s after start):

    261127 08:54:45 22854 XrdPfc_Cache: info Purge() Started.
    ... debug Purge() used disk space 1689808896 bytes.            (statvfs total - free)
    ... debug Purge() actual usage by files 1747976192 bytes.       (only when a scan ran)
    ... debug Purge() File is active or purge-protected: LFN size: S
    ... dump Purge() Removed file: 'LFN.cinfo' size: 4096
    ... dump Purge() Removed file: 'LFN' size: 25165824, time: 1795770150
    ... info Purge() Encountered 56 protected files, sum of their size: 850395136
    ... info Purge() Finished, removed 50 data files, total size 897581056, bytes to remove at end 634941440, purge duration 0

`Removed file` lines (dump level only) give each data file removed, in removal order: its bytes
on disk (whole blocks) and the access time it was ordered by (epoch seconds). The log's own times
are the server's local time with one-second resolution; `parse_purges(tz=...)` says which zone.
A purge whose `Finished` line is missing (a log cut short) is not returned. Other lines (the
per-block dump lines, the configuration echo) are ignored, so the whole log can be given.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

_LINE = re.compile(r"^(\d{6} \d\d:\d\d:\d\d) \d+ XrdPfc_Cache: \w+ Purge\(\) (.*)$")
_REMOVED = re.compile(r"Removed file: '(.*)' size: (\d+), time: (-?\d+)$")
_PROTECTED = re.compile(r"Encountered (\d+) protected files, sum of their size: (-?\d+)")
_FINISHED = re.compile(r"Finished, removed (\d+) data files, total size (-?\d+), "
                       r"bytes to remove at end:? (-?\d+)(?:, purge duration (\d+))?")


@dataclass
class RemovedFile:
    lfn: str
    bytes: int
    #: the access time XrdPfc ordered it by (epoch seconds)
    atime: int


@dataclass
class Purge:
    """One purge run. `start`: its `Started` line's time (aware datetime, the log's second)."""

    start: dt.datetime
    used_disk: Optional[int] = None
    files_bytes: Optional[int] = None
    #: bytes the purge set out to remove (removed + left; 0 below the high watermark)
    to_remove: int = 0
    protected: int = 0
    protected_bytes: int = 0
    removed: int = 0
    removed_bytes: int = 0
    left_to_remove: int = 0
    duration_s: Optional[int] = None
    files: list[RemovedFile] = field(default_factory=list)

    @property
    def start_ts(self) -> float:
        return self.start.timestamp()


def log_time(when: str, tz: Optional[dt.tzinfo]) -> dt.datetime:
    """A log line's `yymmdd HH:MM:SS`, in `tz` (None: this machine's local zone)."""
    start = dt.datetime.strptime(when, "%y%m%d %H:%M:%S")
    return start.replace(tzinfo=tz) if tz else start.astimezone()


def parse_purges(lines: Iterable[str], tz: Optional[dt.tzinfo] = None) -> list[Purge]:
    """The purge runs of a cache log, in order, in either layout. `tz`: the zone of the log's
    times (default: this machine's local zone, right when the cache ran here)."""
    from ingest import xrdpfc_resmon_log

    text = list(lines)
    if any(xrdpfc_resmon_log.is_resmon(line) for line in text):
        return xrdpfc_resmon_log.parse_checks(text, tz)
    return _parse_purge_runs(text, tz)


def _parse_purge_runs(lines: Iterable[str], tz: Optional[dt.tzinfo]) -> list[Purge]:
    out: list[Purge] = []
    cur: Optional[Purge] = None
    for raw in lines:
        line = raw.rstrip("\n")
        m = _LINE.match(line)
        if m is None:
            continue
        when, msg = m.groups()
        if msg == "Started.":
            cur = Purge(start=log_time(when, tz))
            continue
        if cur is None:
            continue
        if msg.startswith("used disk space "):
            cur.used_disk = int(msg.split()[3])
        elif msg.startswith("actual usage by files "):
            cur.files_bytes = int(msg.split()[4])
        elif msg.startswith("Removed file: "):
            r = _REMOVED.match(msg)  # the .cinfo lines carry no time: not a data file
            if r:
                cur.files.append(RemovedFile(r.group(1), int(r.group(2)), int(r.group(3))))
        elif msg.startswith("Encountered "):
            p = _PROTECTED.match(msg)
            if p:
                cur.protected, cur.protected_bytes = int(p.group(1)), int(p.group(2))
        elif msg.startswith("Finished"):
            f = _FINISHED.match(msg)
            if f:
                cur.removed, cur.removed_bytes, cur.left_to_remove = int(f.group(1)), int(f.group(2)), int(f.group(3))
                cur.to_remove = cur.removed_bytes + cur.left_to_remove
                cur.duration_s = int(f.group(4)) if f.group(4) is not None else None
                out.append(cur)
            cur = None
    return out
