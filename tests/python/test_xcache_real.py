"""The real XCache (issue 27 §4): XRootD 5.5's caching proxy on this machine, its own monitoring
received by cachescope, and what cachescope says about it checked against what it did.

Two caches of one size (a 256 MiB tmpfs each) run side by side in front of one origin, in a
network namespace of their own (tests/python/xcache_real.py), and get the same reads
(tests/python/xcache_workload.py: two campaigns alternating between purges, Zipf-skewed, whole
and partial reads, past the high watermark): `ok` is sized as intended (`pfc.diskusage 80m
100m`), `small` is misconfigured (a tiny high watermark, `8m 16m`). Each cache's UDP monitoring
goes to two destinations: `cachescope collect --out` and `cachescope serve --store --collect`
(the live embedded pipeline, with a `real_below_shadow` rule whose shadow cache is the xcache model
configured from `ok`'s configuration file: what a cache of this size should do).

Needs root (tmpfs mounts, a network namespace) and Debian's XRootD (scripts/install-system-deps);
where it cannot run it fails with one line saying why (CI runs as root: it must run there).
About five minutes: four purge intervals of XrdPfc's 60 s minimum, plus its monitoring flush.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from xcache_real import MiB, CacheSetup, LabError, XCacheLab, make_plan

pytestmark = [pytest.mark.xcache, pytest.mark.slow]

CLI = str(Path(sys.executable).parent / "cachescope")
FS_MIB = 256
#: (collect --out, serve --collect) UDP ports and the API port inside the namespace, per cache
CACHES = (
    CacheSetup("ok", FS_MIB, "80m", "100m", 1095, (9931, 9941), "XCacheOK"),
    CacheSetup("small", FS_MIB, "8m", "16m", 1096, (9932, 9942), "XCacheSmall"),
)
HTTP = {"ok": 8081, "small": 8082}
#: the alert: the real cache's transfer efficiency this far below its shadow's, over 2 minutes
MARGIN = 0.12


@dataclass
class CacheRun:
    setup: CacheSetup
    config: Path  # the cache's own configuration file (a copy: the lab's directory goes)
    reads: list[dict]  # what the client did (xcache_workload.py's lines)
    events: list[dict]  # what `cachescope collect --out` wrote
    purges: list  # ingest.xrdpfc_log.Purge, from the cache's log
    store: Path  # what `cachescope serve --collect` wrote
    collect_log: str = ""
    serve_log: str = ""


@dataclass
class LiveRun:
    caches: dict[str, CacheRun]
    site_config: Path
    timings: dict[str, float] = field(default_factory=dict)


def _site_config(path: Path, ok_cfg: Path) -> None:
    """The pipeline every `serve --collect` runs: the xcache model as `ok` is configured, at the
    caches' size, and the rule that says when a real cache does worse than that."""
    path.write_text(json.dumps({
        "pipeline": {
            "shadow": {"policies": ["xcache"], "sizes": [f"{FS_MIB}MiB"], "xcache_config": str(ok_cfg)},
            "windows": {"efficiency": "1m", "max_out_of_orderness": "10s", "allowed_lateness": "5m"},
            "curve": {"enabled": False},
        },
        "alerts": {"defaults": False, "rules": [
            {"name": "xcache-below-shadow", "kind": "real_below_shadow", "policy": "xcache", "size": f"{FS_MIB}MiB",
             "margin": MARGIN, "over": "2m", "for": "0s", "warmup": "0s", "min_requests": 20}]},
    }))


def _wait_for(path: Path, text: str, proc, what: str) -> None:
    while not (path.exists() and text in path.read_text(errors="replace")):
        if proc.poll() is not None:
            raise LabError(f"{what} exited ({proc.returncode}) before it listened: see {path}")
        time.sleep(0.1)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _wait_records(lab: XCacheLab, outs: dict[str, Path], reads: dict[str, int], flush_s: float = 5.0) -> None:
    """Until each cache's records have reached `collect`: XrdPfc sends a file's g-stream record when
    the file's last reader detaches (the log's `DetachFinalize()`; XRootD defers a detach while
    blocks are still being written, by up to its 30 s retry) and its monitoring buffers are sent
    every `flush` (5 s), not on SIGTERM. So: every read's detach in the log, then the events, or
    three flushes in which nothing more came."""
    for name, out in outs.items():
        log = lab.log_path(name)
        while log.read_text(errors="replace").count("DetachFinalize()") < reads[name]:
            time.sleep(0.5)
        last, since = -1, time.monotonic()
        while True:
            n = len(out.read_text().splitlines()) if out.exists() else 0
            if n >= reads[name] or time.monotonic() - since > 3 * flush_s:
                break
            if n != last:
                last, since = n, time.monotonic()
            time.sleep(0.5)


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveRun:
    keep = tmp_path_factory.mktemp("xcache-live")
    lab = XCacheLab(CACHES, make_plan())
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    try:
        lab.prepare()
        configs = {}
        for c in CACHES:
            configs[c.name] = keep / f"{c.name}.cfg"
            configs[c.name].write_text(lab.config_path(c.name).read_text())
        site = keep / "site.yaml"
        _site_config(site, configs["ok"])
        receivers = []
        for c in CACHES:
            out = keep / f"collect-{c.name}.jsonl"
            p = lab.spawn(f"collect-{c.name}", [CLI, "collect", "--listen", f"udp://127.0.0.1:{c.udp[0]}",
                                                "--out", str(out), "--rejects", str(keep / f"rejects-{c.name}.jsonl"),
                                                "--stats"])
            receivers.append((lab.root / "logs" / f"collect-{c.name}.log", "listening on", p, f"collect ({c.name})"))
            p = lab.spawn(f"serve-{c.name}", [CLI, "serve", "--store", str(keep / f"store-{c.name}"), "--collect",
                                              f"udp://127.0.0.1:{c.udp[1]}", "--config", str(site), "--host",
                                              "127.0.0.1", "--port", str(HTTP[c.name])])
            receivers.append((lab.root / "logs" / f"serve-{c.name}.log", "collecting", p, f"serve --collect ({c.name})"))
        for log, text, p, what in receivers:
            _wait_for(log, text, p, what)
        lab.start_servers()
        timings["setup_s"] = time.monotonic() - t0
        reads = lab.run_workload()
        timings["workload_s"] = time.monotonic() - t0 - timings["setup_s"]
        per_cache = {c.name: [r for r in reads if r["cache"] == c.name] for c in CACHES}
        outs = {c.name: keep / f"collect-{c.name}.jsonl" for c in CACHES}
        _wait_records(lab, outs, {n: len(r) for n, r in per_cache.items()})
        timings["records_wait_s"] = time.monotonic() - t0 - timings["setup_s"] - timings["workload_s"]
        codes = {}
        for c in CACHES:  # SIGTERM: each writes what it received (serve: closes its windows) and exits 0
            codes[f"collect-{c.name}"] = lab.stop_process(f"collect-{c.name}")
            codes[f"serve-{c.name}"] = lab.stop_process(f"serve-{c.name}")
        runs = {}
        for c in CACHES:
            runs[c.name] = CacheRun(
                c, configs[c.name], per_cache[c.name], _lines(outs[c.name]), lab.purges(c.name),
                keep / f"store-{c.name}",
                collect_log=(lab.root / "logs" / f"collect-{c.name}.log").read_text(errors="replace"),
                serve_log=(lab.root / "logs" / f"serve-{c.name}.log").read_text(errors="replace"))
        bad = {k: v for k, v in codes.items() if v != 0}
        if bad:
            name = next(iter(bad))
            raise LabError(f"{name} exited {bad[name]} on SIGTERM: {getattr(runs.get(name.split('-')[1]), name.split('-')[0] + '_log', '')[-400:]}")
    except LabError as e:
        lab.stop()
        pytest.fail(str(e), pytrace=False)
    finally:
        lab.stop()
        for name in ("ok", "small"):  # the caches' logs outlive the lab, for a failure's report
            if lab.log_path(name).exists():
                (keep / f"{name}.log").write_text(lab.log_path(name).read_text(errors="replace"))
        lab.remove()
    timings["total_s"] = time.monotonic() - t0
    return LiveRun(runs, site, timings)


# ---------------------------------------------------------------------------------------------


def test_the_workload_went_past_the_high_watermark_across_purges(live):
    """The experiment itself: every read succeeded and kept clear of the purges, and both caches
    went past their high watermark, the well-sized one purging down to its low watermark at least
    twice during the reads, the misconfigured one purging everything it could at every purge."""
    for run in live.caches.values():
        assert all(r["status"] == "ok" for r in run.reads)
        assert all(r["purges"] == [r["round"] + 1] * 2 for r in run.reads), "a read overlapped a purge"
    ok, small = live.caches["ok"], live.caches["small"]
    during = len(make_plan().rounds)  # purges 0 .. rounds-1 ran before the last round's reads
    removing = [p for p in ok.purges[:during] if p.removed > 0]
    assert len(removing) >= 2, [(p.used_disk, p.removed_bytes) for p in ok.purges]
    assert all(p.left_to_remove <= 0 for p in removing)  # down to the low watermark
    assert sum(p.protected > 0 for p in small.purges[:during]) >= 2


def test_every_client_read_is_one_collected_access(live):
    for name, run in live.caches.items():
        got = sorted((e["path"], e["bytes_read"]) for e in run.events)
        want = sorted((r["path"], r["got"]) for r in run.reads)
        assert len(got) == len(want), f"{name}: {len(got)} collected accesses for {len(want)} client reads"
        assert got == want, name
        assert sum(e["bytes_read"] for e in run.events) == sum(r["got"] for r in run.reads)
        assert {e["site"] for e in run.events} == {run.setup.site}
        # event times come from the records: each access within its read's second
        assert all(e["op"] == "read" for e in run.events)
