"""Shadow-cache specs, the engine's counter fields and whole-file runs: all that `cachescope
simulate FILE` needs, without numpy (whose import would be a third of that command's start-up).
Banks, in-memory traces and curves are in simulation.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from cachescope.engine import _simcore
# the engine's other entry points: only this module and simulation.py import `_simcore` (an
# import-linter contract), so everything else takes them from here, numpy-free like this module
from cachescope._simcore import (MESSAGE_FIELDS, SNAPSHOT_VERSION, BillingFast, GstreamColumns,  # noqa: F401
                                 GstreamState, PathTiers, decode_message, factorize_str, next_access_times,
                                 partition_of, stacked_columns)
from cachescope.errors import UserError

POLICIES: tuple[str, ...] = tuple(_simcore.POLICIES)
FIELDS: tuple[str, ...] = tuple(_simcore.FIELDS)
F = {name: i for i, name in enumerate(FIELDS)}
OP_READ, OP_WRITE, OP_DELETE = _simcore.OP_READ, _simcore.OP_WRITE, _simcore.OP_DELETE
#: a read the cache does not admit (admission filters): a request and a miss, never inserted
OP_BYPASS = _simcore.OP_BYPASS
#: Largest cache the engine simulates (9.2 EB): below it every policy's byte sums fit in u64.
MAX_CAPACITY = 2**63 - 1


@dataclass(frozen=True)
class CacheSpec:
    """One shadow cache: a policy at a byte capacity, optionally sampled or hash-partitioned."""

    policy: str
    capacity: int
    params: Mapping[str, float] = field(default_factory=dict)
    sample_rate: float = 1.0
    partitions: int = 1

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; known: {', '.join(POLICIES)}")
        if not 0 <= self.capacity <= MAX_CAPACITY:
            raise ValueError(f"capacity {self.capacity} bytes is outside 0..2^63-1 (9.2 EB), the caches simulated")

    def as_engine(self) -> dict:
        return {
            "policy": self.policy,
            "capacity": int(self.capacity),
            "params": {k: float(v) for k, v in self.params.items()},
            "sample_rate": float(self.sample_rate),
            "partitions": int(self.partitions),
        }


def ratios(counters: Sequence[int]) -> dict:
    """The field's definitions over one counter vector (fields, in FIELDS order): hit and transfer
    efficiency, None (JSON null) where nothing was read: an empty window has no efficiency.
    A delayed hit (a read that fetched nothing but waited for blocks in flight) is neither a hit
    nor a miss: hits + delayed_hits + misses = requests, and the same for their bytes."""
    c = [int(x) for x in counters]
    req, hits, breq, bhit = c[F["requests"]], c[F["hits"]], c[F["bytes_requested"]], c[F["bytes_hit"]]
    delayed, bdelayed = c[F["delayed_hits"]], c[F["bytes_delayed"]]
    return {
        "requests": req,
        "hits": hits,
        "hit_ratio": hits / req if req else None,
        "bytes_requested": breq,
        "bytes_hit": bhit,
        "byte_hit_ratio": bhit / breq if breq else None,
        "bytes_filled": c[F["bytes_filled"]],
        "evictions": c[F["evictions"]],
        "bytes_evicted": c[F["bytes_evicted"]],
        "delayed_hits": delayed,
        "delayed_hit_ratio": delayed / req if req else None,
        "misses": req - hits - delayed,
        "bytes_delayed": bdelayed,
        "bytes_missed": breq - bhit - bdelayed,
    }


class TraceError(UserError, ValueError):
    """A trace file that cannot be read as its format (exit 1)."""


TRACE_FORMATS = ("csv", "oracle-general")


def check_specs(specs: Sequence[CacheSpec]) -> None:
    """Raise ValueError for a spec the engine refuses (capacity, parameters), before any trace is read."""
    _simcore.Bank([s.as_engine() for s in specs], 1)


def simulate_file(path: str | Path, specs: Sequence[CacheSpec], fmt: str = "csv",
                  on_progress: Callable[[float], None] | None = None,
                  seeds: Sequence[tuple[int, Sequence[tuple[int, int, int]]]] = ()) -> tuple[list, list[str], int]:
    """Stream a trace file through every spec in one pass, in the engine (a reader thread
    decompresses and parses while the caches run). Returns exact totals as nested lists of ints
    (caches, tiers, fields), the tier names and the number of requests. Not for belady (needs the
    whole trace). `on_progress(fraction done)` is called about ten times a second, and with 1.0
    at the end, from this thread while the engine runs in another. `seeds`: (cache index, files
    (file_id, cached bytes, last access in epoch seconds)) warm starts of xcaches."""
    engine_specs = [s.as_engine() for s in specs]
    engine_seeds = [(int(c), [tuple(int(x) for x in f) for f in files]) for c, files in seeds] or None
    try:
        run = in_engine_thread(lambda progress: _simcore.simulate_file(str(path), engine_specs, fmt, progress,
                                                                       engine_seeds), on_progress)
    except ValueError as e:
        raise TraceError(str(e)) from None
    n_tiers, n_fields = max(1, len(run["tier_names"])), len(FIELDS)
    flat = run["totals"]
    per_cache = n_tiers * n_fields
    totals = [[flat[c * per_cache + t * n_fields:c * per_cache + (t + 1) * n_fields] for t in range(n_tiers)]
              for c in range(len(specs))]
    return totals, run["tier_names"], run["requests"]


def working_set(path: str | Path, fmt: str = "csv") -> tuple[int, int]:
    """(bytes of the trace file's distinct files, each at its first-seen size; its rows), in one
    streamed pass in the engine: what a `5%` size is a share of, without loading the trace."""
    try:
        return in_engine_thread(lambda progress: _simcore.working_set(str(path), fmt, progress))
    except ValueError as e:
        raise TraceError(str(e)) from None


def in_engine_thread(run: Callable, on_progress: Callable[[float], None] | None = None):
    """`run(progress)` in a thread of its own (the engine releases the GIL), this one waiting in
    steps of 0.1 s: Ctrl-C is seen at once and cancels the run (which stops at its next batch)
    instead of waiting for the end of a long trace; `on_progress(fraction done)` at each step."""
    import threading

    progress = _simcore.Progress()
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["value"] = run(progress)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread below
            outcome["error"] = e

    thread = threading.Thread(target=work, name="engine", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.1)
            if on_progress is not None:
                on_progress(progress.fraction())
    except KeyboardInterrupt:
        progress.cancel()
        thread.join(2.0)  # a reader blocked on standard input is left behind
        raise
    if "error" in outcome:
        raise outcome["error"]
    if on_progress is not None:
        on_progress(1.0)
    return outcome["value"]
