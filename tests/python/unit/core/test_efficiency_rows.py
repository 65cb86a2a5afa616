"""EfficiencyRows: the core's counter cells become the efficiency table's columns in the writer.

The reference builds each row from its cell in plain Python (the labels looked up per row), so a
wrong offset between parts, a label of the wrong cache or tier, or a transposition that mixes
counters fails it."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from cachescope._simcore import stacked_columns
from cachescope.core import GroupProcessor, PipelineConfig
from cachescope.core.efficiency_rows import EfficiencyRows
from cachescope.core.outbox import Batch
from cachescope.simulation import FIELDS
from support.synthetic import TIERS, event_stream

CONFIG = PipelineConfig.model_validate({
    "shadow": {"policies": ["lru", "arc"], "sizes": ["50GB", "500GB"], "sample_rate": 0.5, "partitions": 2},
    "windows": {"efficiency": "5m", "max_out_of_orderness": "30s", "allowed_lateness": "0s"},
    "curve": {"enabled": False},
})


def _emitted(group: str, ev, cuts: list[int], shard: int = 0, config=CONFIG) -> list[EfficiencyRows]:
    p = GroupProcessor(group, config, shard)
    bounds = [0, *cuts, len(ev)]
    outs = [p.process(ev.take(np.arange(a, b))) for a, b in zip(bounds, bounds[1:])] + [p.flush()]
    return [o.efficiency for o in outs if o.efficiency is not None]


def _reference(parts: list[EfficiencyRows]) -> pd.DataFrame:
    rows = []
    for p in parts:
        for start, cache, tier, values in zip(p.starts, p.caches, p.tiers, p.values):
            for s, c, t, v in zip(start.tolist(), cache.tolist(), tier.tolist(), values.tolist()):
                spec = p.specs[c]
                rows.append({
                    "window_start": np.datetime64(s, "us"), "window_end": np.datetime64(s + p.length_us, "us"),
                    "cache_group": p.cache_group, "policy": spec.policy, "size_bytes": spec.capacity,
                    "tier": p.tier_names[t], "sample_rate": spec.sample_rate, "partitions": spec.partitions,
                    **dict(zip(FIELDS, v)), "shard": p.shard, "run": p.run,
                })
    return pd.DataFrame(rows)


def _frame(columns: dict) -> pd.DataFrame:
    df = pd.DataFrame(columns)
    return df.astype({c: object for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)})


def test_merged_parts_are_each_cell_as_a_row_with_its_own_labels():
    a = event_stream(n=6000, seed=3)
    b = event_stream(n=4000, seed=4)
    b.tier = np.where(b.tier == "AOD", "RAW", b.tier)  # a tier the other group never saw: codes differ
    sharded = CONFIG.model_copy(update={"shards": 2})
    parts = _emitted("site-A", a, [1500, 4000]) + _emitted("site-B", b, [2500], shard=1, config=sharded)
    assert len({p.cache_group for p in parts}) == 2 and len(parts) > 3
    assert parts[0].tier_names != parts[-1].tier_names
    got = _frame(EfficiencyRows.merged(parts))
    want = _reference(parts)
    assert len(got) == sum(len(p) for p in parts) > 0
    pd.testing.assert_frame_equal(got[want.columns], want, check_dtype=False)
    assert set(got["tier"]) <= {*TIERS, "RAW"}


def test_a_batch_of_several_groups_gives_the_merged_columns():
    parts = _emitted("site-A", event_stream(n=3000, seed=5), [1000]) + _emitted("site-B", event_stream(n=3000, seed=6), [])
    batch = Batch({"efficiency": parts}, sum(len(p) for p in parts))
    pd.testing.assert_frame_equal(_frame(batch.columns()["efficiency"]), _frame(EfficiencyRows.merged(parts)))


def test_rows_survive_a_checkpoint():
    part = _emitted("site-A", event_stream(n=3000, seed=7), [])[0]
    again = pickle.loads(pickle.dumps(part))
    pd.testing.assert_frame_equal(_frame(again.columns()), _frame(part.columns()))


def test_stacked_columns_transpose_every_block_in_order():
    rng = np.random.default_rng(0)
    blocks = [rng.integers(0, 2**64 - 1, size=(n, 7), dtype=np.uint64) for n in (5, 0, 1, 300)]
    np.testing.assert_array_equal(stacked_columns(blocks), np.concatenate(blocks).T)
    with pytest.raises(ValueError, match="block 1 has 3 columns"):
        stacked_columns([blocks[0], np.zeros((2, 3), dtype=np.uint64)])
