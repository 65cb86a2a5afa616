"""Rows waiting to be written, kept inside a cache group's state.

Because the outbox is part of the checkpointed state, rows emitted before a checkpoint but not
yet written are written after a restore; rows written and then replayed again are identical,
and the ReplacingMergeTree tables keep one. So a crash neither loses nor double-counts a row.
"""

from __future__ import annotations

import numpy as np

from cachescope.store import tables


class Outbox:
    def __init__(self) -> None:
        self.tables: dict[str, list[dict[str, np.ndarray]]] = {}
        self.rows = 0

    def add(self, table: str, columns: dict[str, np.ndarray] | None) -> None:
        if columns is None:
            return
        n = len(next(iter(columns.values())))
        if n:
            self.tables.setdefault(table, []).append(columns)
            self.rows += n

    def add_emitted(self, emitted) -> None:
        self.add(tables.EFFICIENCY, emitted.efficiency)
        self.add(tables.MRC, emitted.mrc)
        self.add(tables.OBSERVED, emitted.observed)

    def drain(self) -> dict[str, dict[str, np.ndarray]]:
        """Everything pending, one column dict per table; the outbox is empty afterwards."""
        out = {
            table: {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
            for table, parts in self.tables.items()
        }
        self.tables, self.rows = {}, 0
        return out

    def __len__(self) -> int:
        return self.rows
