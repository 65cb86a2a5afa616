"""The access model: files per VO and data tier, and when and how much of them is read,
written and deleted (see the package docstring)."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np

from cachescope.tiers import rucio_hash
from ingest.generate.model import DAY_US, GIB, HOUR_US, MIB, OP_DELETE, OP_READ, OP_WRITE, Catalogue, Workload
from ingest.generate.names import names_of_sites, uuid_like


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
        uuids = uuid_like(rng, n)
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
        uu = uuid_like(rng, n_files)
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
    site_names = names_of_sites(sites)
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
