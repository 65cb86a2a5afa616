"""Synthetic but realistic grid-storage workloads, written in the real log formats.

`make_workload(...)` draws the accesses (the ground truth, numpy columns); `render(fmt, w)`
writes them as the lines that format's producer would write. Deterministic for a seed.

The model, per VO (each site serves both, mostly one):
ATLAS  HITS     pileup library replicated at every site, re-read by pileup jobs (uniform draws)
       EVNT     small library read by simulation jobs
       AOD      large catalogue read rarely (about 1.3 reads per file), 2-6 GB, many above 4 GiB
       DAOD_PHYS / DAOD_PHYSLITE  datasets born during the period (written), hot when new and
                fading over days (popularity shifts), some deleted; 60% of reads partial
       USER     user outputs written in bursts, read a few times within hours, often deleted
       log      job log tarballs, written, rarely read
       RAW      a few large reads
CMS    MINIAODSIM / MINIAOD, NANOAODSIM / NANOAOD datasets with shifting popularity, partial
       MINIAOD reads; AODSIM rare and large; PREMIX pileup library (Neutrino_E-10_gun, 4-10 GB)
       read in random 5-15% chunks; /store/user bursts as for ATLAS.
XCache observations (xrootd-gstream, xcache-reporter): an LRU cache per (site, cache server)
holding 20% of its working set, caching the bytes actually read per file, 1% bypass.
"""

from __future__ import annotations

import io
import math
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Iterator, TextIO

import numpy as np
import orjson

from cachescope.tiers import rucio_hash

OP_READ, OP_WRITE, OP_DELETE = 0, 1, 2
DAY_US = 86_400_000_000
HOUR_US = 3_600_000_000

ATLAS_SITES = ["MWT2", "AGLT2", "BNL-ATLAS", "SWT2_CPB", "DESY-HH", "LRZ-LMU", "UKI-SOUTHGRID-OX-HEP", "TOKYO-LCG2"]
CMS_SITES = ["T2_US_Nebraska", "T2_CH_CERN", "T1_US_FNAL", "T2_DE_DESY", "T2_IT_Pisa", "T2_UK_London_IC"]
SITE_DOMAINS = {
    "MWT2": "mwt2.org", "AGLT2": "aglt2.org", "BNL-ATLAS": "usatlas.bnl.gov", "SWT2_CPB": "uta.edu",
    "DESY-HH": "desy.de", "LRZ-LMU": "lrz.de", "UKI-SOUTHGRID-OX-HEP": "physics.ox.ac.uk",
    "TOKYO-LCG2": "icepp.jp", "T2_US_Nebraska": "unl.edu", "T2_CH_CERN": "cern.ch", "T1_US_FNAL": "fnal.gov",
    "T2_DE_DESY": "desy.de", "T2_IT_Pisa": "pi.infn.it", "T2_UK_London_IC": "ic.ac.uk",
}
GIB = 2**30
MIB = 2**20


@dataclass
class Catalogue:
    """Files of the workload: canonical (normalised) path and naming parts per file."""

    path: list[str]  # normalised: /atlas/rucio/<scope>/<h1>/<h2>/<name> or /store/...
    vo: np.ndarray  # 0 atlas, 1 cms
    tier: list[str]
    size: np.ndarray  # uint64
    scope: list[str]  # rucio scope ("cms" for CMS)
    name: list[str]  # rucio name (the LFN for CMS)


@dataclass
class Workload:
    """Ground truth: one row per access, sorted by ts."""

    ts: np.ndarray  # int64 UTC us, start of the access
    duration: np.ndarray  # int64 us
    file: np.ndarray  # int64 index into catalogue
    op: np.ndarray  # uint8
    bytes_read: np.ndarray  # uint64 (writes: bytes written; deletes: 0)
    site: np.ndarray  # int64 index into sites
    server: np.ndarray  # int64 storage server (pool/file server) index within the site
    cache_server: np.ndarray  # int64 XCache server index within the site
    client: np.ndarray  # int64 worker-node index within the site
    bypass: np.ndarray  # bool: the XCache read bypasses the cache
    catalogue: Catalogue
    sites: list[str]
    n_servers: int
    seed: int
    start_us: int
    days: float
    _observed: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ts)

    def observed(self, cache_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """XCache hit/miss/bypass bytes of every read (LRU per site and cache server)."""
        if self._observed is None:
            self._observed = _simulate_xcache(self, cache_fraction)
        return self._observed


# ---------------------------------------------------------------------------------------------
# the model


def _uuid(rng: np.random.Generator, n: int) -> list[str]:
    words = rng.integers(0, 2**32, size=(n, 5), dtype=np.uint64)
    return [
        f"{a:08X}-{b & 0xFFFF:04X}-{c & 0xFFFF:04X}-{d & 0xFFFF:04X}-{e:08X}{(a ^ e) & 0xFFFF:04X}"
        for a, b, c, d, e in words.tolist()
    ]


def _sizes(rng: np.random.Generator, n: int, median: float, sigma: float, lo: float, hi: float) -> np.ndarray:
    s = rng.lognormal(math.log(median), sigma, size=n)
    return np.clip(s, lo, hi).astype(np.uint64)


class _Builder:
    """Accumulates files and accesses; each category adds both."""

    def __init__(self, rng: np.random.Generator, start_us: int, span_us: int, n_sites: int, site_atlas: np.ndarray):
        self.rng = rng
        self.start = start_us
        self.span = span_us
        self.n_sites = n_sites
        self.site_atlas = site_atlas  # per site: fraction of ATLAS accesses
        self.paths: list[str] = []
        self.vo: list[np.ndarray] = []
        self.tiers: list[str] = []
        self.sizes: list[np.ndarray] = []
        self.scopes: list[str] = []
        self.names: list[str] = []
        self.file_site: list[np.ndarray] = []  # -1: replicated, any site of the VO
        self.acc: list[tuple[np.ndarray, ...]] = []  # (ts, file, op, bytes)

    # -- files

    def add_files(self, vo: int, tier: str, paths: list[str], scopes: list[str], names: list[str],
                  sizes: np.ndarray, replicated: bool = False) -> np.ndarray:
        first = len(self.paths)
        n = len(paths)
        self.paths.extend(paths)
        self.tiers.extend([tier] * n)
        self.scopes.extend(scopes)
        self.names.extend(names)
        self.vo.append(np.full(n, vo, dtype=np.int8))
        self.sizes.append(sizes.astype(np.uint64))
        if replicated:
            self.file_site.append(np.full(n, -1, dtype=np.int64))
        else:
            weights = self.site_atlas if vo == 0 else 1.0 - self.site_atlas
            self.file_site.append(self.rng.choice(self.n_sites, size=n, p=weights / weights.sum()))
        return np.arange(first, first + n, dtype=np.int64)

    def atlas_files(self, tier: str, scopes: list[str], n: int, sizes: np.ndarray, per_task: int = 200,
                    replicated: bool = False, name_fmt: str = "{tier}.{task:08d}._{part:06d}.pool.root.1") -> np.ndarray:
        rng = self.rng
        tasks = rng.integers(10_000_000, 45_000_000, size=max(1, n // per_task + 1))
        paths, sc, names = [], [], []
        scope_idx = rng.integers(0, len(scopes), size=len(tasks))
        for i in range(n):
            t = i // per_task
            scope = scopes[scope_idx[t]]
            name = name_fmt.format(tier=tier, task=int(tasks[t]), part=i % per_task + 1)
            h = rucio_hash(scope, name)
            sp = scope.replace(".", "/") if scope.startswith(("user.", "group.")) else scope
            paths.append(f"/atlas/rucio/{sp}/{h[:2]}/{h[2:]}/{name}")
            sc.append(scope)
            names.append(name)
        tier_label = "log" if tier == "log" else tier
        return self.add_files(0, tier_label, paths, sc, names, sizes, replicated)

    def cms_files(self, tier: str, kind: str, n: int, sizes: np.ndarray, primaries: list[str], eras: list[str],
                  per_ds: int = 100, replicated: bool = False) -> np.ndarray:
        rng = self.rng
        uuids = _uuid(rng, n)
        n_ds = max(1, n // per_ds + 1)
        prim = rng.integers(0, len(primaries), size=n_ds)
        era = rng.integers(0, len(eras), size=n_ds)
        ver = rng.integers(1, 4, size=n_ds)
        block = rng.integers(10000, 99999, size=n_ds)
        paths = []
        for i in range(n):
            d = i // per_ds
            paths.append(f"/store/{kind}/{eras[era[d]]}/{primaries[prim[d]]}/{tier}/"
                         f"{eras[era[d]]}_v{ver[d]}-v{ver[d]}/{block[d]}/{uuids[i]}.root")
        return self.add_files(1, tier, paths, ["cms"] * n, paths, sizes, replicated)

    # -- accesses

    def times(self, n: int) -> np.ndarray:
        """Start times over the period with a day/night cycle (busier in the afternoon)."""
        rng = self.rng
        t = rng.random(n) * self.span
        hour = (t % DAY_US) / HOUR_US
        keep = rng.random(n) < 0.55 + 0.45 * np.sin((hour - 8) / 24 * 2 * np.pi) ** 2
        t = np.where(keep, t, rng.random(n) * self.span)
        return (self.start + t).astype(np.int64)

    def add(self, ts: np.ndarray, files: np.ndarray, op: int, nbytes: np.ndarray) -> None:
        self.acc.append((ts.astype(np.int64), files.astype(np.int64), np.full(len(ts), op, np.uint8),
                         nbytes.astype(np.uint64)))

    def reads(self, ts: np.ndarray, files: np.ndarray, partial_p: float, lo: float, hi: float) -> None:
        sizes = np.concatenate(self.sizes)[files] if self.sizes else np.zeros(0, np.uint64)
        frac = np.where(self.rng.random(len(files)) < partial_p, self.rng.uniform(lo, hi, len(files)), 1.0)
        nbytes = np.maximum(1, (sizes * frac).astype(np.uint64))
        self.add(ts, files, OP_READ, np.minimum(nbytes, sizes))


def _library(b: _Builder, files: np.ndarray, n: int, partial_p=0.0, lo=1.0, hi=1.0) -> None:
    if n <= 0 or len(files) == 0:
        return
    picks = files[b.rng.integers(0, len(files), size=n)]
    b.reads(b.times(n), picks, partial_p, lo, hi)


def _datasets(b: _Builder, files: np.ndarray, per_ds: int, n_reads: int, partial_p: float, lo: float,
              hi: float, born_frac: float = 0.4, die_frac: float = 0.2, tau_days: float = 3.0) -> int:
    """Datasets born (written) during the period, hot when new, fading; some deleted. Returns writes+deletes."""
    rng = b.rng
    n_ds = max(1, len(files) // per_ds)
    ds_of = np.minimum(np.arange(len(files)) // per_ds, n_ds - 1)
    span_days = b.span / DAY_US
    born = np.where(rng.random(n_ds) < born_frac, rng.random(n_ds) * span_days * 0.8,
                    -rng.random(n_ds) * 20.0)  # days from the start; negative: before the period
    dies = np.where(rng.random(n_ds) < die_frac, born + rng.uniform(2.0, 10.0, n_ds), np.inf)
    dies = np.where(dies > span_days, np.inf, dies)
    base = rng.pareto(1.2, n_ds) + 0.05  # heavy-tailed dataset popularity
    extra = 0
    # writes of the datasets born in the period, deletes of those that die in it
    sizes_all = np.concatenate(b.sizes)
    born_in = born >= 0
    wfiles = files[born_in[ds_of]]
    if len(wfiles):
        wts = b.start + (born[ds_of[born_in[ds_of]]] * DAY_US).astype(np.int64) + rng.integers(0, HOUR_US, len(wfiles))
        b.add(wts, wfiles, OP_WRITE, sizes_all[wfiles])
        extra += len(wfiles)
    die_in = np.isfinite(dies)
    dfiles = files[die_in[ds_of]]
    if len(dfiles):
        dts = b.start + (dies[ds_of[die_in[ds_of]]] * DAY_US).astype(np.int64) + rng.integers(0, HOUR_US, len(dfiles))
        b.add(dts, dfiles, OP_DELETE, np.zeros(len(dfiles), np.uint64))
        extra += len(dfiles)
    # reads, day by day: weight = base * exp(-(age)/tau) while alive
    n_days = max(1, int(math.ceil(span_days)))
    day_counts = rng.multinomial(n_reads, np.full(n_days, 1.0 / n_days))
    for d, count in enumerate(day_counts):
        if count == 0:
            continue
        t0 = d + 0.5
        alive = (born + 0.05 <= t0) & (t0 < dies)
        if not alive.any():
            continue  # the libraries take these reads
        w = np.where(alive, base * np.exp(-np.maximum(0.0, t0 - born) / tau_days), 0.0)
        if w.sum() <= 0:
            continue
        ds = rng.choice(n_ds, size=count, p=w / w.sum())
        lo_i = ds * per_ds
        hi_i = np.where(ds == n_ds - 1, len(files), lo_i + per_ds)
        picks = files[lo_i + (rng.random(count) * (hi_i - lo_i)).astype(np.int64)]
        day_start = b.start + d * DAY_US
        start_of_life = b.start + (np.maximum(born[ds], d) * DAY_US).astype(np.int64) + HOUR_US
        end_of_life = np.minimum(b.start + b.span, np.minimum(day_start + DAY_US,
                                 np.where(np.isfinite(dies[ds]), b.start + dies[ds] * DAY_US, np.inf))).astype(np.int64)
        lo_t = np.maximum(day_start, start_of_life)
        hi_t = np.maximum(lo_t + 1, end_of_life - 1)
        ts = lo_t + (rng.random(count) * (hi_t - lo_t)).astype(np.int64)
        b.reads(ts, picks, partial_p, lo, hi)
    return extra


def _user_bursts(b: _Builder, vo: int, n_reads: int, n_sites: int) -> int:
    """Users write outputs, read them a few times within hours, often delete them days later."""
    rng = b.rng
    if n_reads <= 0:
        return 0
    reads_per_file = 3.0
    n_files = max(1, int(n_reads / reads_per_file))
    sizes = _sizes(rng, n_files, 300 * MIB, 0.9, 5 * MIB, 6 * GIB)
    if vo == 0:
        users = [f"user.{u}" for u in ("jdoe", "cchlg", "babwuzqo", "galhardo", "mzhang", "akumar", "lbianchi",
                                       "smueller", "tkato", "rlopez")]
        scope_for = rng.integers(0, len(users), size=n_files)
        paths, scopes, names = [], [], []
        tasks = rng.integers(30_000_000, 45_000_000, size=n_files // 20 + 1)
        for i in range(n_files):
            scope = users[scope_for[i]]
            name = f"{scope}.{int(tasks[i // 20])}._{i % 20 + 1:06d}.tree.root"
            h = rucio_hash(scope, name)
            paths.append(f"/atlas/rucio/{scope.replace('.', '/')}/{h[:2]}/{h[2:]}/{name}")
            scopes.append(scope)
            names.append(name)
        files = b.add_files(0, "USER", paths, scopes, names, sizes)
    else:
        users = ("ewv", "fanzago", "mmarionn", "jdoe", "kpedro", "alintern")
        uid = rng.integers(0, len(users), size=n_files)
        uu = _uuid(rng, n_files)
        paths = [f"/store/user/{users[uid[i]]}/ntuples/crab_job_{i // 25}/{uu[i]}.root" for i in range(n_files)]
        files = b.add_files(1, "USER", paths, ["cms"] * n_files, paths, sizes)
    t_write = b.times(n_files)
    b.add(t_write, files, OP_WRITE, sizes)
    weights = rng.gamma(2.0, 1.0, size=n_files)
    per = rng.multinomial(n_reads, weights / weights.sum())
    rfiles = np.repeat(files, per)
    rts = np.repeat(t_write, per) + rng.integers(10 * 60_000_000, 12 * HOUR_US, size=len(rfiles))
    inside = rts < b.start + b.span  # a burst that would run past the period is cut there
    b.reads(rts[inside], rfiles[inside], 0.2, 0.3, 0.9)
    deleted = rng.random(n_files) < 0.5
    dts = t_write[deleted] + rng.integers(DAY_US, 5 * DAY_US, size=int(deleted.sum()))
    inside = dts < b.start + b.span
    b.add(dts[inside], files[deleted][inside], OP_DELETE, np.zeros(int(inside.sum()), np.uint64))
    return n_files + int(inside.sum())


def make_workload(events: int = 100_000, *, days: float = 7.0, sites: int = 2, servers: int = 4, seed: int = 1,
                  start: datetime | None = None) -> Workload:
    """Exactly `events` accesses (reads, writes, deletes) over `days` at `sites` sites."""
    if events <= 0 or days <= 0 or sites <= 0 or servers <= 0:
        raise ValueError("events, days, sites and servers must be positive")
    rng = np.random.default_rng(seed)
    start_dt = start or datetime(2024, 1, 1, tzinfo=timezone.utc)
    start_us = int(start_dt.timestamp()) * 1_000_000
    span_us = int(days * DAY_US)
    site_names = _site_names(sites)
    site_atlas = np.array([0.8 if i % 2 == 0 else 0.2 for i in range(sites)])
    if sites == 1:
        site_atlas[:] = 0.5
    b = _Builder(rng, start_us, span_us, sites, site_atlas)
    atlas_share = float(site_atlas.mean())
    n = events
    # categories with writes and deletes first; the read-only libraries then fill up to `events`
    reads_target = int(n * 0.9)
    a_reads = int(reads_target * atlas_share)
    c_reads = reads_target - a_reads

    def sizes(count: int, median: float, sigma: float, lo: float, hi: float) -> np.ndarray:
        return _sizes(rng, count, median, sigma, lo, hi)

    # ATLAS: DAOD datasets (born, hot, fading, some deleted), user bursts, job logs
    mc = ["mc16_13TeV", "mc20_13TeV", "mc23_13p6TeV"]
    data = ["data18_13TeV", "data22_13p6TeV", "data23_13p6TeV"]
    n_daod = max(40, int(a_reads * 0.35 / 6))
    n_phys = n_daod // 2
    daod = b.atlas_files("DAOD_PHYS", mc + data, n_phys, sizes(n_phys, 2.2 * GIB, 0.5, 50 * MIB, 9 * GIB), per_task=40)
    lite = b.atlas_files("DAOD_PHYSLITE", mc + data, n_daod - n_phys,
                         sizes(n_daod - n_phys, 600 * MIB, 0.5, 20 * MIB, 3 * GIB), per_task=40)
    _datasets(b, daod, 40, int(a_reads * 0.35 * 0.5), 0.6, 0.05, 0.6)
    _datasets(b, lite, 40, int(a_reads * 0.35 * 0.5), 0.6, 0.1, 0.8)
    _user_bursts(b, 0, int(a_reads * 0.12), sites)
    n_logs = max(1, int(n * 0.02 * atlas_share))
    logs = b.atlas_files("log", mc, n_logs, sizes(n_logs, 20 * MIB, 0.6, MIB, 200 * MIB), per_task=500)
    b.add(b.times(n_logs), logs, OP_WRITE, np.concatenate(b.sizes)[logs])

    # CMS: MINIAOD / NANOAOD datasets, user bursts
    primaries = ["TTToSemiLeptonic_TuneCP5_13TeV-powheg-pythia8", "DYJetsToLL_M-50_TuneCP5_13TeV-madgraphMLM-pythia8",
                 "WJetsToLNu_TuneCP5_13TeV-madgraphMLM-pythia8", "GluGluHToGG_M125_TuneCP5_13TeV-amcatnloFXFX-pythia8"]
    eras = ["RunIISummer20UL18MiniAODv2", "Run3Summer22MiniAODv4", "Run3Summer23NanoAODv12"]
    n_mini = max(40, int(c_reads * 0.30 / 5))
    mini = b.cms_files("MINIAODSIM", "mc", n_mini, sizes(n_mini, 2.8 * GIB, 0.4, 100 * MIB, 8 * GIB), primaries, eras)
    n_nano = max(40, int(c_reads * 0.25 / 8))
    n_nano_mc = n_nano // 2
    nano_mc = b.cms_files("NANOAODSIM", "mc", n_nano_mc, sizes(n_nano_mc, 1.2 * GIB, 0.4, 50 * MIB, 4 * GIB),
                          primaries, eras)
    nano_data = b.cms_files("NANOAOD", "data", n_nano - n_nano_mc,
                            sizes(n_nano - n_nano_mc, 1.0 * GIB, 0.4, 50 * MIB, 4 * GIB),
                            ["JetMET0", "Muon0", "EGamma1"], ["Run2023C", "Run2023D", "Run2024F"])
    _datasets(b, mini, 100, int(c_reads * 0.30), 0.7, 0.3, 0.9)
    _datasets(b, nano_mc, 100, int(c_reads * 0.125), 0.2, 0.5, 1.0)
    _datasets(b, nano_data, 100, int(c_reads * 0.125), 0.2, 0.5, 1.0)
    _user_bursts(b, 1, int(c_reads * 0.10), sites)

    # read-only libraries take the rest of the budget so the total is exactly `events`
    remaining = n - sum(len(a[0]) for a in b.acc)
    if remaining < 0:
        raise ValueError(f"{events} events are too few for this model; use at least {events - remaining}")
    lib_weights = {"HITS": 0.18 * atlas_share, "EVNT": 0.05 * atlas_share, "AOD": 0.10 * atlas_share,
                   "RAW": 0.02 * atlas_share, "PREMIX": 0.20 * (1 - atlas_share), "AODSIM": 0.08 * (1 - atlas_share)}
    total_w = sum(lib_weights.values())
    counts = dict(zip(lib_weights, rng.multinomial(remaining, [v / total_w for v in lib_weights.values()]).tolist()))
    n_hits = max(50, int(n / 600))
    hits = b.atlas_files("HITS", mc, n_hits, sizes(n_hits, 900 * MIB, 0.3, 100 * MIB, 4 * GIB), per_task=500,
                         replicated=True)
    _library(b, hits, counts["HITS"])
    n_evnt = max(20, int(n / 2000))
    evnt = b.atlas_files("EVNT", mc, n_evnt, sizes(n_evnt, 250 * MIB, 0.4, 10 * MIB, 2 * GIB), per_task=200)
    _library(b, evnt, counts["EVNT"])
    n_aod = max(10, int(counts["AOD"] / 1.3))
    aod = b.atlas_files("AOD", data + mc, n_aod, sizes(n_aod, 3.2 * GIB, 0.45, 200 * MIB, 12 * GIB), per_task=300)
    _library(b, aod, counts["AOD"], 0.1, 0.2, 0.8)
    n_raw = max(5, int(counts["RAW"] / 1.1))
    raw = b.atlas_files("RAW", ["data23_13p6TeV"], n_raw, sizes(n_raw, 2.5 * GIB, 0.3, 500 * MIB, 6 * GIB),
                        per_task=1000,
                        name_fmt="data23_13p6TeV.00{task:08d}.physics_Main.daq.RAW._lb{part:04d}._SFO-1._0001.data")
    _library(b, raw, counts["RAW"])
    n_premix = max(50, int(n / 400))
    premix = b.cms_files("PREMIX", "mc", n_premix, sizes(n_premix, 5.5 * GIB, 0.3, 2 * GIB, 12 * GIB),
                         ["Neutrino_E-10_gun"], ["RunIISummer20ULPrePremix"], per_ds=5000, replicated=True)
    _library(b, premix, counts["PREMIX"], 1.0, 0.05, 0.15)
    n_aodsim = max(10, int(counts["AODSIM"] / 1.3))
    aodsim = b.cms_files("AODSIM", "mc", n_aodsim, sizes(n_aodsim, 4.0 * GIB, 0.4, 200 * MIB, 12 * GIB), primaries,
                         ["RunIISummer20UL18RECO"])
    _library(b, aodsim, counts["AODSIM"], 0.2, 0.2, 0.8)

    return _assemble(b, site_names, servers, seed, start_us, days)


def _site_names(n: int) -> list[str]:
    out = []
    for i in range(n):
        pool = ATLAS_SITES if i % 2 == 0 else CMS_SITES
        name = pool[(i // 2) % len(pool)]
        if i // 2 >= len(pool):
            name = f"{name}-{i // 2 // len(pool) + 1}"
        out.append(name)
    return out


def _assemble(b: _Builder, site_names: list[str], servers: int, seed: int, start_us: int, days: float) -> Workload:
    rng = b.rng
    ts = np.concatenate([a[0] for a in b.acc])
    files = np.concatenate([a[1] for a in b.acc])
    ops = np.concatenate([a[2] for a in b.acc])
    nbytes = np.concatenate([a[3] for a in b.acc])
    order = np.lexsort((ops, ts))  # equal times: write before read before delete is not guaranteed; ops as tie-break
    ts, files, ops, nbytes = ts[order], files[order], ops[order], nbytes[order]
    # nothing starts before the period; deletes drawn past its end were dropped by the categories
    ts = np.clip(ts, start_us, None)
    vo = np.concatenate(b.vo)
    file_site = np.concatenate(b.file_site)
    n = len(ts)
    site = file_site[files]
    free = site < 0
    if free.any():
        weights = np.where(vo[files[free]][:, None] == 0, b.site_atlas[None, :], 1.0 - b.site_atlas[None, :])
        cum = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
        site[free] = (rng.random(int(free.sum()))[:, None] > cum).sum(axis=1)
    # a file lives on one pool per site; clients spread over the worker nodes; XCache by client
    server = (files * 2654435761 + site * 97) % servers
    client = rng.integers(0, 400, size=n)
    cache_server = client % servers
    rate = rng.uniform(50e6, 500e6, size=n)  # bytes/s
    duration = (nbytes / rate * 1e6).astype(np.int64) + rng.integers(20_000, 2_000_000, size=n)
    duration[ops == OP_DELETE] = rng.integers(1_000, 50_000, size=int((ops == OP_DELETE).sum()))
    bypass = rng.random(n) < 0.01
    cat = Catalogue(b.paths, vo, b.tiers, np.concatenate(b.sizes), b.scopes, b.names)
    return Workload(ts, duration, files, ops, nbytes, site, server.astype(np.int64), cache_server.astype(np.int64),
                    client, bypass, cat, site_names, servers, seed, start_us, days)


def _simulate_xcache(w: Workload, fraction: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(w)
    hit = np.zeros(n, np.uint64)
    miss = np.zeros(n, np.uint64)
    byp = np.zeros(n, np.uint64)
    reads = w.op == OP_READ
    key = w.site * w.n_servers + w.cache_server
    sizes = w.catalogue.size
    # capacity: a fraction of the bytes of the distinct files each cache sees
    caps: dict[int, float] = {}
    for k in np.unique(key[reads]).tolist():
        f = np.unique(w.file[reads & (key == k)])
        caps[k] = max(1.0, float(sizes[f].sum()) * fraction)
    caches: dict[int, OrderedDict] = {k: OrderedDict() for k in caps}
    used = dict.fromkeys(caps, 0)
    files = w.file.tolist()
    ops = w.op.tolist()
    nbytes = w.bytes_read.tolist()
    keys = key.tolist()
    bypass = w.bypass.tolist()
    hit_l = [0] * n
    miss_l = [0] * n
    byp_l = [0] * n
    for i in range(n):
        op = ops[i]
        k = keys[i]
        cache = caches.get(k)
        if cache is None:
            continue
        f = files[i]
        if op == OP_DELETE or op == OP_WRITE:
            held = cache.pop(f, None)
            if held is not None:
                used[k] -= held
            continue
        nb = nbytes[i]
        if bypass[i]:
            byp_l[i] = nb
            continue
        held = cache.get(f, 0)
        h = nb if nb <= held else held
        hit_l[i] = h
        miss_l[i] = nb - h
        if f in cache:
            cache.move_to_end(f)
        if nb > held:
            cache[f] = nb
            used[k] += nb - held
            cap = caps[k]
            while used[k] > cap and cache:
                _, old = cache.popitem(last=False)
                used[k] -= old
    hit[:] = hit_l
    miss[:] = miss_l
    byp[:] = byp_l
    return hit, miss, byp


# ---------------------------------------------------------------------------------------------
# rendering: one function per format, yielding (access index or -1 for noise, site, emit time us,
# line) in the order the producer writes them (by the time each record is emitted), so lines
# stream to files without being held and sorted.

Line = tuple[int, int, int, str]


def _domain(site: str) -> str:
    return SITE_DOMAINS.get(site.split("-")[0] if site not in SITE_DOMAINS else site, "example.org")


class _Paths:
    """Storage paths of a file per site and storage layout, built once per (file, site)."""

    def __init__(self, w: Workload, style: str):
        self.w = w
        self.style = style
        self.cache: dict[tuple[int, int], str] = {}
        self.domains = [_domain(s) for s in w.sites]

    def __call__(self, f: int, s: int) -> str:
        key = (f, s)
        path = self.cache.get(key)
        if path is None:
            path = self.cache[key] = _storage_path(self.w, f, self.domains[s], self.style)
        return path


def _storage_path(w: Workload, f: int, dom: str, style: str) -> str:
    cat = w.catalogue
    p = cat.path[f]
    if cat.vo[f] == 0:  # /atlas/rucio/... -> the storage's own prefix
        rest = p[len("/atlas/rucio/"):]
        token = "atlasscratchdisk" if rest.startswith("user/") else "atlasdatadisk"
        if style == "dcache":
            return f"/pnfs/{dom}/{token}/rucio/{rest}"
        if style == "eos":
            return f"/eos/atlas/{token}/rucio/{rest}"
        if style == "dpm":
            return f"/dpm/{dom}/home/atlas/{token}/rucio/{rest}"
        if style == "xcache":
            return f"atlas/rucio/{rest}"
        return p
    if style == "dcache":
        return f"/pnfs/{dom}/data/cms{p}"
    if style == "eos":
        return f"/eos/cms{p}"
    if style == "dpm":
        return f"/dpm/{dom}/home/cms{p}"
    return p


def _pnfsid(f: int) -> str:
    return f"0000{(f * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF:016X}{f:016X}"


def _server_names(w: Workload, style: str) -> list[list[str]]:
    out = []
    for s in w.sites:
        dom = _domain(s)
        if style == "dcache":
            out.append([f"{s.lower().replace('_', '-')}-pool{j:02d}" for j in range(w.n_servers)])
        elif style == "xcache":
            out.append([f"xcache{j:02d}.{dom}" for j in range(w.n_servers)])
        else:
            out.append([f"fs{j:02d}.{dom}" for j in range(w.n_servers)])
    return out


class _Clock:
    """Formatted times, cached per minute (many records share one)."""

    def __init__(self, minute_fmt: Callable[[datetime], str]):
        self.minute_fmt = minute_fmt
        self.cache: dict[int, str] = {}

    def minute(self, us: int) -> str:
        m = us // 60_000_000
        text = self.cache.get(m)
        if text is None:
            text = self.cache[m] = self.minute_fmt(datetime.fromtimestamp(m * 60, tz=timezone.utc))
        return text


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_BILLING_CLOCK = lambda d: f"{d.month:02d}.{d.day:02d} {d.hour:02d}:{d.minute:02d}"  # noqa: E731
_CLF_CLOCK = lambda d: f"{d.day:02d}/{_MONTHS[d.month - 1]}/{d.year}:{d.hour:02d}:{d.minute:02d}"  # noqa: E731


def _columns(w: Workload) -> tuple[list, ...]:
    return (w.ts.tolist(), w.duration.tolist(), w.file.tolist(), w.op.tolist(), w.bytes_read.tolist(),
            w.site.tolist(), w.server.tolist(), w.client.tolist())


def _by_emit(emit: np.ndarray, keep: np.ndarray | None = None) -> list[int]:
    """Access indices in the order their records are emitted."""
    idx = np.arange(len(emit)) if keep is None else np.flatnonzero(keep)
    return idx[np.argsort(emit[idx], kind="stable")].tolist()


def _iso_ms(us: int) -> str:
    return (datetime.fromtimestamp(us // 1_000_000, tz=timezone.utc)
            + timedelta(microseconds=us % 1_000_000)).isoformat(timespec="milliseconds")


def render_dcache_billing(w: Workload) -> Iterator[Line]:
    rng = np.random.default_rng(w.seed + 11)
    noise = rng.random(len(w)).tolist()
    pools = _server_names(w, "dcache")
    clients = [[f"wn{c:04d}.{_domain(s)}" for c in range(400)] for s in w.sites]
    paths = _Paths(w, "dcache")
    sizes = w.catalogue.size.tolist()
    vos = w.catalogue.vo.tolist()
    clock = _Clock(_BILLING_CLOCK)
    ts, dur, files, ops, nbytes, site_l, server_l, client_l = _columns(w)
    end_all = w.ts + w.duration
    emit = np.where(w.op == OP_DELETE, w.ts, end_all)
    for i in _by_emit(emit):
        t, f, op, nb, s, srv, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], server_l[i], client_l[i]
        site = w.sites[s]
        path = paths(f, s)
        pnfsid = _pnfsid(f)
        storage = "atlas:datadisk@osm" if vos[f] == 0 else "cms:default@osm"
        if op == OP_DELETE:  # a removal is logged when it happens
            date = f"{clock.minute(t)}:{t // 1_000_000 % 60:02d}"
            yield i, s, t, (f'{date} [door:WebDAV-{site}@webdavDomain:remove] ["prod":40001:5000:{clients[s][cl]}] '
                            f'[{pnfsid},{sizes[f]}] [{path}] {storage} 12 0 {{0:""}}')
            continue
        end = t + dur[i]
        date = f"{clock.minute(end)}:{end // 1_000_000 % 60:02d}"
        conn_ms = dur[i] // 1000
        ip = f"10.{s % 250}.{cl // 250}.{cl % 250}"
        if op == OP_READ:
            created, door = "false", "Xrootd"
            proto = f"Xrootd-5.0:{ip}:{30000 + cl}"
        else:
            created, door = "true", "WebDAV"
            proto = f"Http-1.1:{ip}:{30000 + cl}:WebDAV-{site}:webdavDomain:{path}"
        cell = f"{door}-{site}@{door.lower()}Domain"
        if noise[i] < 0.01 and op == OP_READ:  # a failed attempt just before the good transfer
            yield -1, s, end, (f"{date} [pool:{pools[s][srv]}:transfer] [{pnfsid},{sizes[f]}] [{path}] {storage} "
                               f"{nb // 3} 900 false {{{proto}}} [door:{cell}:AB{i:010X}:{t // 1000}] "
                               f'{{10006:"Transfer aborted: client disconnected"}}')
        yield i, s, end, (f"{date} [pool:{pools[s][srv]}:transfer] [{pnfsid},{sizes[f]}] [{path}] {storage} {nb} "
                          f"{conn_ms} {created} {{{proto}}} [door:{cell}:AA{i:010X}:{t // 1000}] {{0:\"\"}}")
        yield -1, s, end, (f'{date} [door:{cell}:request] ["prod":40001:5000:{ip}] [{pnfsid},{sizes[f]}] [{path}] '
                           f'{storage} {conn_ms + 5} 0 {{0:""}}')


def render_dcache_json(w: Workload) -> Iterator[Line]:
    pools = _server_names(w, "dcache")
    clients = [[f"wn{c:04d}.{_domain(s)}" for c in range(400)] for s in w.sites]
    paths = _Paths(w, "dcache")
    sizes = w.catalogue.size.tolist()
    vos = w.catalogue.vo.tolist()
    clock = _Clock(lambda d: d.strftime("%Y-%m-%dT%H:%M"))
    ts, dur, files, ops, nbytes, site_l, server_l, client_l = _columns(w)
    emit = np.where(w.op == OP_DELETE, w.ts, w.ts + w.duration)

    def iso(us: int) -> str:  # ISO_OFFSET_DATE_TIME with milliseconds, UTC
        return f"{clock.minute(us)}:{us // 1_000_000 % 60:02d}.{us // 1000 % 1000:03d}+00:00"

    for i in _by_emit(emit):
        t, f, op, nb, s, srv, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], server_l[i], client_l[i]
        site = w.sites[s]
        path = paths(f, s)
        vo = "atlas" if vos[f] == 0 else "cms"
        if op == OP_DELETE:  # a removal is logged when it happens: no duration
            yield i, s, t, (f'{{"VERSION":"1.0","msgType":"remove","date":"{iso(t)}","cellName":"WebDAV-{site}",'
                            f'"cellType":"door","status":{{"code":0,"msg":""}},"subject":["FQANPrincipal[/{vo},primary]"],'
                            f'"client":"{clients[s][cl]}","pnfsid":"{_pnfsid(f)}","billingPath":"{path}",'
                            f'"fileSize":{sizes[f]}}}')
            continue
        end = t + dur[i]
        pool = pools[s][srv]
        yield i, s, end, (f'{{"version":"1.0","msgType":"transfer","date":"{iso(end)}","queuingTime":0,'
                          f'"cellName":"{pool}","cellType":"pool","cellDomain":"{pool}Domain",'
                          f'"status":{{"code":0,"msg":""}},"subject":["FQANPrincipal[/{vo},primary]"],'
                          f'"pnfsid":"{_pnfsid(f)}","billingPath":"{path}","fileSize":{sizes[f]},'
                          f'"storageInfo":"{vo}:default@osm","transferSize":{nb},"transferTime":{dur[i] // 1000},'
                          f'"isWrite":"{"write" if op == OP_WRITE else "read"}","protocolInfo":{{"protocol":"Xrootd",'
                          f'"versionMajor":5,"versionMinor":0,"port":{30000 + cl},"host":"{clients[s][cl]}"}},'
                          f'"initiator":"door:Xrootd-{site}@xrootdDomain","isP2p":false,"transferPath":"{path}"}}')


def render_xrootd_gstream(w: Workload) -> Iterator[Line]:
    hit, miss, byp = (a.tolist() for a in w.observed())
    caches = _server_names(w, "xcache")
    paths = _Paths(w, "xcache")
    sizes = w.catalogue.size.tolist()
    # XCache flushes a packet per cache every 60 s ('mongstream pfc flush 60s'): a header, then the
    # records closed in that window; packets of all caches arrive interleaved by window.
    reads = np.flatnonzero(w.op == OP_READ)
    end_all = w.ts + w.duration
    window = end_all[reads] // 60_000_000
    key_all = w.site * w.n_servers + w.cache_server
    reads = reads[np.lexsort((end_all[reads], key_all[reads], window))]
    ts_l, dur_l, file_l, site_l, cs_l = (w.ts.tolist(), w.duration.tolist(), w.file.tolist(), w.site.tolist(),
                                         w.cache_server.tolist())
    previous = None
    pseq: dict[tuple[int, int], int] = {}
    emit = 0
    blk = 1048576
    for i in reads.tolist():
        t, dur, f, s, cs = ts_l[i], dur_l[i], file_l[i], site_l[i], cs_l[i]
        end = t + dur
        packet = (end // 60_000_000, s, cs)
        if packet != previous:
            emit = (packet[0] + 1) * 60_000_000  # the flush at the end of the window
            n = pseq[(s, cs)] = (pseq.get((s, cs), -1) + 1) % 256
            yield -1, s, emit, orjson.dumps({"code": "g", "pseq": n, "stod": w.start_us // 1_000_000,
                                             "src": {"site": w.sites[s], "host": caches[s][cs], "port": 1094,
                                                     "inst": "xcache"},
                                             "gs": {"type": "C", "tbeg": packet[0] * 60,
                                                    "tend": emit // 1_000_000}}).decode()
            previous = packet
        size = sizes[f]
        h, m, b = hit[i], miss[i], byp[i]
        n_blks = (size + blk - 1) // blk
        yield i, s, emit, (f'{{"event":"file_close","lfn":"{paths(f, s)}","size":{size},"blk_size":{blk},'
                           f'"n_blks":{n_blks},"n_blks_done":{min(n_blks, (h + m + blk - 1) // blk)},"access_cnt":1,'
                           f'"attach_t":{t // 1_000_000},"detach_t":{end // 1_000_000},'
                           f'"remotes":["origin.{_domain(w.sites[s])}:1094"],"b_hit":{h},"b_miss":{m},'
                           f'"b_bypass":{b},"b_todisk":{m},"b_prefetch":0,"n_cks_errs":0}}')


def render_xcache_reporter(w: Workload) -> Iterator[Line]:
    hit, miss, byp = (a.tolist() for a in w.observed())
    caches = _server_names(w, "xcache")
    sizes = w.catalogue.size.tolist()
    cat_path = w.catalogue.path
    ts, dur, files, ops, _, site_l, _, _ = _columns(w)
    cs_l = w.cache_server.tolist()
    for i in _by_emit(w.ts + w.duration, w.op == OP_READ):
        t, f, s, cs = ts[i], files[i], site_l[i], cs_l[i]
        end = t + dur[i]
        path = cat_path[f]
        file = path[len("/atlas/rucio/"):] if path.startswith("/atlas/rucio/") else path
        size = sizes[f]
        h, m, b = hit[i], miss[i], byp[i]
        yield i, s, end, (f'{{"sender":"xCache","type":"docs","site":"{w.sites[s]}","host":"{caches[s][cs]}",'
                          f'"file":"{file}","size":{size},"created_at":{w.start_us // 1000},'
                          f'"blocks":{(size + MIB - 1) // MIB},"blocks_cached":{(h + m + MIB - 1) // MIB},'
                          f'"access":0,"attached_at":{t // 1000},"detached_at":{end // 1000},'
                          f'"ios":{1 + (h + m) // MIB},"duration":{dur[i] // 1_000_000},"bytes_hit":{h},'
                          f'"bytes_miss":{m},"bytes_bypassed":{b},"bytes_written":{m}}}')


def render_xrootd_collector(w: Workload) -> Iterator[Line]:
    servers = _server_names(w, "fs")
    split = [[name.partition(".") for name in per_site] for per_site in servers]
    sizes = w.catalogue.size.tolist()
    vos = w.catalogue.vo.tolist()
    cat_path = w.catalogue.path
    domains = [_domain(s) for s in w.sites]
    ts, dur, files, ops, nbytes, site_l, server_l, client_l = _columns(w)
    for i in _by_emit(w.ts + w.duration, w.op != OP_DELETE):
        t, f, op, nb, s, srv, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], server_l[i], client_l[i]
        end = t + dur[i]
        host, _, dom = split[s][srv]
        rd, wr = (nb, 0) if op == OP_READ else (0, nb)
        yield i, s, end, (f'{{"site_name":"{w.sites[s]}","fallback":false,"user_dn":"","client_host":"wn{cl:04d}",'
                          f'"client_domain":"{domains[s]}","server_host":"{host}","server_domain":"{dom}",'
                          f'"unique_id":"{t:x}-{f:x}","file_lfn":"{cat_path[f]}","file_size":{sizes[f]},'
                          f'"read_bytes":{rd},"read_bytes_at_close":{rd},"write_bytes":{wr},'
                          f'"read_single_operations":{1 + rd // (4 * MIB)},"start_time":{t // 1_000_000},'
                          f'"end_time":{end // 1_000_000},"vo":"{"atlas" if vos[f] == 0 else "cms"}","ipv6":false}}')


def render_eos_report(w: Workload) -> Iterator[Line]:
    rng = np.random.default_rng(w.seed + 13)
    noise = rng.random(len(w)).tolist()
    servers = _server_names(w, "fs")
    paths = _Paths(w, "eos")
    sizes = w.catalogue.size.tolist()
    vos = w.catalogue.vo.tolist()
    mgm = [f"eos-mgm.{_domain(s)}" for s in w.sites]
    ts, dur, files, ops, nbytes, site_l, server_l, client_l = _columns(w)
    for i in _by_emit(w.ts + w.duration):
        t, f, op, nb, s, srv, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], server_l[i], client_l[i]
        end = t + dur[i]
        if op == OP_DELETE:
            yield i, s, end, (f"log={i:08x}-0000-0000-0000-000000000000&host={mgm[s]}:1094&fid={f + 1000000}&ruid=0"
                              f"&rgid=0&dc_ts={t // 1_000_000}&dc_tns={(t % 1_000_000) * 1000}&dm_ts={t // 1_000_000}"
                              f"&dm_tns=0&dsize={sizes[f]}&sec.app=rm")
            continue
        path = paths(f, s)
        size = sizes[f]
        rb, wb, osize = (nb, 0, size) if op == OP_READ else (0, nb, 0)
        vo = "atlas" if vos[f] == 0 else "cms"
        yield i, s, end, (f"log={i:08x}-1d8e-11e7-ba07-a0369f1fbf0c&path={path}&fstpath=/data0{srv}/{f:08x}"
                          f"&ruid=8959&rgid=1399&td={vo}001.{cl}:1@wn{cl:04d}&host={servers[s][srv]}&lid=1048850"
                          f"&fid={f + 1000000}&fsid={s * 100 + srv}&ots={t // 1_000_000}"
                          f"&otms={(t % 1_000_000) // 1000}&cts={end // 1_000_000}&ctms={(end % 1_000_000) // 1000}"
                          f"&nrc={1 + rb // (4 * MIB)}&nwc={1 if wb else 0}&rb={rb}&rb_min=0&rb_max=0&rb_sigma=0.00"
                          f"&rv_op=0&rvb_min=0&rvb_max=0&rvb_sum=0&rvb_sigma=0.00&wb={wb}&wb_min=0&wb_max=0"
                          f"&wb_sigma=0.00&rt=0.00&rvt=0.00&wt=0.00&osize={osize}&csize={size}&sec.prot=gsi"
                          f"&sec.name={vo}001&sec.host=wn{cl:04d}&sec.vorg={vo}&sec.grps=&sec.role=&sec.info=&sec.app=")
        if noise[i] < 0.005:  # an open without reads (a stat through open)
            yield -1, s, end, (f"log={i:08x}-ffff-11e7-ba07-a0369f1fbf0c&path={path}&ruid=8959&rgid=1399"
                               f"&td=x.1:1@wn{cl:04d}&host={servers[s][srv]}&fid={f + 1000000}&ots={t // 1_000_000}"
                               f"&otms=0&cts={t // 1_000_000}&ctms=5&nrc=0&nwc=0&rb=0&wb=0&osize={size}"
                               f"&csize={size}&sec.app=")


def render_rucio_trace(w: Workload) -> Iterator[Line]:
    rng = np.random.default_rng(w.seed + 17)
    noise = rng.random(len(w)).tolist()
    servers = _server_names(w, "fs")
    paths = _Paths(w, "dcache")
    sizes = w.catalogue.size.tolist()
    cat = w.catalogue
    vos = cat.vo.tolist()
    domains = [_domain(s) for s in w.sites]
    dumps = orjson.dumps
    ts, dur, files, ops, _, site_l, server_l, client_l = _columns(w)
    for i in _by_emit(w.ts + w.duration, w.op != OP_DELETE):
        t, f, op, s, srv, cl = ts[i], files[i], ops[i], site_l[i], server_l[i], client_l[i]
        site = w.sites[s]
        rse = f"{site}_DATADISK" if vos[f] == 0 else site
        end = t + dur[i]
        rec = {"eventType": "put_sm", "eventVersion": "pilot3 3.7.2.4", "clientState": "DONE", "localSite": rse,
               "remoteSite": rse, "timeStart": t / 1e6, "timeEnd": end / 1e6, "scope": cat.scope[f],
               "filename": cat.name[f], "filesize": sizes[f], "hostname": f"wn{cl:04d}.{domains[s]}", "pq": site}
        if op == OP_READ:
            rec["eventType"], rec["clientState"] = ("get_sm_a", "FOUND_ROOT") if i % 3 == 0 else ("get_sm", "DONE")
            rec["url"] = f"root://{servers[s][srv]}:1094/{paths(f, s)}"
            if noise[i] < 0.01:  # a failed stage-in attempt reported before the good one
                yield -1, s, end, dumps({"eventType": rec["eventType"], "clientState": "STAGEIN_ATTEMPT_FAILED",
                                         "localSite": rse, "remoteSite": rse, "timeStart": t / 1e6,
                                         "scope": cat.scope[f], "filename": cat.name[f], "filesize": sizes[f],
                                         "stateReason": "timeout"}).decode()
        yield i, s, end, dumps(rec).decode()


def render_http_access(w: Workload) -> Iterator[Line]:
    sizes = w.catalogue.size.tolist()
    paths = _Paths(w, "dpm")
    clock = _Clock(_CLF_CLOCK)
    ts, dur, files, ops, nbytes, site_l, _, client_l = _columns(w)
    emit = np.where(w.op == OP_DELETE, w.ts, w.ts + w.duration)
    for i in _by_emit(emit):
        t, f, op, nb, s, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], client_l[i]
        path = paths(f, s)
        ip = f"10.{s % 250}.{cl // 250}.{cl % 250}"
        when = f"{clock.minute(t)}:{t // 1_000_000 % 60:02d} +0000"  # %t: when the request arrived
        if op == OP_DELETE:
            yield i, s, t, f'{ip} - - [{when}] "DELETE {path} HTTP/1.1" 204 - "-" "gfal2/2.21.5"'
        elif op == OP_WRITE:
            yield i, s, t + dur[i], f'{ip} - - [{when}] "PUT {path} HTTP/1.1" 201 - "-" "gfal2/2.21.5"'
        else:
            status = "200" if nb >= sizes[f] else "206"
            yield i, s, t + dur[i], f'{ip} - - [{when}] "GET {path} HTTP/1.1" {status} {nb} "-" "XrdCl/v5.6.4"'


def render_csv(w: Workload) -> Iterator[Line]:
    from cachescope.events import file_id_of

    cat = w.catalogue
    sizes = cat.size.tolist()
    ids: dict[int, int] = {}
    ts, _, files, _, nbytes, site_l, _, _ = _columns(w)
    for i in np.flatnonzero(w.op == OP_READ).tolist():  # already in time order
        t, f, s = ts[i], files[i], site_l[i]
        fid = ids.get(f)
        if fid is None:
            fid = ids[f] = file_id_of(cat.path[f])
        yield i, s, t, f"{t // 1_000_000},{fid},{sizes[f]},{cat.tier[f]},{cat.path[f]},{nbytes[i]}"


CSV_HEADER = "timestamp,obj_id,obj_size,tier,path,bytes_read"

RENDERERS: dict[str, Callable[[Workload], Iterator[Line]]] = {
    "dcache-billing": render_dcache_billing,
    "dcache-json": render_dcache_json,
    "xrootd-gstream": render_xrootd_gstream,
    "xrootd-collector": render_xrootd_collector,
    "xcache-reporter": render_xcache_reporter,
    "eos-report": render_eos_report,
    "rucio-trace": render_rucio_trace,
    "http-access": render_http_access,
    "csv": render_csv,
}
# formats whose lines name no site: written per site when writing to a directory
PER_SITE = {"dcache-billing", "dcache-json", "eos-report", "http-access", "csv"}


def render(fmt: str, w: Workload) -> list[Line]:
    """(access index or -1, site, emit time, line) of `fmt`, in the order the producer writes them."""
    return list(RENDERERS[fmt](w))


# ---------------------------------------------------------------------------------------------
# writing files


def write(fmt: str, w: Workload, out: Path, single_file: bool) -> list[Path]:
    """Write one format, streaming. Directory layout (single_file False):
    dcache-billing/<SITE>/billing-YYYY.MM.DD, dcache-json/<SITE>/billing-YYYY.MM.DD.json,
    eos-report/<SITE>/YYYYMMDD.eosreport, http-access/<SITE>/ssl_access_log, csv/<SITE>.csv,
    <format>/<format>.jsonl otherwise (daily files split by the time each line is emitted)."""
    written: list[Path] = []
    handles: dict[object, TextIO] = {}
    base = out / fmt

    def open_file(path: Path) -> TextIO:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = io.open(path, "w", encoding="utf-8", buffering=1 << 20)
        written.append(path)
        if fmt == "csv":
            fh.write(CSV_HEADER + "\n")
        return fh

    def path_for(s: int, day: int) -> Path:
        site = w.sites[s]
        d = datetime.fromtimestamp(day * 86_400, tz=timezone.utc)
        if fmt == "dcache-billing":
            return base / site / f"billing-{d:%Y.%m.%d}"
        if fmt == "dcache-json":
            return base / site / f"billing-{d:%Y.%m.%d}.json"
        if fmt == "eos-report":
            return base / site / f"{d:%Y%m%d}.eosreport"
        if fmt == "http-access":
            return base / site / "ssl_access_log"
        if fmt == "csv":
            return base / f"{site}.csv"
        return base / f"{fmt}.jsonl"

    daily = fmt in ("dcache-billing", "dcache-json", "eos-report")
    per_site = fmt in PER_SITE
    try:
        for _, s, emit, line in RENDERERS[fmt](w):
            if single_file:
                key: object = None
            else:
                key = (s if per_site else 0, emit // DAY_US if daily else 0)
            fh = handles.get(key)
            if fh is None:
                fh = handles[key] = open_file(out if single_file else path_for(s, emit // DAY_US))
            fh.write(line)
            fh.write("\n")
    finally:
        for fh in handles.values():
            fh.close()
    return written


__all__ = ["Workload", "make_workload", "render", "write", "RENDERERS", "PER_SITE"]
