"""xrootd-collector: the lines its producer writes for the workload's accesses."""

from __future__ import annotations

from typing import Iterator

from ingest.generate.model import MIB, OP_DELETE, OP_READ, Workload
from ingest.generate.names import domain, server_names
from ingest.generate.renderers._common import Line, by_emit, columns


def render_xrootd_collector(w: Workload) -> Iterator[Line]:
    servers = server_names(w, "fs")
    split = [[name.partition(".") for name in per_site] for per_site in servers]
    sizes = w.catalogue.size.tolist()
    vos = w.catalogue.vo.tolist()
    cat_path = w.catalogue.path
    domains = [domain(s) for s in w.sites]
    ts, dur, files, ops, nbytes, site_l, server_l, client_l = columns(w)
    for i in by_emit(w.ts + w.duration, w.op != OP_DELETE):
        t, f, op, nb, s, srv, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], server_l[i], client_l[i]
        end = t + dur[i]
        host, _, dom = split[s][srv]
        rd, wr = (nb, 0) if op == OP_READ else (0, nb)
        yield i, s, end, (f'{{"site_name":"{w.sites[s]}","fallback":false,"user_dn":"","client_host":"wn{cl:04d}",'
                          f'"client_domain":"{domains[s]}","server_host":"{host}","server_domain":"{dom}",'
                          f'"unique_id":"{t:x}-{f:x}","file_lfn":"{cat_path[f]}","file_size":{sizes[f]},'
                          f'"read_bytes":{rd},"read_bytes_at_close":{rd},"write_bytes":{wr},'
                          f'"read_single_operations":{1 + rd // (4 * MIB)},"start_time":{t // 1_000_000},'
                          f'"end_time":{end // 1_000_000},"vo":"{"atlas" if vos[f] == 0 else "cms"}","ipv6":false}}')
