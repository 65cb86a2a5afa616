"""ingest/xrdpfc_log.py: XrdPfc's purge runs from a real XCache's log (the lab's captures, XRootD 5.5.3)."""

from __future__ import annotations

import datetime as dt
import gzip
import json

import pytest

from ingest.xrdpfc_log import Purge, RemovedFile, parse_purges

UTC = dt.timezone.utc


@pytest.mark.parametrize("run", ["run1-default", "run2-prefetch0", "run3-prefetch0-asyncoff"])
def test_purges_of_the_lab_runs(shared_dir, run):
    """Every purge of the capture's log, as the lab's own reading of it (purges.jsonl) has it."""
    base = shared_dir / "xcache-lab" / "captures" / run
    with gzip.open(base / "cache-log-purge-config.txt.gz", "rt") as f:
        got = parse_purges(f, tz=UTC)
    want = [json.loads(line) for line in (base / "purges.jsonl").read_text().splitlines()]
    assert len(got) == len(want) > 0
    for p, w in zip(got, want):
        assert p.start == dt.datetime.fromisoformat(w["start"]).replace(tzinfo=UTC)
        assert (p.used_disk, p.files_bytes, p.protected, p.removed, p.removed_bytes, p.left_to_remove) == (
            w.get("used_disk"), w.get("files_bytes"), w["protected"], w["removed"], w["removed_bytes"],
            w["left_to_remove"])
        assert [[f.lfn, f.bytes, f.atime] for f in p.files] == w["files"]
        # dump level: one line per removed data file, summing to the Finished line's total
        assert len(p.files) == p.removed and sum(f.bytes for f in p.files) == p.removed_bytes
        assert p.to_remove == p.removed_bytes + p.left_to_remove


def test_a_purge_read_from_its_lines():
    log = """\
261127 08:54:45 22854 XrdPfc_Cache: info Purge() Started.
261127 08:54:45 22854 XrdPfc_Cache: debug Purge() used disk space 1689808896 bytes.
261127 08:54:45 22854 XrdPfc_File: dump Prefetch enter to check download status, in between the purge's lines
261127 08:54:45 22854 XrdPfc_Cache: debug Purge() actual usage by files 1747976192 bytes.
\tbytes_to_remove         = 1532522496 B
261127 08:54:45 22854 XrdPfc_Cache: debug Purge() File is active or purge-protected: /store/b.root size: 3145728
261127 08:54:45 22854 XrdPfc_Cache: dump Purge() Removed file: '/store/a.root.cinfo' size: 119
261127 08:54:45 22854 XrdPfc_Cache: dump Purge() Removed file: '/store/a, (b).root' size: 2097152, time: 1795770150
261127 08:54:45 22854 XrdPfc_Cache: info Purge() Encountered 1 protected files, sum of their size: 3145728
261127 08:54:46 22854 XrdPfc_Cache: info Purge() Finished, removed 1 data files, total size 2097152, bytes to remove at end 1530425344, purge duration 1
261127 08:55:46 22854 XrdPfc_Cache: info Purge() Started.
261127 08:55:46 22854 XrdPfc_Cache: debug Purge() used disk space 1689808896 bytes.
"""
    got = parse_purges(log.splitlines(keepends=True), tz=UTC)
    # the second run has no Finished line (a log cut short): not a purge yet
    assert got == [Purge(start=dt.datetime(2026, 11, 27, 8, 54, 45, tzinfo=UTC), used_disk=1689808896,
                         files_bytes=1747976192, to_remove=1532522496, protected=1, protected_bytes=3145728,
                         removed=1, removed_bytes=2097152, left_to_remove=1530425344, duration_s=1,
                         files=[RemovedFile("/store/a, (b).root", 2097152, 1795770150)])]
    assert got[0].start_ts == 1795769685.0


def test_log_times_in_the_machines_zone_by_default():
    line = "261127 08:54:45 1 XrdPfc_Cache: info Purge() Started.\n"
    end = "261127 08:54:45 1 XrdPfc_Cache: info Purge() Finished, removed 0 data files, total size 0, bytes to remove at end 0, purge duration 0\n"
    (p,) = parse_purges([line, end])
    assert p.start == dt.datetime(2026, 11, 27, 8, 54, 45).astimezone()


def _resmon_fixture() -> list[str]:
    from support.data import FIXTURES

    return (FIXTURES / "xrdpfc_6.2.1_resmon.log").read_text().splitlines(keepends=True)


def test_a_6x_cache_log_gives_one_purge_per_check():
    """XRootD 6.2.1's layout (XrdPfc_ResourceMonitor, a check every 60 s with `purgeinterval 300s`):
    each check is a purge run; removed files with their 4 KiB-page sizes and .cinfo times."""
    got = parse_purges(_resmon_fixture(), tz=UTC)
    assert [p.start.strftime("%H:%M:%S") for p in got] == ["22:31:36", "22:32:36", "22:33:36", "22:34:36"]
    first, protected, removing = got[0], got[1], got[2]
    assert (first.used_disk, first.to_remove, first.removed, first.left_to_remove) == (None, 0, 0, 0)
    # over the high watermark, every file opened since the previous check: all protected
    assert (protected.used_disk, protected.files_bytes, protected.to_remove) == (41930752, 41861120, 33542144)
    assert (protected.removed, protected.protected, protected.left_to_remove) == (0, 15, 33542144)
    assert removing.removed == len(removing.files) == 15 and removing.protected == 17
    assert sum(f.bytes for f in removing.files) == removing.removed_bytes == 41861120
    assert removing.left_to_remove == removing.to_remove - removing.removed_bytes
    assert all(f.bytes % 4096 == 0 and not f.lfn.endswith(".cinfo") for f in removing.files)
    assert removing.files[0] == RemovedFile("/store/mc/XCacheLive/Tail/AODSIM/v1/0000/tail_00.root", 1290240,
                                            1796164297)
    # oldest first by the .cinfo's mtime
    assert [f.atime for f in removing.files] == sorted(f.atime for f in removing.files)


def test_6x_reading_agrees_with_the_labs_reader(shared_dir):
    """The lab's own reader (shared/xcache-lab/purges.py, written against the same cache) reads the
    same numbers from the same lines."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("lab_purges", shared_dir / "xcache-lab" / "purges.py")
    lab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lab)
    lines = _resmon_fixture()
    want, got = lab.resmon_purges(lines), parse_purges(lines, tz=UTC)
    assert len(got) == len(want) == 4
    for p, w in zip(got, want):
        assert p.start == dt.datetime.fromisoformat(w["start"]).replace(tzinfo=UTC)
        assert (p.used_disk, p.files_bytes, p.protected, p.removed, p.removed_bytes, p.left_to_remove) == (
            w.get("used_disk"), w.get("files_bytes"), w["protected"], w["removed"], w["removed_bytes"],
            w["left_to_remove"])
        assert [[f.lfn, f.bytes, f.atime] for f in p.files] == w["files"]


def test_a_6x_check_cut_short_or_waiting_for_a_running_task():
    head = "261201 22:40:00 7 XrdPfc_ResourceMonitor: "
    lines = [head + "debug perform_purge_check() Purge check:\n",
             head + "debug Disk usage: 2000 exceed highWatermark.\n",
             head + "debug \tbytes_to_remove   = 1000 B\n",
             head + "warning perform_purge_check() purge required but previous purge task is still active!\n",
             head + "debug perform_purge_check() Purge check:\n",
             head + "info perform_purge_check() scheduling purge task.\n"]  # its task never ends: not returned
    (p,) = parse_purges(lines, tz=UTC)
    assert (p.used_disk, p.to_remove, p.removed, p.left_to_remove) == (2000, 1000, 0, 1000)
