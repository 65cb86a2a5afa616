"""Many jobs at once (issue 36): a real XCache with concurrent clients, ROOT-style scattered
partial reads and a slow origin link, checked against the cache's own block log.

One cache (XRootD 5.5.3, Debian's, and 6.2.1 from scripts/build-xrootd6: one run per version,
the module fixture parametrized as in test_xcache_real.py) in front of one origin in the lab's
network namespace (tests/python/support/xcache_real.py), the origin's replies limited by `tc htb` on the
namespace's `lo` (ORIGIN_LINK, 16 Mbit/s: a fetch takes long enough for others to wait on it);
six client processes (tests/python/support/xcache_lab_workload.py, the lab's workload in its planned
mode) read a Zipf-skewed set of files, half the reads ROOT-style (10-30 % of a file in 2-5
scattered ranges with "processing" between them), the others whole, four in ten on the file
one of the two reads before it took. The cache never purges (its filesystem holds every file),
so what it did is what its block log (`pfc.trace dump`, tests/python/support/xcache_blocklog.py) says:
which blocks each read found on disk, in flight, or had to fetch
(tests/python/support/xcache_blocktruth.py).

Checked, on one workload run per version: every read succeeded, concurrently, and reached the
cache's log; one collected access per read with the bytes within 0.5 %; the real cache's
observed hit efficiency (collect's verdict per open) within 0.01 of the truth; the `xcache`
model configured from the cache's own file (fetch times from `origin_rate` = the link's rate,
or from each access's duration) within 0.02 of the truth's hit ratio and closer to it than the
instant model. Printed, not checked (`pytest -s`, "figures ..."): delayed hits of the truth,
the real cache (collect's `observed_delayed_hits`) and the model. The truth has a few (2-3 of
200: it judges a read at its first request, when a scattered read's later ranges are not asked
for yet); collect as many or fewer (it counts only blocks an earlier open had surely asked for:
on one 5.5.3 run the same 2 reads as the truth, every read's verdict equal); the model many more
(12-20): it places each read at the file's start (the records carry no offsets), so a partial
read after a miss of the file overlaps its fetch. Issue 36's "within 10 %" for the model does
not hold; tests/python/support/xcache_busy_compare.py shows a kept run read by read.
Needs root, as test_xcache_real.py; about 3 minutes a version, so opt-in (marker
`concurrency`): with both versions it would take the suite past its 50 minutes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from support.xcache_blocktruth import Verdict, verdicts
from support.xcache_real import DEBIAN_XROOTD, MiB, CacheSetup, LabError, Plan, XCacheLab, XRootD, built_xrootd

pytestmark = [pytest.mark.xcache, pytest.mark.slow, pytest.mark.concurrency]

CLI = str(Path(sys.executable).parent / "cachescope")
BLOCKLOG = Path(__file__).resolve().parents[2] / "support" / "xcache_blocklog.py"
BLOCK = MiB  # pfc.blocksize 1m (xcache_real.CACHE_CFG)
FS_MIB = 320
CACHE = CacheSetup("busy", FS_MIB, "280m", "300m", 1097, (9951,), "XCacheBusy")
ORIGIN_LINK = "16mbit"
ORIGIN_RATE = "16Mbit/s"  # the same, as the model's origin_rate takes it
READS = 200
CLIENTS = 6
WORKLOAD = ["--clients", str(CLIENTS), "--partial-style", "root", "--partial", "0.5", "--xrdcp", "0",
            "--think", "0.2:1.5", "--co-read", "0.4:2", "--rate", "1.5", "--zipf", "1.0", "--seed", "36"]


def _files(n: int = 36, seed: int = 36) -> list[tuple[str, int]]:
    """Log-uniform 1-12 MiB, not whole numbers of blocks; all of them fit the cache at once."""
    import math
    import random

    rng = random.Random(seed)
    return [(f"/store/mc/XCacheBusy/TTbar/NANOAODSIM/v1/0000/file_{i:02d}.root",
             int(math.exp(rng.uniform(0, math.log(12))) * MiB) + rng.randrange(1, 4096)) for i in range(n)]


#: the versions the suite runs: Debian's and the one scripts/build-xrootd6 pins (as test_xcache_real.py)
VERSIONS = (DEBIAN_XROOTD.version, built_xrootd().version)


@dataclass
class BusyRun:
    xrootd: XRootD
    reads: list[dict]  # the clients' reads, by start time
    events: list[dict]  # what `cachescope collect --out` wrote
    truth: list[Verdict | None]  # per read, from the block log
    config: Path
    timings: dict[str, float] = field(default_factory=dict)
    stats: dict = field(default_factory=dict)  # `collect --stats`'s last line


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


#: read through the cache by the test itself, not the clients: the cache's logger writes its last
#: lines only when it logs more, so a read of this file pushes out the previous files' last lines
POKE = "/store/mc/XCacheBusy/poke/poke.root"


def _wait_closed(lab: XCacheLab, full_log: Path) -> None:
    """Until XrdPfc has ended every File object it made for the clients (5.5: `~File() close
    info`, its destructor begun; 6.x: `Close() finished`; one for each `Open()`): its g-stream record goes out then (a detach while
    blocks are still written is retried every 30 s). The cache's logger keeps its last lines
    until it logs again: when nothing changes, POKE is read. None for 120 s: LabError."""
    proc = lab.procs[CACHE.name].popen
    seen, since, poked = None, time.monotonic(), time.monotonic()
    while True:
        lines = [line for line in full_log.read_text(errors="replace").splitlines() if POKE not in line]
        opened = sum("Open() Creating new file info" in x or "Open() Reading existing info file" in x for x in lines)
        state = (opened, sum("~File() close info" in x or "Close() finished" in x for x in lines))
        if opened and state[1] >= opened:
            return
        if proc.poll() is not None:
            raise LabError(f"the cache exited ({proc.returncode}) with files open: see {full_log}")
        if state != seen:
            seen, since = state, time.monotonic()
        elif time.monotonic() - since > 120:
            raise LabError(f"the cache ended {state[1]} of {opened} files, none for 120 s: see {full_log}")
        elif time.monotonic() - poked > 5:
            subprocess.run(lab.inns(["xrdcp", "-f", "-s", f"root://127.0.0.1:{CACHE.port}/{POKE}", "/dev/null"]),
                           capture_output=True)
            poked = time.monotonic()
        time.sleep(0.5)


def _wait_events(out: Path, n: int, flush_s: float = 5.0) -> None:
    """Until `n` accesses are out, or three monitoring flushes brought nothing more."""
    last, since = -1, time.monotonic()
    while True:
        k = sum(POKE not in line for line in out.read_text().splitlines()) if out.exists() else 0
        if k >= n or time.monotonic() - since > 3 * flush_s:
            return
        if k != last:
            last, since = k, time.monotonic()
        time.sleep(0.5)


@pytest.fixture(scope="module", params=VERSIONS, ids=[f"xrootd-{v}" for v in VERSIONS])
def busy(request, tmp_path_factory) -> BusyRun:
    xrootd = DEBIAN_XROOTD if request.param == DEBIAN_XROOTD.version else built_xrootd()
    keep = tmp_path_factory.mktemp(f"xcache-busy-{xrootd.version}")
    lab = XCacheLab([CACHE], Plan([*_files(), (POKE, 8192)], []), xrootd=xrootd, origin_link_rate=ORIGIN_LINK,
                    full_log=True)
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    try:
        lab.prepare()
        config = keep / "busy.cfg"
        config.write_text(lab.config_path(CACHE.name).read_text())
        out = keep / "collect.jsonl"
        p = lab.spawn("collect", [CLI, "collect", "--listen", f"udp://127.0.0.1:{CACHE.udp[0]}", "--out", str(out),
                                  "--rejects", str(keep / "rejects.jsonl"), "--stats"])
        log = lab.root / "logs" / "collect.log"
        while not (log.exists() and "listening on" in log.read_text(errors="replace")):
            if p.poll() is not None:
                raise LabError(f"collect exited ({p.returncode}) before it listened: see {log}")
            time.sleep(0.1)
        lab.start_servers()
        timings["setup_s"] = time.monotonic() - t0
        reads = lab.run_clients(CACHE, READS, WORKLOAD, files=_files())
        (keep / "reads.json").write_text(json.dumps(reads))
        timings["workload_s"] = time.monotonic() - t0 - timings["setup_s"]
        full = lab.root / "logs" / f"{CACHE.name}.full.log"
        _wait_closed(lab, full)
        _wait_events(out, len(reads))
        code = lab.stop_process("collect")
        if code != 0:
            raise LabError(f"collect exited {code} on SIGTERM: see {log}")
        lab.stop_process(CACHE.name)  # its log complete
        subprocess.run(["gzip", "-k", "-1", str(full)], check=False)  # kept beside the results: the truth's source
        shutil.move(str(full) + ".gz", keep / "cache.full.log.gz")
        blocklog = keep / "blocklog.jsonl"
        with open(blocklog, "wb") as f:
            b = subprocess.run([sys.executable, str(BLOCKLOG), str(full), "--block-size", str(BLOCK)], stdout=f,
                               stderr=subprocess.PIPE, text=True)
        if b.returncode != 0:
            raise LabError(f"blocklog failed on {full}: {b.stderr.strip()[-300:]}")
        events = [e for e in _lines(out) if e["path"] != POKE]
        stats = [json.loads(x)["stats"] for x in log.read_text(errors="replace").splitlines() if x.startswith('{"stats"')]
        run = BusyRun(xrootd, reads, events, verdicts(blocklog, reads, BLOCK), config, timings, stats[-1] if stats else {})
    except LabError as e:
        pytest.fail(str(e), pytrace=False)
    finally:
        lab.stop()
        if (lab.root / "logs").is_dir():
            shutil.copytree(lab.root / "logs", keep / "logs", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.full.log"))
            for name in ("workload.csv",):
                if (lab.root / name).exists():
                    shutil.copy(lab.root / name, keep / name)
        lab.remove()
    run.timings["total_s"] = time.monotonic() - t0
    return run


def _truth_counts(run: BusyRun) -> dict:
    v = [t for t in run.truth if t is not None]
    return {"reads": len(v), "hits": sum(t.hit for t in v), "delayed_hits": sum(t.delayed for t in v)}


def _model(run: BusyRun, timing: str) -> dict:
    """The xcache model as the cache's file configures it, over the collected accesses in event
    order; fetch times from `origin_rate` (the link's rate) or from each access's duration."""
    from cachescope.simulation import CacheSpec, ShadowBank, ratios
    from cachescope.xrdpfc import param_value, read_config

    params = dict(read_config(run.config))
    if timing == "origin_rate":
        params["origin_rate"] = param_value("origin_rate", ORIGIN_RATE)
    rows = sorted(run.events, key=lambda e: (e["ts"], e["origin"], e["seq"]))
    col = {k: np.array([e[k] for e in rows], np.uint64) for k in ("file_id", "file_size", "bytes_read")}
    zeros = np.zeros(len(rows), np.uint8)
    durations = np.array([e.get("duration_us") or 0 for e in rows], np.uint64) if timing == "duration" else None
    bank = ShadowBank([CacheSpec("xcache", FS_MIB * MiB, params)], 2)
    bank.feed_totals(col["file_id"], col["file_size"], col["bytes_read"], zeros, zeros,
                     clock=np.array([e["ts"] / 1e6 for e in rows], np.float64), duration_us=durations)
    return ratios(bank.totals()[0].sum(axis=0))


def test_every_read_succeeded_concurrently_and_reached_the_cache_log(busy):
    assert len(busy.reads) == READS and all(r["status"] == "ok" for r in busy.reads)
    assert len({r["client"] for r in busy.reads}) == CLIENTS
    # reads overlapped: at some moment all the clients were reading at once, and some file was
    # read by two clients at once
    edges = sorted([(r["ts_start"], 1) for r in busy.reads] + [(r["ts_end"], -1) for r in busy.reads])
    assert max(np.cumsum([d for _, d in edges])) == CLIENTS
    assert any(a["path"] == b["path"] and b["ts_start"] < a["ts_end"]
               for i, a in enumerate(busy.reads) for b in busy.reads[i + 1:i + 8])
    assert sum(r["method"] == "partial" for r in busy.reads) >= READS * 2 // 5
    assert all(t is not None for t in busy.truth), [r["path"] for r, t in zip(busy.reads, busy.truth) if t is None]
    truth = _truth_counts(busy)
    observed = sum(bool(e["observed_hit"]) for e in busy.events) / len(busy.events)
    got, want = sum(e["bytes_read"] for e in busy.events), sum(r["bytes_read"] for r in busy.reads)
    print(f"figures busy {busy.xrootd.version} link {ORIGIN_LINK}: reads {len(busy.reads)}, truth hits "
          f"{truth['hits']} delayed hits {truth['delayed_hits']} (hit ratio {truth['hits'] / truth['reads']:.4f}); "
          f"real cache (collect): hits {sum(bool(e['observed_hit']) for e in busy.events)} delayed hits "
          f"{busy.stats.get('observed_delayed_hits')} (shared verdicts {busy.stats.get('shared_verdicts')}), "
          f"observed hit efficiency {observed:.4f}; collected {len(busy.events)} accesses, bytes {got} of {want} "
          f"({got / want - 1:+.4f}); {busy.timings}")


def test_collect_makes_one_access_per_concurrent_read(busy):
    """One access per read, the bytes within 0.5 % of what the clients read: a record covering
    several opens is split over the opens its served bytes match (collect's `_by_bytes`)."""
    got = sorted(e["path"] for e in busy.events)
    assert got == sorted(r["path"] for r in busy.reads)
    assert all(e["op"] == "read" and e["source"] == "xrootd-gstream" for e in busy.events)
    nbytes, want = sum(e["bytes_read"] for e in busy.events), sum(r["bytes_read"] for r in busy.reads)
    assert abs(nbytes / want - 1) <= 0.005


def test_the_real_cache_verdict_per_open_against_the_block_log(busy):
    """The real cache's hit efficiency from collect's verdict per open (the trace's offsets
    against the blocks on disk when the open came) within 0.01 of the block log's truth; an
    open that waited for another's fetch is not a hit. Its delayed hits are printed."""
    truth = _truth_counts(busy)
    observed = sum(e["observed_hit"] == 1 for e in busy.events)
    assert len(busy.events) == truth["reads"]
    assert 100 * abs(observed - truth["hits"]) <= truth["reads"]  # within 0.01, counted in reads


@pytest.mark.parametrize("timing", ["origin_rate", "duration"])
def test_xcache_model_from_the_cache_configuration_against_the_block_log(busy, timing):
    """The model with fetch times is within 0.02 of the truth's hit ratio, and closer than the
    instant model (whose blocks arrive at once: no delayed hits, too many hits). Its delayed hits
    are printed, not checked: it places every read at the file's start (the records carry no
    offsets), so concurrent scattered reads overlap in it far more than in the cache."""
    truth = _truth_counts(busy)
    model = _model(busy, timing)
    instant = _model(busy, "instant")
    ratio = truth["hits"] / truth["reads"]
    print(f"figures busy {busy.xrootd.version} model ({timing}): hit ratio {model['hit_ratio']:.4f} "
          f"delayed hits {model['delayed_hits']} (instant: {instant['hit_ratio']:.4f}, {instant['delayed_hits']}); "
          f"truth {ratio:.4f}, {truth['delayed_hits']}")
    assert model["requests"] == len(busy.events)
    # in reads, not floats: 0.02 of 200 reads is 4 reads (0.705 against 0.725 is within, though
    # its float difference is 0.020000000000000018)
    assert 50 * abs(model["hits"] - truth["hits"]) <= truth["reads"]
    assert abs(model["hits"] - truth["hits"]) < abs(instant["hits"] - truth["hits"])
    assert model["delayed_hits"] > 0 == instant["delayed_hits"]
