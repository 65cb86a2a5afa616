"""What-if replays: stored accesses of a range → the engine's bank → counters by tier (and group).

A library function (`run_whatif`), used by `POST /v1/whatif`, `/v1/recommend`, `/v1/compare` and
the tests, which compare it with `cachescope simulate` on the same accesses. The read is
columnar (reads.whatif_feed_chunks: numeric columns only, and only those this replay feeds: times
for time steps and fetch times, group and server codes for several groups and partitions by
server, the admission flag, decided in the store, for a filter; tiers as codes), a query per day
streamed in chunks of at most CHUNK_ROWS rows (a server sends Arrow record batches over HTTP),
read a chunk ahead in a thread and fed to the banks straight away: memory stays bounded by a few
chunks, whatever the range (belady is the exception: it needs the whole future, so its columns are
kept for the range). The banks run their caches on `threads` threads (api.whatif_threads).

Engine tricks, all exact:
* the bank's `window` argument numbers (time bucket × cache group): one pass gives the split by
  group (several groups merged as one shared cache) and by time bucket (`step_s`);
* admission: a read the filter excludes is fed as a bypass (op `OP_BYPASS`): the bank counts it
  as a request and a miss of its tier in every cache that samples the file, never inserted (an
  excluded write or delete is not fed);
* warm-up: accesses before `start` are fed, their counters discarded;
* partitions: by server (a bank routed by the server column: a cache per server, each fed its
  server's accesses, 1/N of the size) when the accesses name exactly N servers or
  `partition_by="server"`, else the engine's file-hash partitions; beside one shared cache of the
  whole size (the answer says which routing);
* SHARDS error bound: replicas of the sampled caches, banks with salted file ids (a bijection, so
  each is an equally valid sample); the spread of their estimates is the stated bound.
"""

from __future__ import annotations

import datetime as dt
import os
import queue
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from cachescope import reads
from cachescope.admission import AdmissionConfig
from cachescope.errors import UsageError
from cachescope.simulation import FIELDS, OP_BYPASS, OP_READ, POLICIES, CacheSpec, ShadowBank, next_access_times
from cachescope.specs import ratios
from cachescope.store import Store
from cachescope.units import utc

F = {name: i for i, name in enumerate(FIELDS)}
OTHER_TIER = "OTHER"
#: the engine counts by at most 256 tiers: the most used 255 get codes, the rest count as OTHER
MAX_TIERS = 255
DAY = dt.timedelta(days=1)
#: caches one per server at most (as `partitions`)
MAX_SERVERS = 1024
#: rows per chunk fed to the engine (a server streams them; memory stays bounded by a few chunks)
CHUNK_ROWS = 1 << 20
#: counters one answer may hold (buckets × groups × caches × tiers × fields, 8 bytes each)
MAX_COUNTER_CELLS = 20_000_000
#: salted replicas of a sampled cache for the error bound, and Student's t (95 %, replicas - 1 d.o.f.)
SAMPLE_REPLICAS = 4
_T95 = {3: 3.182}
_SALTS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)


class WhatIfError(UsageError, ValueError):
    """A request the replay cannot answer; `field` names the request field at fault."""

    def __init__(self, field: str, message: str, status: int = 422):
        super().__init__(message)
        self.field = field
        self.status = status


@dataclass
class WhatIf:
    """One replay question: every (policy, size) over the accesses of [start, end)."""

    policies: Sequence[str]
    sizes: Sequence[int]
    start: dt.datetime
    end: dt.datetime
    cache_groups: Sequence[str] = ()
    sites: Sequence[str] = ()
    warmup: dt.timedelta = dt.timedelta(0)
    partitions: int = 1
    #: how `partitions` caches split the accesses: "auto" (by server when the range's accesses name
    #: exactly `partitions` servers, else by file hash), "server" (one cache per server, however
    #: many), "file" (by file hash, as the engine and `cachescope simulate --partitions` do)
    partition_by: str = "auto"
    sample_rate: float = 1.0
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    params: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: > 0: also counters per time bucket of this many seconds from `start`
    step_s: int = 0
    chunk: dt.timedelta = DAY
    #: (policy, size) pairs replayed instead of every policy × size (a search asks each policy its own sizes)
    pairs: Sequence[tuple[str, int]] = ()

    def specs(self) -> list[CacheSpec]:
        pairs = self.pairs or [(p, s) for p in self.policies for s in self.sizes]
        return [CacheSpec(p, int(s), dict(self.params.get(p, {})), self.sample_rate, self.partitions)
                for p, s in pairs]


@dataclass
class WhatIfResult:
    request: WhatIf
    specs: list[CacheSpec]
    tier_names: list[str]
    #: counters (buckets, groups, caches, tiers, fields); buckets = 1 without step_s, groups = 1
    #: unless several cache groups were asked
    counters: np.ndarray
    #: same for the shared cache (partitions = 1) when partitions > 1, else None
    shared: np.ndarray | None
    #: (replicas, caches, 2): hit and transfer efficiency of each salted replica when sampled
    replicas: np.ndarray | None
    #: partitions by server: the servers (one cache each) and their counters (servers, caches, tiers, fields)
    servers: list[str] = field(default_factory=list)
    by_server: np.ndarray | None = None
    #: how the partitions were routed and why (None: one cache, no partitions)
    routing: dict | None = None
    #: accesses of the range replayed (warm-up excluded), the reads of them the filter admitted, and
    #: those of the warm-up (fed to warm the caches, not counted)
    accesses: int = 0
    admitted: int = 0
    warmup_accesses: int = 0
    #: where the time went: reading the store, the engine, the whole replay
    read_seconds: float = 0.0
    engine_seconds: float = 0.0
    seconds: float = 0.0
    #: the banks get event times and durations (an xcache with fetch times)
    timed: bool = False

    def answers(self) -> list[dict]:
        """One JSON-ready answer per (policy, size), in request order (policies outer)."""
        groups = list(self.request.cache_groups) if len(self.request.cache_groups) > 1 else []
        out = []
        for c, spec in enumerate(self.specs):
            per = self.counters[:, :, c]  # (buckets, groups, tiers, fields)
            row: dict = {"policy": spec.policy, "size_bytes": spec.capacity}
            row.update(_scaled(self._ratios(per.sum(axis=(0, 1, 2))), spec.sample_rate))
            row["by_tier"] = {name: _scaled(self._ratios(per[:, :, t].sum(axis=(0, 1))), spec.sample_rate)
                              for t, name in enumerate(self.tier_names) if per[:, :, t, F["requests"]].any()}
            if groups:
                row["by_cache_group"] = {g: _scaled(self._ratios(per[:, i].sum(axis=(0, 1))), spec.sample_rate)
                                         for i, g in enumerate(groups)}
            if self.request.step_s:
                row["series"] = [
                    {"time": (self.request.start + dt.timedelta(seconds=b * self.request.step_s)).isoformat(),
                     **_scaled(self._ratios(per[b].sum(axis=(0, 1))), spec.sample_rate)}
                    for b in range(per.shape[0]) if per[b, :, :, F["requests"]].any()]
            if self.shared is not None:
                shared = self.shared[:, :, c]
                n = len(self.servers) or spec.partitions
                row["partitions"] = n
                row["routing"] = dict(self.routing or {})
                row["shared"] = _scaled(self._ratios(shared.sum(axis=(0, 1, 2))), spec.sample_rate)
                row["shared"]["note"] = f"one cache of {spec.capacity} bytes instead of {n} of 1/{n} each"
                if self.by_server is not None:
                    row["by_server"] = {name: _scaled(self._ratios(self.by_server[i, c].sum(axis=0)), spec.sample_rate)
                                        for i, name in enumerate(self.servers)}
            if spec.sample_rate < 1.0:
                row["sampling"] = self._sampling(c, spec, per)
            out.append(row)
        return out

    _ratios = staticmethod(ratios)  # the one definition (and empty-window rule) of the efficiencies

    def _sampling(self, c: int, spec: CacheSpec, per: np.ndarray) -> dict:
        tot = per.sum(axis=(0, 1, 2))
        est = np.array([tot[F["hits"]] / max(tot[F["requests"]], 1), tot[F["bytes_hit"]] / max(tot[F["bytes_requested"]], 1)])
        info = {"sample_rate": spec.sample_rate, "sampled_requests": int(tot[F["requests"]]),
                "method": "SHARDS fixed-rate spatial sampling: files whose hash falls under the rate are simulated in a "
                          "cache of size x rate; counts are scaled by 1/rate"}
        if self.replicas is not None:
            reps = np.vstack([est[None, :], self.replicas[:, c, :]])
            sd = reps.std(axis=0, ddof=1)
            t = _T95[len(reps) - 1]
            info.update(hit_ratio_error_bound=float(t * sd[0]), byte_hit_ratio_error_bound=float(t * sd[1]),
                        error_bound_method=f"95 % bound from {len(reps)} independent samples (salted file hashes): "
                                           f"t({len(reps) - 1}) x their standard deviation")
        return info


def _scaled(d: dict, rate: float) -> dict:
    if rate >= 1.0:
        return d
    for k in ("requests", "hits", "bytes_requested", "bytes_hit", "bytes_filled", "evictions", "bytes_evicted",
              "delayed_hits", "bytes_delayed"):
        d[k] = int(round(d[k] / rate))
    # the three kinds still add up after rounding
    d["misses"] = d["requests"] - d["hits"] - d["delayed_hits"]
    d["bytes_missed"] = d["bytes_requested"] - d["bytes_hit"] - d["bytes_delayed"]
    return d


def check(req: WhatIf) -> None:
    """Refuse what the engine would refuse, naming the request field."""
    if not req.policies:
        raise WhatIfError("policy", "give at least one policy")
    bad = [p for p in req.policies if p not in POLICIES]
    if bad:
        raise WhatIfError("policy", f"unknown policy {', '.join(bad)}; known: {', '.join(POLICIES)}")
    if not req.sizes:
        raise WhatIfError("size", "give at least one size")
    if req.end <= req.start:
        raise WhatIfError("to", "`to` must be after `from`")
    if req.warmup < dt.timedelta(0):
        raise WhatIfError("warmup", "warmup must not be negative")
    if not 0 < req.sample_rate <= 1:
        raise WhatIfError("sample_rate", "sample_rate must be in (0, 1]")
    if req.partitions < 1 and req.partition_by != "server":
        raise WhatIfError("partitions", "partitions must be at least 1")
    if req.partition_by not in ("auto", "server", "file"):
        raise WhatIfError("partitions", f"partition_by {req.partition_by!r}: auto, server or file")


def check_names(store: Store, req: WhatIf) -> None:
    """reads.UnknownName (a UserError naming the field and the values the store holds) for a site,
    cache group or excluded tier the store holds nothing of: a typo would replay nothing and answer
    0 requests. The read layer's check, the one behind the API's 422s."""
    if req.sites:
        reads.site_cache_groups(store, list(req.sites))
    reads.check_known(store, "cache_group", list(req.cache_groups))
    reads.check_known(store, "tier", list(req.admission.exclude_tiers))


def scope(store: Store, req: WhatIf) -> tuple[int, list[str]]:
    """(accesses in warm-up + range, tier names by use) without reading the accesses; first the
    names asked are checked (check_names): every door to a replay passes here."""
    check_names(store, req)
    df = reads.whatif_scope(store, req.start - req.warmup, req.end, cache_groups=req.cache_groups, sites=req.sites)
    return int(df["accesses"].sum()) if len(df) else 0, [str(t) for t in df["tier"].tolist()] if len(df) else []


def routing(store: Store, req: WhatIf) -> tuple[list[str], dict | None]:
    """(servers, how the partitions are routed): one cache per server when asked ("server"), or
    ("auto") when the accesses of the range name exactly `partitions` servers; else by file hash."""
    if req.partition_by == "file" or (req.partition_by == "auto" and req.partitions <= 1):
        return [], ({"by": "file", "reason": "file hash, as the engine routes its partitions"}
                    if req.partitions > 1 else None)
    df = reads.whatif_servers(store, req.start - req.warmup, req.end, cache_groups=req.cache_groups, sites=req.sites)
    servers = [str(x) for x in df["server"].tolist()] if len(df) else []
    named = [x for x in servers if x]
    if req.partition_by == "server":
        if len(named) < 2 or len(named) != len(servers):
            raise WhatIfError("partitions", f"the stored accesses of this range name {len(named)} server(s)"
                              f"{' (some none)' if len(named) != len(servers) else ''}: one cache per server needs "
                              "at least two and every access to name its server; give a number to route by file hash")
        if len(named) > MAX_SERVERS:
            raise WhatIfError("partitions", f"{len(named)} servers in the range: one cache per server is bounded to "
                              f"{MAX_SERVERS}", status=413)
        return named, {"by": "server", "reason": f"one cache per server: {len(named)} servers in the range"}
    if len(named) == req.partitions and len(named) == len(servers):
        return named, {"by": "server", "reason": f"the accesses of the range name {len(named)} servers: one cache "
                                                 "per server"}
    why = ("the accesses name no server" if not named else
           f"the accesses name {len(named)} server(s), not {req.partitions}" if len(named) == len(servers)
           else "some accesses name no server")
    return [], {"by": "file", "reason": f"file hash ({why}), as the engine routes its partitions"}


def _chunks(start: dt.datetime, end: dt.datetime, step: dt.timedelta):
    a = start
    while a < end:
        b = min(a + step, end)
        yield a, b
        a = b


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity; the machine's count where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def run_whatif(store: Store, req: WhatIf, *, tier_names: Sequence[str] | None = None,
               on_chunk: Callable[[int], None] = lambda rows: None, threads: int = 0) -> WhatIfResult:
    """Replay the stored accesses of req's range (after its warm-up) through every (policy, size).
    `threads`: each batch's caches run on that many threads (0: the cores available to the
    process; the setting api.whatif_threads); the answer is the same on any number."""
    t0 = time.perf_counter()
    check(req)
    threads = int(threads) if threads and threads > 0 else available_cores()
    specs = req.specs()
    if tier_names is None:
        tier_names = scope(store, req)[1]
    names = [OTHER_TIER] + [t for t in tier_names if t != OTHER_TIER][:MAX_TIERS]
    n_tiers = len(names)
    groups = list(req.cache_groups) if len(req.cache_groups) > 1 else []
    n_groups = max(1, len(groups))
    step_us = int(req.step_s) * 1_000_000
    start_us = int(utc(req.start).timestamp() * 1_000_000)
    n_buckets = -(-int((req.end - req.start).total_seconds() * 1_000_000) // step_us) if step_us else 1

    cells = n_buckets * n_groups * len(specs) * n_tiers * len(FIELDS)
    if cells > MAX_COUNTER_CELLS:
        raise WhatIfError("step" if step_us else "size", f"{n_buckets:,} buckets x {n_groups} groups x {len(specs)} "
                          f"caches x {n_tiers} tiers is too many counters for one answer: use a longer step, fewer "
                          "caches or groups", status=413)
    servers, route = routing(store, req)
    partitioned = route is not None
    if servers:
        specs = [replace(s, partitions=1) for s in specs]

    def new_bank(salt: int = 0):
        return ShadowBank(specs, n_tiers, partitions=len(servers) or None, salt=salt, threads=threads)

    try:
        bank = new_bank()
    except ValueError as e:  # the engine refuses a parameter it does not know, or a bad value
        raise WhatIfError("params", str(e)) from None
    shared_bank = (ShadowBank([replace(s, partitions=1) for s in specs], n_tiers, threads=threads)
                   if partitioned else None)
    sampled = req.sample_rate < 1.0
    replica_banks = [new_bank(_SALTS[i]) for i in range(SAMPLE_REPLICAS - 1)] if sampled else []
    counters = np.zeros((n_buckets, n_groups, len(specs), n_tiers, len(FIELDS)), dtype=np.uint64)
    shared = np.zeros_like(counters) if shared_bank is not None else None
    rep_tot = np.zeros((len(replica_banks), len(specs), n_tiers, len(FIELDS)), dtype=np.uint64)
    res = WhatIfResult(req, specs, names, counters, shared, None, servers=servers, routing=route)
    # an xcache whose fetches take time (origin_rate) runs on the accesses' times and durations
    # (delayed hits, purges on event time); otherwise a what-if feeds no times, as before
    res.timed = any(s.policy == "xcache" and s.params.get("origin_rate", 0) > 0 for s in specs)
    if servers:
        res.by_server = np.zeros((len(servers), len(specs), n_tiers, len(FIELDS)), dtype=np.uint64)
    adm = req.admission

    # the columns this replay feeds: the store reads and converts no other
    filtered = bool(adm.exclude_tiers) or adm.max_file_size is not None
    columns = {"file_id", "file_size", "bytes_read", "op_code", "tier_code"}
    columns |= {"ts_us"} if step_us or res.timed else set()
    columns |= {"duration_us"} if res.timed else set()
    columns |= {"group_code"} if groups else set()
    columns |= {"server_code"} if servers else set()
    columns |= {"admitted"} if filtered else set()

    warm_end = req.start
    ranges = [(a, b, True) for a, b in _chunks(req.start - req.warmup, warm_end, req.chunk)] + \
             [(a, b, False) for a, b in _chunks(req.start, req.end, req.chunk)]

    def chunks():
        """(columns, warm-up?) in replay order, at most CHUNK_ROWS rows each, streamed from the store."""
        for a, b, warm in ranges:
            it = reads.whatif_feed_chunks(store, a, b, tier_names=names[1:], cache_groups=req.cache_groups,
                                          sites=req.sites, exclude_tiers=adm.exclude_tiers,
                                          max_file_size=adm.max_file_size, servers=servers, rows=CHUNK_ROWS,
                                          columns=columns)
            while True:
                r0 = time.perf_counter()
                cols = next(it, None)
                res.read_seconds += time.perf_counter() - r0
                if cols is None:
                    break
                on_chunk(len(cols["file_id"]))
                yield cols, warm

    if bank.needs_future:
        # belady: next-access times over the whole replay, so the columns are kept for it
        parts = list(chunks())
        fed = [_bank_rows(p[0]) for p in parts]
        all_ids, all_ops = (np.concatenate([p[0]["file_id"][rows] for p, (rows, _) in zip(parts, fed)]),
                            np.concatenate([op for _, op in fed])) if parts else (np.zeros(0, np.uint64), None)
        nxt_all = nxt_bank = next_access_times(all_ids, op=all_ops)
        if servers:  # each server's cache sees its own stream
            all_srv = np.concatenate([p[0]["server_code"][rows].astype(np.int64) - 1 for p, (rows, _) in zip(parts, fed)])
            nxt_bank = next_access_times(all_ids, op=all_ops, partition=all_srv)
        pos = 0
        for (cols, warm), (_, op) in zip(parts, fed):
            k = len(op)
            _feed(res, cols, warm, nxt_bank[pos:pos + k], bank, shared_bank, replica_banks, rep_tot,
                  start_us, step_us, n_groups, groups, next_shared=nxt_all[pos:pos + k])
            pos += k
    else:
        # the store is read a chunk ahead in a thread while the engine feeds this one (both leave
        # the GIL: the query or the HTTP stream, and the bank's feed run native code)
        for cols, warm in _ahead(chunks()):
            _feed(res, cols, warm, None, bank, shared_bank, replica_banks, rep_tot, start_us, step_us,
                  n_groups, groups)
    if replica_banks:
        tot = rep_tot.sum(axis=2)  # (replicas, caches, fields)
        res.replicas = np.stack([tot[..., F["hits"]] / np.maximum(tot[..., F["requests"]], 1),
                                 tot[..., F["bytes_hit"]] / np.maximum(tot[..., F["bytes_requested"]], 1)], axis=-1)
    res.seconds = time.perf_counter() - t0
    return res


def _ahead(items, depth: int = 1):
    """Iterate `items` in a thread, up to `depth` items ahead of the consumer. The thread stops
    (and closes the iterator: the store's stream) when the consumer stops early."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def produce():
        try:
            for x in items:
                while not stop.is_set():
                    try:
                        q.put((x, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    break
            out = (end, None)
        except BaseException as e:  # handed to the consumer
            out = (end, e)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        while not stop.is_set():
            try:
                q.put(out, timeout=0.1)
                return
            except queue.Full:
                continue

    t = threading.Thread(target=produce, name="whatif-read", daemon=True)
    t.start()
    try:
        while True:
            x, err = q.get()
            if x is end:
                if err is not None:
                    raise err
                return
            yield x
    finally:
        stop.set()
        t.join()


def _bank_rows(cols: dict) -> tuple:
    """(rows fed to the banks, their op codes): a read the admission filter excludes goes as a
    bypass (a request and a miss, never inserted); a write or delete it excludes is not fed.
    Without an `admitted` column (no filter) every access is admitted."""
    op = cols["op_code"]
    if "admitted" not in cols:
        return slice(None), op
    adm = cols["admitted"].astype(bool)
    if adm.all():
        return slice(None), op
    rows = adm | (op == OP_READ)
    rows = slice(None) if rows.all() else rows
    return rows, np.where(adm, op, OP_BYPASS).astype(np.uint8)[rows]


def _feed(res: WhatIfResult, cols: dict, warm: bool, next_access, bank, shared_bank, replica_banks,
          rep_tot, start_us: int, step_us: int, n_groups: int, groups: list, next_shared=None) -> None:
    """Feed one chunk to the banks. `next_access`: belady's next-access times for `bank` (by
    server's own stream when partitioned by server), `next_shared` those of the whole stream."""
    n = len(cols["file_id"])
    if n == 0:
        return
    e0 = time.perf_counter()
    if warm:
        res.warmup_accesses += n
    else:
        res.accesses += n
    tier = cols["tier_code"]
    # window = time bucket (from this chunk's first) × group
    g = (cols["group_code"].astype(np.int64) - 1).clip(0) if groups else np.zeros(n, np.int64)
    if step_us and not warm:
        bucket = (cols["ts_us"] - start_us) // step_us
        b0 = int(bucket[0])
        win = (bucket - b0) * n_groups + g
    else:
        b0 = 0
        # one window (no step, one group): no window column, so each cache's loop reads one column less
        win = g if groups else None
    rows, op = _bank_rows(cols)
    feed_cols = [cols["file_id"][rows], cols["file_size"][rows], cols["bytes_read"][rows], tier[rows], op]
    w = None if win is None else win[rows].astype(np.uint32)
    part = cols["server_code"][rows].astype(np.int64) - 1 if bank.partitions else None
    timed = {"ts": cols["ts_us"][rows], "duration_us": cols["duration_us"][rows]} if res.timed else {}
    if part is None:
        out = bank.feed(*feed_cols, next_access=next_access, window=w, **timed)
    else:
        out, by_server = bank.feed_by_partition(*feed_cols, part, next_access=next_access, window=w, **timed)
    if shared_bank is not None:
        out_shared = shared_bank.feed(*feed_cols, next_access=next_access if next_shared is None else next_shared,
                                      window=w, **timed)
    if not warm:
        _add(res.counters, out, b0, n_groups)
        if shared_bank is not None:
            _add(res.shared, out_shared, b0, n_groups)
        if part is not None:
            res.by_server += by_server
    for i, rb in enumerate(replica_banks):
        o = rb.feed(*feed_cols, next_access=next_access, partition=part)
        if not warm:
            rep_tot[i] += o.sum(axis=0)
    if not warm:
        res.admitted += int(cols["admitted"].astype(bool).sum()) if "admitted" in cols else n
    res.engine_seconds += time.perf_counter() - e0


def _add(target: np.ndarray, out: np.ndarray, b0: int, n_groups: int) -> None:
    """Add the bank's (windows, caches, tiers, fields) to target (buckets, groups, …) from bucket b0."""
    w = out.shape[0]
    nb = -(-w // n_groups)
    pad = nb * n_groups - w
    if pad:
        out = np.concatenate([out, np.zeros((pad, *out.shape[1:]), dtype=out.dtype)])
    block = out.reshape(nb, n_groups, *out.shape[1:])
    target[b0:b0 + nb] += block[: target.shape[0] - b0]

