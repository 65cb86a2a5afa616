"""dcache-json: the lines its producer writes for the workload's accesses."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ingest.generate.model import OP_DELETE, OP_WRITE, Workload
from ingest.generate.names import Paths, domain, pnfs_id, server_names
from ingest.generate.renderers._common import Clock, Line, by_emit, columns


def render_dcache_json(w: Workload) -> Iterator[Line]:
    pools = server_names(w, "dcache")
    clients = [[f"wn{c:04d}.{domain(s)}" for c in range(400)] for s in w.sites]
    paths = Paths(w, "dcache")
    sizes = w.catalogue.size.tolist()
    vos = w.catalogue.vo.tolist()
    clock = Clock(lambda d: d.strftime("%Y-%m-%dT%H:%M"))
    ts, dur, files, ops, nbytes, site_l, server_l, client_l = columns(w)
    emit = np.where(w.op == OP_DELETE, w.ts, w.ts + w.duration)

    def iso(us: int) -> str:  # ISO_OFFSET_DATE_TIME with milliseconds, UTC
        return f"{clock.minute(us)}:{us // 1_000_000 % 60:02d}.{us // 1000 % 1000:03d}+00:00"

    for i in by_emit(emit):
        t, f, op, nb, s, srv, cl = ts[i], files[i], ops[i], nbytes[i], site_l[i], server_l[i], client_l[i]
        site = w.sites[s]
        path = paths(f, s)
        vo = "atlas" if vos[f] == 0 else "cms"
        if op == OP_DELETE:  # a removal is logged when it happens: no duration
            yield i, s, t, (f'{{"VERSION":"1.0","msgType":"remove","date":"{iso(t)}","cellName":"WebDAV-{site}",'
                            f'"cellType":"door","status":{{"code":0,"msg":""}},"subject":["FQANPrincipal[/{vo},primary]"],'
                            f'"client":"{clients[s][cl]}","pnfsid":"{pnfs_id(f)}","billingPath":"{path}",'
                            f'"fileSize":{sizes[f]}}}')
            continue
        end = t + dur[i]
        pool = pools[s][srv]
        yield i, s, end, (f'{{"version":"1.0","msgType":"transfer","date":"{iso(end)}","queuingTime":0,'
                          f'"cellName":"{pool}","cellType":"pool","cellDomain":"{pool}Domain",'
                          f'"status":{{"code":0,"msg":""}},"subject":["FQANPrincipal[/{vo},primary]"],'
                          f'"pnfsid":"{pnfs_id(f)}","billingPath":"{path}","fileSize":{sizes[f]},'
                          f'"storageInfo":"{vo}:default@osm","transferSize":{nb},"transferTime":{dur[i] // 1000},'
                          f'"isWrite":"{"write" if op == OP_WRITE else "read"}","protocolInfo":{{"protocol":"Xrootd",'
                          f'"versionMajor":5,"versionMinor":0,"port":{30000 + cl},"host":"{clients[s][cl]}"}},'
                          f'"initiator":"door:Xrootd-{site}@xrootdDomain","isP2p":false,"transferPath":"{path}"}}')
