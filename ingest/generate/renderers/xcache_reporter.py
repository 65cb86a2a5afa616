"""xcache-reporter: the lines its producer writes for the workload's accesses."""

from __future__ import annotations

from typing import Iterator

from ingest.generate.model import MIB, OP_READ, Workload
from ingest.generate.names import server_names
from ingest.generate.renderers._common import Line, by_emit, columns


def render_xcache_reporter(w: Workload) -> Iterator[Line]:
    hit, miss, byp = (a.tolist() for a in w.observed())
    caches = server_names(w, "xcache")
    sizes = w.catalogue.size.tolist()
    cat_path = w.catalogue.path
    ts, dur, files, ops, _, site_l, _, _ = columns(w)
    cs_l = w.cache_server.tolist()
    for i in by_emit(w.ts + w.duration, w.op == OP_READ):
        t, f, s, cs = ts[i], files[i], site_l[i], cs_l[i]
        end = t + dur[i]
        path = cat_path[f]
        file = path[len("/atlas/rucio/"):] if path.startswith("/atlas/rucio/") else path
        size = sizes[f]
        h, m, b = hit[i], miss[i], byp[i]
        yield i, s, end, (f'{{"sender":"xCache","type":"docs","site":"{w.sites[s]}","host":"{caches[s][cs]}",'
                          f'"file":"{file}","size":{size},"created_at":{w.start_us // 1000},'
                          f'"blocks":{(size + MIB - 1) // MIB},"blocks_cached":{(h + m + MIB - 1) // MIB},'
                          f'"access":0,"attached_at":{t // 1000},"detached_at":{end // 1000},'
                          f'"ios":{1 + (h + m) // MIB},"duration":{dur[i] // 1_000_000},"bytes_hit":{h},'
                          f'"bytes_miss":{m},"bytes_bypassed":{b},"bytes_written":{m}}}')
