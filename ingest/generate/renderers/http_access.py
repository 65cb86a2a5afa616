"""http-access: the lines its producer writes for the workload's accesses."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ingest.generate.model import OP_DELETE, OP_WRITE, Workload
from ingest.generate.names import Paths
from ingest.generate.renderers._common import CLF_CLOCK, Clock, Line, by_emit, columns


def render_http_access(w: Workload) -> Iterator[Line]:
    sizes = w.catalogue.size.tolist()
    paths = Paths(w, "dpm")
    clock = Clock(CLF_CLOCK)
    ts, dur, files, ops, nbytes, site_l, _, client_l = columns(w)
    emit = np.where(w.op == OP_DELETE, w.ts, w.ts + w.duration)
    for i in by_emit(emit):
        t, f, op, nb, s, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], client_l[i]
        path = paths(f, s)
        ip = f"10.{s % 250}.{cl // 250}.{cl % 250}"
        when = f"{clock.minute(t)}:{t // 1_000_000 % 60:02d} +0000"  # %t: when the request arrived
        if op == OP_DELETE:
            yield i, s, t, f'{ip} - - [{when}] "DELETE {path} HTTP/1.1" 204 - "-" "gfal2/2.21.5"'
        elif op == OP_WRITE:
            yield i, s, t + dur[i], f'{ip} - - [{when}] "PUT {path} HTTP/1.1" 201 - "-" "gfal2/2.21.5"'
        else:
            status = "200" if nb >= sizes[f] else "206"
            yield i, s, t + dur[i], f'{ip} - - [{when}] "GET {path} HTTP/1.1" {status} {nb} "-" "XrdCl/v5.6.4"'
