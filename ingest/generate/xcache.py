"""What the site's XCache observed: an LRU per (site, cache server) caching the bytes read."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ingest.generate.model import OP_DELETE, OP_READ, OP_WRITE, Workload


def simulate_xcache(w: Workload, fraction: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(w)
    hit = np.zeros(n, np.uint64)
    miss = np.zeros(n, np.uint64)
    byp = np.zeros(n, np.uint64)
    reads = w.op == OP_READ
    key = w.site * w.n_servers + w.cache_server
    sizes = w.catalogue.size
    # capacity: a fraction of the bytes of the distinct files each cache sees
    caps: dict[int, float] = {}
    for k in np.unique(key[reads]).tolist():
        f = np.unique(w.file[reads & (key == k)])
        caps[k] = max(1.0, float(sizes[f].sum()) * fraction)
    caches: dict[int, OrderedDict] = {k: OrderedDict() for k in caps}
    used = dict.fromkeys(caps, 0)
    files = w.file.tolist()
    ops = w.op.tolist()
    nbytes = w.bytes_read.tolist()
    keys = key.tolist()
    bypass = w.bypass.tolist()
    hit_l = [0] * n
    miss_l = [0] * n
    byp_l = [0] * n
    for i in range(n):
        op = ops[i]
        k = keys[i]
        cache = caches.get(k)
        if cache is None:
            continue
        f = files[i]
        if op == OP_DELETE or op == OP_WRITE:
            held = cache.pop(f, None)
            if held is not None:
                used[k] -= held
            continue
        nb = nbytes[i]
        if bypass[i]:
            byp_l[i] = nb
            continue
        held = cache.get(f, 0)
        h = nb if nb <= held else held
        hit_l[i] = h
        miss_l[i] = nb - h
        if f in cache:
            cache.move_to_end(f)
        if nb > held:
            cache[f] = nb
            used[k] += nb - held
            cap = caps[k]
            while used[k] > cap and cache:
                _, old = cache.popitem(last=False)
                used[k] -= old
    hit[:] = hit_l
    miss[:] = miss_l
    byp[:] = byp_l
    return hit, miss, byp
