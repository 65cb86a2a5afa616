"""Helpers the renderers share: cached clocks, columns as lists, emit order.

Rendering: one function per format, yielding (access index or -1 for noise, site, emit time us,
line) in the order the producer writes them (by the time each record is emitted), so lines
stream to files without being held and sorted.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

import numpy as np

from ingest.generate.model import Workload

Line = tuple[int, int, int, str]


class Clock:
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


MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
BILLING_CLOCK = lambda d: f"{d.month:02d}.{d.day:02d} {d.hour:02d}:{d.minute:02d}"  # noqa: E731
CLF_CLOCK = lambda d: f"{d.day:02d}/{MONTHS[d.month - 1]}/{d.year}:{d.hour:02d}:{d.minute:02d}"  # noqa: E731


def columns(w: Workload) -> tuple[list, ...]:
    return (w.ts.tolist(), w.duration.tolist(), w.file.tolist(), w.op.tolist(), w.bytes_read.tolist(),
            w.site.tolist(), w.server.tolist(), w.client.tolist())


def noise(w: Workload, salt: int) -> list[float]:
    """One uniform [0, 1) draw per access, fixed by the workload's seed and the renderer's `salt`
    (each format draws its own, so adding one format changes no other's lines)."""
    return np.random.default_rng(w.seed + salt).random(len(w)).tolist()


def by_emit(emit: np.ndarray, keep: np.ndarray | None = None) -> list[int]:
    """Access indices in the order their records are emitted."""
    idx = np.arange(len(emit)) if keep is None else np.flatnonzero(keep)
    return idx[np.argsort(emit[idx], kind="stable")].tolist()
