"""Rows for the pipeline_health table: what each component says about itself (lag, late events…)."""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np


def health_rows(component: str, cache_group: str, metrics: Mapping[str, float],
                ts_us: int | None = None) -> dict[str, np.ndarray]:
    n = len(metrics)
    ts = int(time.time() * 1e6) if ts_us is None else ts_us
    return {
        "ts": np.full(n, ts, dtype=np.int64).astype("datetime64[us]"),
        "component": np.full(n, component, dtype=object),
        "cache_group": np.full(n, cache_group, dtype=object),
        "metric": np.array(list(metrics), dtype=object),
        "value": np.array([float(v) for v in metrics.values()], dtype=np.float64),
    }
