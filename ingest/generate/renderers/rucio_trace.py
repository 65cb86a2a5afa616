"""rucio-trace: the lines its producer writes for the workload's accesses."""

from __future__ import annotations

from typing import Iterator

import orjson

from ingest.generate.model import OP_DELETE, OP_READ, Workload
from ingest.generate.names import Paths, domain, server_names
from ingest.generate.renderers._common import Line, by_emit, columns, noise


def render_rucio_trace(w: Workload) -> Iterator[Line]:
    draws = noise(w, 17)
    servers = server_names(w, "fs")
    paths = Paths(w, "dcache")
    sizes = w.catalogue.size.tolist()
    cat = w.catalogue
    vos = cat.vo.tolist()
    domains = [domain(s) for s in w.sites]
    dumps = orjson.dumps
    ts, dur, files, ops, _, site_l, server_l, client_l = columns(w)
    for i in by_emit(w.ts + w.duration, w.op != OP_DELETE):
        t, f, op, s, srv, cl = ts[i], files[i], ops[i], site_l[i], server_l[i], client_l[i]
        site = w.sites[s]
        rse = f"{site}_DATADISK" if vos[f] == 0 else site
        end = t + dur[i]
        rec = {"eventType": "put_sm", "eventVersion": "pilot3 3.7.2.4", "clientState": "DONE", "localSite": rse,
               "remoteSite": rse, "timeStart": t / 1e6, "timeEnd": end / 1e6, "scope": cat.scope[f],
               "filename": cat.name[f], "filesize": sizes[f], "hostname": f"wn{cl:04d}.{domains[s]}", "pq": site}
        if op == OP_READ:
            rec["eventType"], rec["clientState"] = ("get_sm_a", "FOUND_ROOT") if i % 3 == 0 else ("get_sm", "DONE")
            rec["url"] = f"root://{servers[s][srv]}:1094/{paths(f, s)}"
            if draws[i] < 0.01:  # a failed stage-in attempt reported before the good one
                yield -1, s, end, dumps({"eventType": rec["eventType"], "clientState": "STAGEIN_ATTEMPT_FAILED",
                                         "localSite": rse, "remoteSite": rse, "timeStart": t / 1e6,
                                         "scope": cat.scope[f], "filename": cat.name[f], "filesize": sizes[f],
                                         "stateReason": "timeout"}).decode()
        yield i, s, end, dumps(rec).decode()
