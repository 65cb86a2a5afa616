"""xrootd-gstream: the lines its producer writes for the workload's accesses."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import orjson

from ingest.generate.model import OP_READ, Workload
from ingest.generate.names import Paths, domain, server_names
from ingest.generate.renderers._common import Line


def render_xrootd_gstream(w: Workload) -> Iterator[Line]:
    hit, miss, byp = (a.tolist() for a in w.observed())
    caches = server_names(w, "xcache")
    paths = Paths(w, "xcache")
    sizes = w.catalogue.size.tolist()

    def remotes(s: int) -> str:  # the origin it fetched from; [] when nothing was fetched (a real hit)
        return f'["origin.{domain(w.sites[s])}:1094"]'
    # XCache flushes a packet per cache every 60 s ('mongstream pfc flush 60s'): a header, then the
    # records closed in that window; packets of all caches arrive interleaved by window.
    reads = np.flatnonzero(w.op == OP_READ)
    end_all = w.ts + w.duration
    window = end_all[reads] // 60_000_000
    key_all = w.site * w.n_servers + w.cache_server
    reads = reads[np.lexsort((end_all[reads], key_all[reads], window))]
    ts_l, dur_l, file_l, site_l, cs_l = (w.ts.tolist(), w.duration.tolist(), w.file.tolist(), w.site.tolist(),
                                         w.cache_server.tolist())
    previous = None
    pseq: dict[tuple[int, int], int] = {}
    emit = 0
    blk = 1048576
    for i in reads.tolist():
        t, dur, f, s, cs = ts_l[i], dur_l[i], file_l[i], site_l[i], cs_l[i]
        end = t + dur
        packet = (end // 60_000_000, s, cs)
        if packet != previous:
            emit = (packet[0] + 1) * 60_000_000  # the flush at the end of the window
            n = pseq[(s, cs)] = (pseq.get((s, cs), -1) + 1) % 256
            yield -1, s, emit, orjson.dumps({"code": "g", "pseq": n, "stod": w.start_us // 1_000_000,
                                             "src": {"site": w.sites[s], "host": caches[s][cs], "port": 1094,
                                                     "inst": "xcache"},
                                             "gs": {"type": "C", "tbeg": packet[0] * 60,
                                                    "tend": emit // 1_000_000}}).decode()
            previous = packet
        size = sizes[f]
        h, m, b = hit[i], miss[i], byp[i]
        n_blks = (size + blk - 1) // blk
        yield i, s, emit, (f'{{"event":"file_close","lfn":"{paths(f, s)}","size":{size},"blk_size":{blk},'
                           f'"n_blks":{n_blks},"n_blks_done":{min(n_blks, (h + m + blk - 1) // blk)},"access_cnt":1,'
                           f'"attach_t":{t // 1_000_000},"detach_t":{end // 1_000_000},'
                           f'"remotes":{remotes(s) if m or b else "[]"},"b_hit":{h},"b_miss":{m},'
                           f'"b_bypass":{b},"b_todisk":{m},"b_prefetch":0,"n_cks_errs":0}}')
