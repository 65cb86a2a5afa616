"""Data-tier names ↔ the small integers the engine counts by, stable for a cache group's life
(they are part of its saved state)."""

from __future__ import annotations

import numpy as np

# pandas.factorize of str columns, compiled; None selects np.unique (the tests' reference)
from cachescope.specs import factorize_str as _factorize_str

OTHER = "OTHER"


class TierCodes:
    def __init__(self, n_tiers: int, names: list[str] | None = None):
        self.n_tiers = n_tiers
        self.names: list[str] = list(names) if names else [OTHER]
        self._code = {n: i for i, n in enumerate(self.names)}

    def encode(self, tiers: np.ndarray) -> np.ndarray:
        """uint8 codes; a tier seen for the first time gets the next code, or OTHER when full."""
        if len(tiers) == 0:
            return np.zeros(0, dtype=np.uint8)
        got = _factorize_str(tiers) if _factorize_str is not None and tiers.dtype == object else None
        if got is not None and not any(u.endswith("\x00") for u in got[1]):
            # the distinct names in np.unique's order (code points; `astype(str)` would only differ
            # for trailing NULs), without converting and sorting every element
            first, names = got
            rank = sorted(range(len(names)), key=names.__getitem__)
            uniq = [names[i] for i in rank]
            inverse = np.empty(len(names), dtype=np.int64)
            inverse[rank] = np.arange(len(names))
            inverse = inverse[first]
        else:
            uniq, inverse = np.unique(tiers.astype(str), return_inverse=True)
        codes = np.empty(len(uniq), dtype=np.uint8)
        for i, name in enumerate(uniq):
            name = str(name) or "UNKNOWN"
            code = self._code.get(name)
            if code is None:
                if len(self.names) < self.n_tiers:
                    code = len(self.names)
                    self.names.append(name)
                    self._code[name] = code
                else:
                    code = self._code[OTHER]
            codes[i] = code
        return codes[inverse.reshape(-1)]
