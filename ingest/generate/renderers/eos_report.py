"""eos-report: the lines its producer writes for the workload's accesses."""

from __future__ import annotations

from typing import Iterator

from ingest.generate.model import MIB, OP_DELETE, OP_READ, Workload
from ingest.generate.names import Paths, domain, server_names
from ingest.generate.renderers._common import Line, by_emit, columns, noise


def render_eos_report(w: Workload) -> Iterator[Line]:
    draws = noise(w, 13)
    servers = server_names(w, "fs")
    paths = Paths(w, "eos")
    sizes = w.catalogue.size.tolist()
    vos = w.catalogue.vo.tolist()
    mgm = [f"eos-mgm.{domain(s)}" for s in w.sites]
    ts, dur, files, ops, nbytes, site_l, server_l, client_l = columns(w)
    for i in by_emit(w.ts + w.duration):
        t, f, op, nb, s, srv, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], server_l[i], client_l[i]
        end = t + dur[i]
        if op == OP_DELETE:
            yield i, s, end, (f"log={i:08x}-0000-0000-0000-000000000000&host={mgm[s]}:1094&fid={f + 1000000}&ruid=0"
                              f"&rgid=0&dc_ts={t // 1_000_000}&dc_tns={(t % 1_000_000) * 1000}&dm_ts={t // 1_000_000}"
                              f"&dm_tns=0&dsize={sizes[f]}&sec.app=rm")
            continue
        path = paths(f, s)
        size = sizes[f]
        rb, wb, osize = (nb, 0, size) if op == OP_READ else (0, nb, 0)
        vo = "atlas" if vos[f] == 0 else "cms"
        yield i, s, end, (f"log={i:08x}-1d8e-11e7-ba07-a0369f1fbf0c&path={path}&fstpath=/data0{srv}/{f:08x}"
                          f"&ruid=8959&rgid=1399&td={vo}001.{cl}:1@wn{cl:04d}&host={servers[s][srv]}&lid=1048850"
                          f"&fid={f + 1000000}&fsid={s * 100 + srv}&ots={t // 1_000_000}"
                          f"&otms={(t % 1_000_000) // 1000}&cts={end // 1_000_000}&ctms={(end % 1_000_000) // 1000}"
                          f"&nrc={1 + rb // (4 * MIB)}&nwc={1 if wb else 0}&rb={rb}&rb_min=0&rb_max=0&rb_sigma=0.00"
                          f"&rv_op=0&rvb_min=0&rvb_max=0&rvb_sum=0&rvb_sigma=0.00&wb={wb}&wb_min=0&wb_max=0"
                          f"&wb_sigma=0.00&rt=0.00&rvt=0.00&wt=0.00&osize={osize}&csize={size}&sec.prot=gsi"
                          f"&sec.name={vo}001&sec.host=wn{cl:04d}&sec.vorg={vo}&sec.grps=&sec.role=&sec.info=&sec.app=")
        if draws[i] < 0.005:  # an open without reads (a stat through open)
            yield -1, s, end, (f"log={i:08x}-ffff-11e7-ba07-a0369f1fbf0c&path={path}&ruid=8959&rgid=1399"
                               f"&td=x.1:1@wn{cl:04d}&host={servers[s][srv]}&fid={f + 1000000}&ots={t // 1_000_000}"
                               f"&otms=0&cts={t // 1_000_000}&ctms=5&nrc=0&nwc=0&rb=0&wb=0&osize={size}"
                               f"&csize={size}&sec.app=")
