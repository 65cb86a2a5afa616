"""Incident scenarios on top of a generated workload (`cachescope generate --scenario NAME`).

Each scenario changes a workload made by `make_workload` in one way that an operator would want
an alert for, and says when it happens (`Incident`), so tests can check that the right alert
fires at the right windows and resolves:

- `hit-drop`: a new campaign floods one site's working set for some hours of the last day: a
  burst of whole-file reads of files nobody read before (a new DAOD production), `flood` times
  the site's usual read rate, then it ends. Every shadow cache's hit rate drops meanwhile.
- `xcache-misconfigured`: one site's real XCache keeps nothing for some hours (e.g. a disk
  usage watermark set far too low): its own hit bytes vanish from the records while the
  shadow caches, fed the same accesses, go on as before.

Only the generator's public pieces are used (make_workload's Workload and Catalogue, and the
observed XCache bytes it computes), so any renderer writes the scenario in its format.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from cachescope.tiers import rucio_hash

from ingest.generate import Catalogue, Workload

HOUR_US = 3_600_000_000
DAY_US = 86_400_000_000
OP_READ = 0


@dataclass(frozen=True)
class Incident:
    scenario: str
    site: str
    start_us: int
    end_us: int
    detail: str
    #: xcache-misconfigured: the real caches' total size at the site (bytes), so a shadow of
    #: the same size and model can stand beside it
    xcache_bytes: int = 0

    @property
    def start(self) -> datetime:
        return datetime.fromtimestamp(self.start_us / 1e6, tz=timezone.utc)

    @property
    def end(self) -> datetime:
        return datetime.fromtimestamp(self.end_us / 1e6, tz=timezone.utc)

    def describe(self) -> str:
        return f"{self.scenario} at {self.site} from {self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC: {self.detail}"


def _window(w: Workload, start_hour: float, hours: float) -> tuple[int, int]:
    """[start, end) on the last whole day of the period, at `start_hour` UTC."""
    days = int(w.days)
    if days < 2:
        raise ValueError("a scenario needs at least 2 days (--days 2): alerts compare with earlier days")
    t0 = w.start_us + (days - 1) * DAY_US + int(start_hour * HOUR_US)
    t1 = t0 + int(hours * HOUR_US)
    if t1 > w.start_us + int(w.days * DAY_US):
        raise ValueError(f"the incident ({hours:g} h from {start_hour:g}:00) runs past the end of the period")
    return t0, t1


def hit_drop(w: Workload, *, site: int = 0, start_hour: float = 9.0, hours: float = 4.0, flood: float = 3.0,
             seed: int = 7) -> tuple[Workload, Incident]:
    """A new campaign reads `flood` × the site's usual reads of those hours, each of a new file."""
    if not 0 <= site < len(w.sites):
        raise ValueError(f"site {site}: the workload has {len(w.sites)}")
    t0, t1 = _window(w, start_hour, hours)
    rng = np.random.default_rng(seed)
    usual = int(((w.ts >= t0) & (w.ts < t1) & (w.site == site) & (w.op == OP_READ)).sum())
    n = max(1, int(usual * flood))
    # the campaign's files: a DAOD_PHYS production of a new task (one read each, whole files)
    task = int(rng.integers(46_000_000, 49_000_000))
    scope = "mc23_13p6TeV"
    names = [f"DAOD_PHYS.{task:08d}._{i + 1:06d}.pool.root.1" for i in range(n)]
    paths = []
    for name in names:
        h = rucio_hash(scope, name)
        paths.append(f"/atlas/rucio/{scope}/{h[:2]}/{h[2:]}/{name}")
    sizes = np.clip(rng.lognormal(np.log(1.5e9), 0.4, n), 1e8, 6e9).astype(np.uint64)
    cat = w.catalogue
    first = len(cat.path)
    new_cat = Catalogue(cat.path + paths, np.concatenate([cat.vo, np.zeros(n, cat.vo.dtype)]),
                        cat.tier + ["DAOD_PHYS"] * n, np.concatenate([cat.size, sizes]),
                        cat.scope + [scope] * n, cat.name + names)
    ts = np.sort(rng.integers(t0, t1, size=n)).astype(np.int64)
    files = np.arange(first, first + n, dtype=np.int64)
    extra = {
        "ts": ts,
        "duration": (sizes / rng.uniform(50e6, 500e6, n) * 1e6).astype(np.int64) + 20_000,
        "file": files,
        "op": np.full(n, OP_READ, w.op.dtype),
        "bytes_read": sizes,
        "site": np.full(n, site, w.site.dtype),
        "server": (files * 2654435761 + site * 97) % w.n_servers,
        "cache_server": rng.integers(0, w.n_servers, size=n),
        "client": rng.integers(0, 400, size=n),
        "bypass": np.zeros(n, bool),
    }
    order = np.argsort(np.concatenate([w.ts, ts]), kind="stable")
    merged = {k: np.concatenate([getattr(w, k), v.astype(getattr(w, k).dtype)])[order] for k, v in extra.items()}
    out = dataclasses.replace(w, catalogue=new_cat, _observed=None, **merged)
    return out, Incident("hit-drop", w.sites[site], t0, t1,
                         f"{n} reads of {n} new DAOD_PHYS files ({flood:g}× the usual {usual} reads of those hours)")


def xcache_misconfigured(w: Workload, *, site: int = 0, start_hour: float = 6.0, hours: float = 8.0,
                         cache_fraction: float = 0.2) -> tuple[Workload, Incident]:
    """The site's XCache servers serve every read from the origin during the incident."""
    if not 0 <= site < len(w.sites):
        raise ValueError(f"site {site}: the workload has {len(w.sites)}")
    t0, t1 = _window(w, start_hour, hours)
    hit, miss, byp = (a.copy() for a in w.observed(cache_fraction))
    broken = (w.site == site) & (w.ts >= t0) & (w.ts < t1) & (w.op == OP_READ)
    miss[broken] += hit[broken]
    hit[broken] = 0
    # the real caches' size: the generator sizes each at a fraction of the bytes it sees
    reads = w.op == OP_READ
    total = 0
    for c in np.unique(w.cache_server[reads & (w.site == site)]).tolist():
        f = np.unique(w.file[reads & (w.site == site) & (w.cache_server == c)])
        total += int(float(w.catalogue.size[f].sum()) * cache_fraction)
    out = dataclasses.replace(w, _observed=(hit, miss, byp))
    return out, Incident("xcache-misconfigured", w.sites[site], t0, t1,
                         f"{int(broken.sum())} reads of the real XCache missed (it kept nothing); "
                         f"its {w.n_servers} servers hold {total / 1e12:.2f} TB together", total)


SCENARIOS = {"hit-drop": hit_drop, "xcache-misconfigured": xcache_misconfigured}


def apply(name: str, w: Workload, **kwargs) -> tuple[Workload, Incident]:
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    return SCENARIOS[name](w, **kwargs)
