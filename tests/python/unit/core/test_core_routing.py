"""cachescope.core.routing.ShadowRouting: the shard split of capacities and files, and admission
(excluded reads bypass the shadow caches and count as a request and a miss)."""

from __future__ import annotations

import numpy as np

from cachescope.config.pipeline import PipelineConfig
from cachescope.core.routing import ShadowRouting
from cachescope.simulation import FIELDS, ShadowBank
from support.synthetic import event_stream


def _config(shards: int = 1, admission: dict | None = None) -> PipelineConfig:
    shadow = {"policies": ["lru"], "sizes": ["50GB", "5TB"]}
    if admission:
        shadow["admission"] = admission
    return PipelineConfig.model_validate({"shards": shards, "shadow": shadow, "curve": {"enabled": False}})


def test_shards_together_hold_the_capacity_and_every_file_once():
    config = _config(shards=3)
    routes = [ShadowRouting(config, k) for k in range(3)]
    for capacity in (0, 1, 2, 10**12 + 1, 50 * 10**9):
        parts = [r.share(capacity) for r in routes]
        assert sum(parts) == capacity and max(parts) - min(parts) <= 1
    ids = np.random.default_rng(1).integers(1, 2**63, 5_000).astype(np.uint64)
    mine = np.stack([r.mine(ids) for r in routes])
    assert (mine.sum(axis=0) == 1).all() and mine.all(axis=1).sum() == 0
    assert ShadowRouting(_config(), 0).mine(ids).all()


def _feed(routing: ShadowRouting, ev, keep: np.ndarray | None = None) -> dict[tuple[int, int, int], np.ndarray]:
    """One window's cells of a fresh bank fed `ev` (only the events `keep`)."""
    config = _config()
    bank = ShadowBank(config.shadow.specs(), config.n_tiers)
    tier = np.unique(ev.tier, return_inverse=True)[1].astype(np.uint8)
    index = np.zeros(len(ev), dtype=np.int64)
    if keep is not None:
        ev, tier, index = ev.take(np.flatnonzero(keep)), tier[keep], index[keep]
    cells = routing.feed(bank, ev, tier, index, int(tier.max()) + 1, parallel=False)
    return {(int(s), int(c), int(t)): v for s, c, t, v in zip(cells.start, cells.cache, cells.tier, cells.values)}


def test_excluded_reads_are_requests_and_misses_beside_the_caches():
    """The bank sees every event but the excluded reads (writes and deletes of the tier too); the
    excluded reads add a request and their bytes, no hit, to their tier in each cache."""
    ev = event_stream(3_000, deletes=0.02)
    tiers = sorted(set(ev.tier.tolist()))
    excluded = tiers[0]
    reads = (ev.tier == excluded) & (ev.op == 0)
    assert reads.any() and ((ev.tier == excluded) & (ev.op != 0)).any()
    got = _feed(ShadowRouting(_config(admission={"exclude_tiers": [excluded]}), 0), ev)
    # the reference: no admission, the excluded reads left out (tier codes as in the whole batch)
    want = _feed(ShadowRouting(_config(), 0), ev, keep=~reads)
    code = tiers.index(excluded)
    req, breq = FIELDS.index("requests"), FIELDS.index("bytes_requested")
    for c in range(2):
        bypass = np.zeros(len(FIELDS), dtype=np.uint64)
        bypass[req], bypass[breq] = reads.sum(), ev.bytes_read[reads].sum()
        want[(0, c, code)] = want.get((0, c, code), np.zeros(len(FIELDS), dtype=np.uint64)) + bypass
    assert got.keys() == want.keys()
    for key, v in want.items():
        assert (got[key] == v).all(), key
