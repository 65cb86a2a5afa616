"""Engine benchmarks: single policies, a bank of 3 policies × 8 sizes, the exact LRU curve."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from cachescope.simulation import POLICIES, CacheSpec, LruCurve, ShadowBank, Trace, log_grid, next_access_times


def _timed(run: Callable[[], object], repeat: int) -> float:
    """Best of `repeat` wall-clock runs: the least disturbed by other work on a shared machine."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def _feed_all(trace: Trace, specs: list[CacheSpec], engine=None) -> None:
    """One pass of the whole trace through a bank of `specs` (in `engine`, a loaded _simcore
    module, or this build's)."""
    if engine is None:
        bank, next_access_of = ShadowBank(specs, 1), next_access_times
    else:
        bank = ShadowBank(specs, 1, _engine=engine.Bank([s.as_engine() for s in specs], 1))
        next_access_of = engine.next_access_times
    ops = np.zeros(len(trace), dtype=np.uint8)
    next_access = None
    if bank.needs_future:
        next_access = next_access_of(trace.file_id)
    bank.feed(trace.file_id, trace.file_size, trace.bytes_read, trace.tier, ops, next_access)


def load_engine(path: str):
    """Another build of the engine (a `_simcore*.so`), loaded beside this one under its own
    package name, to time two builds side by side in one process."""
    import importlib.machinery
    import importlib.util
    import sys
    import types

    pkg = f"_engine_{abs(hash(path))}"
    sys.modules.setdefault(pkg, types.ModuleType(pkg)).__path__ = []
    name = f"{pkg}._simcore"
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def compare_policy_rates(trace: Trace, policies: list[str], capacity: int, other, repeat: int = 3) -> dict[str, dict]:
    """requests/s of each policy in this build and in `other`, runs interleaved (this, other,
    this, other, …) so both see the same machine; best of `repeat` each. Timed in CPU time of
    this thread (one cache runs on the calling thread), which a loaded machine disturbs less
    than wall-clock time."""
    out = {}
    for p in policies:
        best = {"this": float("inf"), "other": float("inf")}
        for _ in range(repeat):
            for which, engine in (("this", None), ("other", other)):
                t0 = time.thread_time()
                _feed_all(trace, [CacheSpec(p, capacity)], engine)
                best[which] = min(best[which], time.thread_time() - t0)
        out[p] = {"this": len(trace) / best["this"], "other": len(trace) / best["other"],
                  "ratio": best["other"] / best["this"]}
    return out


def policy_rates(trace: Trace, policies: list[str], capacity: int, repeat: int = 3) -> dict[str, float]:
    """requests/s of each policy alone, from a pre-loaded trace, single-threaded."""
    return {p: len(trace) / _timed(lambda: _feed_all(trace, [CacheSpec(p, capacity)]), repeat) for p in policies}


def bank_rate(trace: Trace, policies: list[str], capacities: list[int], repeat: int = 3) -> float:
    """events/s of one pass through a bank of every (policy, capacity)."""
    specs = [CacheSpec(p, c) for p in policies for c in capacities]
    return len(trace) / _timed(lambda: _feed_all(trace, specs), repeat)


def curve_rate(trace: Trace, grid: list[int], repeat: int = 3) -> float:
    """events/s of the exact LRU miss-ratio curve at len(grid) capacities."""
    ops = np.zeros(len(trace), dtype=np.uint8)

    def run() -> None:
        LruCurve(grid, 1).feed(trace.file_id, trace.file_size, trace.bytes_read, trace.tier, ops)

    return len(trace) / _timed(run, repeat)


def default_policies() -> list[str]:
    return list(POLICIES)


def bank_grid(working_set: int) -> list[int]:
    """8 capacities from 1% to 50% of the working set."""
    return log_grid(working_set // 100, working_set // 2, 8)
