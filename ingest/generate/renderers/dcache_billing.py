"""dcache-billing: the lines its producer writes for the workload's accesses."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ingest.generate.model import OP_DELETE, OP_READ, Workload
from ingest.generate.names import Paths, domain, pnfs_id, server_names
from ingest.generate.renderers._common import BILLING_CLOCK, Clock, Line, by_emit, columns, noise


def render_dcache_billing(w: Workload) -> Iterator[Line]:
    draws = noise(w, 11)
    pools = server_names(w, "dcache")
    clients = [[f"wn{c:04d}.{domain(s)}" for c in range(400)] for s in w.sites]
    paths = Paths(w, "dcache")
    sizes = w.catalogue.size.tolist()
    vos = w.catalogue.vo.tolist()
    clock = Clock(BILLING_CLOCK)
    ts, dur, files, ops, nbytes, site_l, server_l, client_l = columns(w)
    end_all = w.ts + w.duration
    emit = np.where(w.op == OP_DELETE, w.ts, end_all)
    for i in by_emit(emit):
        t, f, op, nb, s, srv, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], server_l[i], client_l[i]
        site = w.sites[s]
        path = paths(f, s)
        pnfsid = pnfs_id(f)
        storage = "atlas:datadisk@osm" if vos[f] == 0 else "cms:default@osm"
        if op == OP_DELETE:  # a removal is logged when it happens
            date = f"{clock.minute(t)}:{t // 1_000_000 % 60:02d}"
            yield i, s, t, (f'{date} [door:WebDAV-{site}@webdavDomain:remove] ["prod":40001:5000:{clients[s][cl]}] '
                            f'[{pnfsid},{sizes[f]}] [{path}] {storage} 12 0 {{0:""}}')
            continue
        end = t + dur[i]
        date = f"{clock.minute(end)}:{end // 1_000_000 % 60:02d}"
        conn_ms = dur[i] // 1000
        ip = f"10.{s % 250}.{cl // 250}.{cl % 250}"
        if op == OP_READ:
            created, door = "false", "Xrootd"
            proto = f"Xrootd-5.0:{ip}:{30000 + cl}"
        else:
            created, door = "true", "WebDAV"
            proto = f"Http-1.1:{ip}:{30000 + cl}:WebDAV-{site}:webdavDomain:{path}"
        cell = f"{door}-{site}@{door.lower()}Domain"
        if draws[i] < 0.01 and op == OP_READ:  # a failed attempt just before the good transfer
            yield -1, s, end, (f"{date} [pool:{pools[s][srv]}:transfer] [{pnfsid},{sizes[f]}] [{path}] {storage} "
                               f"{nb // 3} 900 false {{{proto}}} [door:{cell}:AB{i:010X}:{t // 1000}] "
                               f'{{10006:"Transfer aborted: client disconnected"}}')
        yield i, s, end, (f"{date} [pool:{pools[s][srv]}:transfer] [{pnfsid},{sizes[f]}] [{path}] {storage} {nb} "
                          f"{conn_ms} {created} {{{proto}}} [door:{cell}:AA{i:010X}:{t // 1000}] {{0:\"\"}}")
        yield -1, s, end, (f'{date} [door:{cell}:request] ["prod":40001:5000:{ip}] [{pnfsid},{sizes[f]}] [{path}] '
                           f'{storage} {conn_ms + 5} 0 {{0:""}}')
