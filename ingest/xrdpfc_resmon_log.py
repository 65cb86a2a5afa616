"""XrdPfc's purge checks, read from an XRootD ≥ 5.7 (6.x included) cache's log.

From 5.7 the purge is driven by `XrdPfc_ResourceMonitor`: its heart-beat checks the disk usage
every 60 s whatever `purgeinterval` says (`purgeinterval` sets how often cold files are purged and
at which level the check is logged: info once per interval, debug otherwise), and hands a purge
task to a thread of its own when usage is above the high watermark:

    261201 22:01:05 4711 XrdPfc_ResourceMonitor: info perform_purge_check() Purge check:
    ... XrdPfc_ResourceMonitor: info      Disk usage: 110100480 exceed highWatermark.
    ... XrdPfc_ResourceMonitor: info      bytes_to_remove = 26214400 B
    ... XrdPfc_ResourceMonitor: info perform_purge_check() scheduling purge task.
    ... XrdPfc_ResourceMonitor: info OldStylePurgeDriver default purge usage measured from cinfo files 104857600 B
    ... XrdPfc_ResourceMonitor: info UnlinkPurgeStateFilesInMap Started ...
    ... XrdPfc_ResourceMonitor: dump UnlinkPurgeStateFilesInMap Removed file: 'LFN' size: 3149824, time: 1796162400
    ... XrdPfc_ResourceMonitor: info UnlinkPurgeStateFilesInMap Encountered 2 protected files, sum of their size: …
    ... XrdPfc_ResourceMonitor: info UnlinkPurgeStateFilesInMap Finished, removed 7 data files, removed total size 26218496
    ... XrdPfc_ResourceMonitor: info OldStylePurgeDriver Finished, removed total size 26218496, purge duration 0

or, below the high watermark, `perform_purge_check() purge not required.` (and `purge required
but previous purge task …` while one still runs). Each check is one `Purge` here, as each 5.5
`Purge()` run is: each ends a purge-protection period (the files opened since the previous one).
`start` is when removals began (the check's time when nothing was scheduled). `Removed file`
lines (dump level) give each removed data file, ordered by its `.cinfo` file's modification time
(about its last close); its size is what the filesystem holds (`512 · st_blocks`: 4 KiB pages on
tmpfs, not whole blocks). `left_to_remove` is what the check wanted minus what the task removed.
A check or task cut off by the end of the log is not returned.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Iterable, Optional

from ingest.xrdpfc_log import Purge, RemovedFile, log_time

_LINE = re.compile(r"^(\d{6} \d\d:\d\d:\d\d) \d+ XrdPfc_ResourceMonitor: \w+ (.*)$")
_REMOVED = re.compile(r"UnlinkPurgeStateFilesInMap Removed file: '(.*)' size: (\d+), time: (-?\d+)")
_PROTECTED = re.compile(r"UnlinkPurgeStateFilesInMap Encountered (\d+) protected files, sum of their size: (-?\d+)")
_UNLINKED = re.compile(r"UnlinkPurgeStateFilesInMap Finished, removed (\d+) data files, removed total size (-?\d+)")
_DRIVER = re.compile(r"OldStylePurgeDriver Finished, removed total size (-?\d+), purge duration (\d+)")


def is_resmon(line: str) -> bool:
    """A purge check's line of the ≥ 5.7 layout."""
    return "XrdPfc_ResourceMonitor: " in line and "perform_purge_check()" in line


def _first_int(text: str) -> Optional[int]:
    m = re.search(r"-?\d+", text)
    return int(m.group(0)) if m else None


def parse_checks(lines: Iterable[str], tz: Optional[dt.tzinfo] = None) -> list[Purge]:
    """The purge checks of a ≥ 5.7 cache log, in order (see the module doc)."""
    out: list[Purge] = []  # in check order (a task can end after the next check began)
    done: set[int] = set()
    cur: Optional[Purge] = None  # the check being read (the heart-beat thread)
    task: Optional[Purge] = None  # the check whose purge task runs (the purge thread)
    for raw in lines:
        m = _LINE.match(raw.rstrip("\n"))
        if m is None:
            continue
        when, msg = m.groups()
        body = msg.strip()
        if body.startswith("perform_purge_check() Purge check:"):
            cur = Purge(start=log_time(when, tz))
            out.append(cur)
        elif cur is not None and body.startswith("Disk usage:") and "exceed highWatermark" in body:
            cur.used_disk = _first_int(body)
        elif cur is not None and body.startswith("bytes_to_remove"):
            cur.to_remove = _first_int(body.partition("=")[2]) or 0
        elif cur is not None and body.startswith(("perform_purge_check() purge not required",
                                                  "perform_purge_check() purge required but previous")):
            cur.left_to_remove, cur.duration_s = cur.to_remove, 0
            done.add(id(cur))
            cur = None
        elif cur is not None and body.startswith("perform_purge_check() scheduling purge task"):
            task, cur = cur, None
        elif task is None:
            continue
        elif body.startswith("OldStylePurgeDriver default purge usage measured from cinfo files"):
            task.files_bytes = _first_int(body.rsplit("files", 1)[1])
        elif body.startswith("UnlinkPurgeStateFilesInMap Started"):
            if not task.files and task.removed == 0:
                task.start = log_time(when, tz)
        elif body.startswith("UnlinkPurgeStateFilesInMap Removed file:"):
            r = _REMOVED.match(body)  # the .cinfo lines carry no time: not a data file
            if r and not r.group(1).endswith(".cinfo"):
                task.files.append(RemovedFile(r.group(1), int(r.group(2)), int(r.group(3))))
        elif body.startswith("UnlinkPurgeStateFilesInMap Encountered"):
            p = _PROTECTED.match(body)
            if p:
                task.protected += int(p.group(1))
                task.protected_bytes += int(p.group(2))
        elif body.startswith("UnlinkPurgeStateFilesInMap Finished"):
            f = _UNLINKED.match(body)
            if f:
                task.removed += int(f.group(1))
                task.removed_bytes += int(f.group(2))
        elif body.startswith("OldStylePurgeDriver Finished"):
            f = _DRIVER.match(body)
            if f:
                task.removed_bytes = int(f.group(1))
                task.duration_s = int(f.group(2))
            task.left_to_remove = task.to_remove - task.removed_bytes
            done.add(id(task))
            task = None
    return [p for p in out if id(p) in done]
