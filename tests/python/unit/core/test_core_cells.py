"""cachescope.core.cells.Cells: the one sparse counter table of the processing core (the shadow
caches' cells by cache index and tier code, the real cache's by server and tier name)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cachescope.core.cells import Cells, positions

MINUTE = 60_000_000
T0 = 1_700_000_000 // 60 * MINUTE


def _reference(start, who, tier, values) -> pd.DataFrame:
    """Cells summed by a pandas group-by, sorted by (start, who, tier)."""
    df = pd.DataFrame(values, columns=[f"v{i}" for i in range(values.shape[1])])
    df["start"], df["who"], df["tier"] = start, who, tier
    return df.groupby(["start", "who", "tier"], sort=True).sum().reset_index()


def _shadow_cells(rng, n: int, minutes: int = 30) -> Cells:
    return Cells(T0 + rng.integers(0, minutes, n) * MINUTE, rng.integers(0, 6, n), rng.integers(0, 4, n),
                 rng.integers(0, 1000, (n, 3)).astype(np.uint64))


def _named_cells(rng, n: int) -> Cells:
    return Cells(T0 + rng.integers(0, 30, n) * MINUTE, np.array(["xc-2", "xc-10", "Ä"], dtype=object)[rng.integers(0, 3, n)],
                 np.array(["AOD", "USER"], dtype=object)[rng.integers(0, 2, n)], rng.integers(0, 1000, (n, 6)))


@pytest.mark.parametrize("make", [_shadow_cells, _named_cells], ids=["cache-index", "server-name"])
def test_summed_is_one_cell_per_window_who_and_tier_in_their_order(make):
    rng = np.random.default_rng(1)
    cells = make(rng, 3_000)
    got = cells.summed(MINUTE)
    want = _reference(cells.start, cells.who, cells.tier, cells.values)
    assert got.start.tolist() == want["start"].tolist()
    assert got.who.tolist() == want["who"].tolist() and got.tier.tolist() == want["tier"].tolist()
    assert (got.values == want[[c for c in want if c.startswith("v")]].to_numpy()).all()
    assert got.values.dtype == cells.values.dtype and got.n < cells.n


def test_named_and_indexed_cells_share_one_table():
    rng = np.random.default_rng(2)
    shadow, real = _shadow_cells(rng, 10), _named_cells(rng, 10)
    assert type(shadow) is type(real) is Cells
    assert shadow.cache is shadow.who and real.server is real.who


def test_split_at_the_watermark_leaves_closed_windows_and_open_ones():
    rng = np.random.default_rng(3)
    for make in (_shadow_cells, _named_cells):
        cells = make(rng, 2_000).summed(MINUTE)
        closed_before = T0 + 12 * MINUTE + MINUTE // 2  # inside the 13th minute: 12 are closed
        closed, still_open = cells.split(closed_before, MINUTE)
        assert closed.n + still_open.n == cells.n and closed.n and still_open.n
        assert (closed.start + MINUTE <= closed_before).all() and (still_open.start + MINUTE > closed_before).all()
        assert set(closed.start.tolist()) == {T0 + m * MINUTE for m in range(12)}
        everything, nothing = cells.split(None, MINUTE)  # end of input: all closed
        assert everything.n == cells.n and nothing.n == 0 and nothing.values.shape[1] == cells.values.shape[1]


def test_pieces_of_batches_equal_every_cell_summed_once_and_split_alike():
    rng = np.random.default_rng(4)
    batches, pieces = [], []
    for b in range(20):  # each batch reaches back into the last open windows
        n = int(rng.integers(0, 300))
        start = np.sort(T0 + (b + rng.integers(-3, 10, n)).clip(0) * MINUTE)
        cells = Cells(start, rng.integers(0, 4, n), rng.integers(0, 3, n), rng.integers(0, 99, (n, 2)).astype(np.uint64))
        batches.append(cells.summed(MINUTE))
        pieces = Cells.add_to_pieces(pieces, batches[-1], MINUTE)
    whole = Cells.concat(batches).summed(MINUTE)
    cut = int(whole.start[whole.n // 3]) + MINUTE
    closed, still_open = Cells.split_pieces(pieces, cut, MINUTE)
    want_closed, want_open = whole.split(cut, MINUTE)
    for got, want in ((Cells.concat([Cells.empty(2), *closed]), want_closed),
                      (Cells.concat([Cells.empty(2), *still_open]), want_open)):
        assert got.start.tolist() == want.start.tolist() and got.cache.tolist() == want.cache.tolist()
        assert got.tier.tolist() == want.tier.tolist() and (got.values == want.values).all()


def test_dense_snapshot_form_round_trips_including_a_window_without_counters():
    rng = np.random.default_rng(5)
    cells = _shadow_cells(rng, 500, minutes=4).summed(MINUTE)
    shape = (6, 4, 3)
    starts = set(cells.start.tolist()) | {T0 + 99 * MINUTE}  # a window of only deletes: no cell
    dense = cells.dense(starts, shape, MINUTE)
    assert [s for s, _ in dense] == sorted(starts) and all(len(b) == 6 * 4 * 3 * 8 for _, b in dense)
    back, back_starts = Cells.from_dense(dense, shape)
    back = back.summed(MINUTE)
    assert back_starts == starts
    nonzero = cells[np.flatnonzero(cells.values.any(axis=1))]
    assert back.start.tolist() == nonzero.start.tolist() and back.cache.tolist() == nonzero.cache.tolist()
    assert back.tier.tolist() == nonzero.tier.tolist() and (back.values == nonzero.values).all()


def test_items_snapshot_form_round_trips():
    rng = np.random.default_rng(6)
    cells = _named_cells(rng, 400).summed(MINUTE)
    back = Cells.from_items(cells.items(), 6)
    assert back.start.tolist() == cells.start.tolist() and back.server.tolist() == cells.server.tolist()
    assert back.tier.tolist() == cells.tier.tolist() and (back.values == cells.values).all()
    assert back.values.dtype == np.int64


def test_empty_tables():
    for empty in (Cells.empty(10), Cells.empty(6, np.int64, object), Cells.from_items([], 6), Cells.from_dense([], (2, 3, 10))[0]):
        assert empty.n == 0 and empty.summed(MINUTE).n == 0 and empty.items() == []
        closed, still_open = empty.split(T0, MINUTE)
        assert closed.n == still_open.n == 0
    assert Cells.from_items([], 6).who.dtype == object and Cells.empty(10).values.shape == (0, 10)
    one = Cells(np.array([T0]), np.array([2]), np.array([1]), np.ones((1, 10), dtype=np.uint64))
    assert Cells.concat([Cells.empty(10), one, Cells.empty(10)]) is one
    assert Cells.add_to_pieces([], Cells.empty(10), MINUTE) == []


def test_positions_equal_searchsorted():
    rng = np.random.default_rng(9)
    done = np.unique(rng.integers(0, 300, 50)) * 60
    for n in (0, 1, 5_000):
        starts = np.sort(np.r_[rng.choice(done, n), rng.integers(-5, 400, n // 10) * 60])
        assert np.array_equal(positions(done, starts), np.searchsorted(done, starts))
