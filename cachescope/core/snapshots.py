"""A GroupProcessor's saved state (Flink's keyed state, savepoints): the versioned msgpack form of
every part, written and read here only, and the warm start of xcache shadows from a real cache's
contents (`pipeline.shadow.xcache_seeds`)."""

from __future__ import annotations

import msgspec
import numpy as np

from cachescope.config.pipeline import PipelineConfig
from cachescope.core.cells import Cells
from cachescope.core.observed import OBSERVED_FIELDS
from cachescope.core.rollups import ROLLUPS
from cachescope.core.tier_codes import TierCodes
from cachescope.simulation import FIELDS, LruCurve, ShadowBank

# "GroupProcessor" below names cachescope.core.processor's class, not imported: the processor
# imports this module, and the import graph stays acyclic

STATE_VERSION = 2  # 2: hour and day windows in the state


def snapshot(p: "GroupProcessor") -> bytes:
    """Everything needed to continue exactly where `p` left off (keys in this order: a state
    written before the processor was split has the same bytes)."""
    shadow, shape = p.shadow, p.shadow.shape
    state = {
        "v": STATE_VERSION,
        "group": p.cache_group,
        "shard": p.shard,
        "shards": p.config.shards,
        "specs": [s.as_engine() for s in shadow.specs],
        "bank": shadow.bank.snapshot(),
        "curve": p.curves.curve.snapshot() if p.curves is not None else None,
        "tiers": shadow.tiers.names,
        "max_ts": p.time.max_ts,
        "events_in": p.events_in,
        "late_total": p.late_total,
        "run": p.run,
        "eff": Cells.concat([Cells.empty(len(FIELDS)), *shadow.open]).dense(shadow.open_starts, shape, shadow.window_us),
        "eff_shape": list(shape),
        "rollups": {name: w.dense(p.rollups.open_starts[name], shape, ROLLUPS[name]) for name, w in p.rollups.open.items()},
        "curve_open": [(s, h.tobytes(), r.tobytes()) for s, (h, r) in sorted(p.curves.open.items())] if p.curves else [],
        "obs": p.real.open.items(),
        "alerts": p.alerts.snapshot() if p.alerts else None,
    }
    return msgspec.msgpack.encode(state)


def restore(cls: type["GroupProcessor"], cache_group: str, config: PipelineConfig, data: bytes,
            shard: int = 0) -> "GroupProcessor":
    state = msgspec.msgpack.decode(data)
    v = state.get("v")
    if v != STATE_VERSION:  # a savepoint of another release: refused in one line that says what to do
        which = "an older" if isinstance(v, int) and v < STATE_VERSION else "another"
        raise ValueError(f"saved state of cache group {cache_group!r} has format version {v} ({which} cachescope "
                         f"release), this build reads version {STATE_VERSION}: resume that savepoint with the "
                         "release that wrote it, or start this one without --restore (empty state)")
    p = cls(cache_group, config, shard)
    shadow = p.shadow
    if state["specs"] != [s.as_engine() for s in shadow.specs] or (state["shard"], state["shards"]) != (shard, config.shards):
        raise ValueError(f"saved state of cache group {cache_group!r} was made with other shadow caches; "
                         "start from an empty state (or restore the old configuration)")
    shadow.bank = ShadowBank.restore(state["bank"])
    if p.curves is not None and state["curve"] is not None:
        p.curves.curve = LruCurve.restore(state["curve"])
    shadow.tiers = TierCodes(config.n_tiers, state["tiers"])
    p.time.max_ts, p.events_in, p.late_total = state["max_ts"], state["events_in"], state["late_total"]
    p.run = state["run"]
    shape = tuple(state["eff_shape"])
    cells, shadow.open_starts = _all_fields(*Cells.from_dense(state["eff"], shape))
    shadow.open = [cells.summed(shadow.window_us)] if cells.n else []
    for name, length in ROLLUPS.items():
        cells, p.rollups.open_starts[name] = _all_fields(*Cells.from_dense(state["rollups"][name], shape))
        p.rollups.open[name] = cells.summed(length)
    if p.curves is not None:
        k, t = len(p.curves.curve.grid), config.n_tiers
        p.curves.open = {
            s: (np.frombuffer(h, dtype=np.float64).reshape(k, t, 2).copy(),
                np.frombuffer(r, dtype=np.float64).reshape(t, 2).copy())
            for s, h, r in state["curve_open"]
        }
    n_obs = len(OBSERVED_FIELDS)  # a state saved before migration 0014's fields: those read 0
    obs = [(k, list(v) + [0] * (n_obs - len(v))) for k, v in state["obs"]]
    p.real.open = Cells.from_items(obs, n_obs).summed(p.real.window_us)
    p.alerts.restore(state.get("alerts"))
    return p


def _all_fields(cells: Cells, starts: set[int]) -> tuple[Cells, set[int]]:
    """Counter cells of a state saved before the last counters existed (delayed hits): those
    start at 0."""
    missing = len(FIELDS) - cells.values.shape[1]
    if missing > 0:
        cells.values = np.hstack([cells.values, np.zeros((len(cells.values), missing), dtype=cells.values.dtype)])
    return cells, starts


def seed(p: "GroupProcessor", path: str) -> None:
    """Warm start of the xcache shadows with what the group's real XCache holds (its
    `xrdpfc_print -j` output); paths normalised by the shipped tier rules, as ids are made."""
    from cachescope.tiers import TierClassifier
    from cachescope.xrdpfc import read_seed

    classifier = TierClassifier.load([])
    files = read_seed(path, lambda path: classifier.path_tier(path)[0])
    if p.config.shards > 1 and files:
        mine = p.routing.mine(np.array([f[0] for f in files], dtype=np.uint64))
        files = [f for f, keep in zip(files, mine) if keep]
    for i, spec in enumerate(p.shadow.specs):
        if spec.policy == "xcache":
            p.shadow.bank.seed(i, files)
