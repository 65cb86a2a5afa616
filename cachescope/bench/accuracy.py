"""How far approximations land from the full simulation: SHARDS sampling and hash partitions."""

from __future__ import annotations

import numpy as np

from cachescope.simulation import CacheSpec, LruCurve, Trace, simulate


def _hit_ratios(totals: np.ndarray) -> np.ndarray:
    per_cache = totals.sum(axis=1)
    return per_cache[:, 1] / np.maximum(per_cache[:, 0], 1)


def variant_errors(trace: Trace, policies: list[str], capacities: list[int],
                   variants: list[tuple[str, float, int]]) -> list[dict]:
    """Largest |hit efficiency − full simulation| per (label, sample_rate, partitions) variant."""
    full = _hit_ratios(simulate(trace, [CacheSpec(p, c) for p in policies for c in capacities]))
    out = []
    for label, rate, parts in variants:
        approx = _hit_ratios(simulate(trace, [CacheSpec(p, c, {}, rate, parts) for p in policies for c in capacities]))
        err = np.abs(approx - full)
        out.append({"variant": label, "sample_rate": rate, "partitions": parts,
                    "max_abs_error": float(err.max()), "mean_abs_error": float(err.mean())})
    return out


def curve_errors(trace: Trace, grid: list[int], variants: list[tuple[str, float, int]]) -> list[dict]:
    """Largest |hit efficiency − exact| over the grid for sampled LRU curves (fixed rate / fixed size)."""
    ops = np.zeros(len(trace), dtype=np.uint8)

    def ratios(rate: float, max_objects: int) -> np.ndarray:
        c = LruCurve(grid, max(1, len(trace.tier_names)), rate, max_objects)
        c.feed(trace.file_id, trace.file_size, trace.bytes_read, trace.tier, ops)
        return np.array([p["hit_ratio"] for p in c.points()])

    exact = ratios(1.0, 0)
    out = []
    for label, rate, max_objects in variants:
        err = np.abs(ratios(rate, max_objects) - exact)
        out.append({"variant": label, "sample_rate": rate, "max_objects": max_objects,
                    "max_abs_error": float(err.max()), "mean_abs_error": float(err.mean())})
    return out
