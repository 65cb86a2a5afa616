"""csv: the lines its producer writes for the workload's accesses."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ingest.generate.model import OP_READ, Workload
from ingest.generate.renderers._common import Line, columns


def render_csv(w: Workload) -> Iterator[Line]:
    from cachescope.events import file_id_of

    cat = w.catalogue
    sizes = cat.size.tolist()
    ids: dict[int, int] = {}
    ts, _, files, _, nbytes, site_l, _, _ = columns(w)
    for i in np.flatnonzero(w.op == OP_READ).tolist():  # already in time order
        t, f, s = ts[i], files[i], site_l[i]
        fid = ids.get(f)
        if fid is None:
            fid = ids[f] = file_id_of(cat.path[f])
        yield i, s, t, f"{t // 1_000_000},{fid},{sizes[f]},{cat.tier[f]},{cat.path[f]},{nbytes[i]}"
