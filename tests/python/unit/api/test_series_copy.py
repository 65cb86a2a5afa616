"""The efficiency table copy's fast load (api/series_index.py): its names, codes and row orders
are exactly those of np.unique and np.lexsort, which it replaced (an answer of the copy is
compared with the read layer's in test_api.py)."""

from __future__ import annotations

import numpy as np
import pytest

from api.series_index import _codes, _sort_order


def _lexsorted(cols, ws, tier):
    return np.lexsort((tier, ws, *reversed(cols)))


@pytest.mark.parametrize("cards,ws_range", [
    ((3, 6, 4, 8), (1_700_000_000, 1_700_000_000 + 30 * 86_400)),  # one int64 key
    ((1, 1, 1), (0, 10)),
    ((2000, 2000, 600, 3), (1_700_000_000, 1_700_000_100)),  # codes too many for one key: lexsort
    ((3, 2), (-5, 5)),  # a window before 1970: lexsort
    ((3, 2), (2**32 - 3, 2**32 + 3)),  # past 2106: lexsort
])
def test_sort_order_is_the_lexsort(cards, ws_range):
    rng = np.random.default_rng(7)
    n = 5000
    cols = tuple(rng.integers(0, c, n).astype(np.int64) for c in cards[:-1])
    tier = rng.integers(0, cards[-1], n).astype(np.int64)
    ws = rng.integers(*ws_range, n).astype(np.int64)  # many ties: stability matters
    assert np.array_equal(_sort_order(cols, ws, tier), _lexsorted(cols, ws, tier))
    assert np.array_equal(_sort_order(cols + (tier,), ws, tier), _lexsorted(cols + (tier,), ws, tier))


def test_sort_order_of_no_rows():
    e = np.zeros(0, np.int64)
    assert len(_sort_order((e, e), e, e)) == 0


@pytest.mark.parametrize("values", [
    np.array(["MWT2", "AGLT2", "mwt2", "", "Nebraska", "AGLT2", "Zürich", "MWT2"], dtype=object),
    np.array(["DAOD_PHYS"] * 3 + ["AOD"] * 2, dtype=object),
    np.array([10**13, 10**12, 5 * 10**13, 10**12, 2**64 - 1], dtype=np.uint64),
    np.array([], dtype=object),
])
def test_codes_are_those_of_unique(values):
    names, codes = _codes(values)
    want_names, want_codes = np.unique(values.astype(str) if values.dtype == object else values, return_inverse=True)
    assert names.tolist() == want_names.tolist()
    assert names.dtype == want_names.dtype or len(values) == 0
    assert codes.tolist() == want_codes.tolist()
    assert codes.dtype == np.int64


@pytest.mark.parametrize("values", [
    ["MWT2", "AGLT2", "mwt2", "", "Nebraska", "AGLT2", "Zürich", "MWT2"],
    ["DAOD_PHYS"] * 3 + ["AOD"] * 2,
    [],
])
def test_names_as_places_give_the_codes_of_the_names(values):
    """The copy's load reads names as 1-based places in the table's sorted names (a number per row
    instead of a string): the same names and codes as from the strings, a listed name that no row
    holds left out."""
    from api.series_index import _placed

    listed = sorted(set(values) | {"UNUSED", "aaa"})
    places = np.array([listed.index(v) + 1 for v in values], dtype=np.uint64)
    names, codes = _placed(places, listed)
    want_names, want_codes = _codes(np.array(values, dtype=object))
    assert names.tolist() == want_names.tolist() and codes.tolist() == want_codes.tolist()
