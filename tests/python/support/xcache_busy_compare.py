"""Per client read of a kept concurrent run (test_xcache_concurrent.py's `busy` directory:
reads.json, blocklog.jsonl, collect.jsonl, busy.cfg): the block log's verdict, collect's and the
`xcache` model's side by side (H hit, D delayed hit, M miss), the reads where they disagree and
the counts (docs/internals.md, "Delayed hits per read").

    .venv/bin/python tests/python/support/xcache_busy_compare.py RUN_DIR [origin_rate|duration] [-v]

A read is matched to collect's access of it among the file's accesses in collect's order: of
the next two, the nearest in bytes (a record's opens have their bytes scaled to the record's).
The model's verdict per access is the change of its totals, fed one access at a time."""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))
from support.xcache_blocktruth import verdicts  # noqa: E402

from cachescope.simulation import CacheSpec, ShadowBank  # noqa: E402
from cachescope.specs import FIELDS  # noqa: E402
from cachescope.xrdpfc import param_value, read_config  # noqa: E402

MiB = 1 << 20
FS_MIB, ORIGIN_RATE = 320, "16Mbit/s"  # test_xcache_concurrent.py's


def _collect_kind(e: dict) -> str:
    if e["observed_hit"] == 1:
        return "H"
    return "D" if not e["observed_miss_bytes"] and not e["observed_bypass_bytes"] else "M"


def main(run: Path, timing: str, verbose: bool) -> None:
    reads = json.loads((run / "reads.json").read_text())
    truth = verdicts(run / "blocklog.jsonl", reads, MiB)
    events = [json.loads(line) for line in (run / "collect.jsonl").read_text().splitlines() if "/poke/" not in line]
    params = dict(read_config(run / "busy.cfg"))
    if timing == "origin_rate":
        params["origin_rate"] = param_value("origin_rate", ORIGIN_RATE)
    bank = ShadowBank([CacheSpec("xcache", FS_MIB * MiB, params)], 2)
    col = {f: i for i, f in enumerate(FIELDS)}
    prev, model = np.zeros(len(FIELDS), dtype=object), {}
    z = np.zeros(1, np.uint8)
    for e in sorted(events, key=lambda e: (e["ts"], e["origin"], e["seq"])):
        one = {k: np.array([e[k]], np.uint64) for k in ("file_id", "file_size", "bytes_read")}
        dur = np.array([e.get("duration_us") or 0], np.uint64) if timing == "duration" else None
        bank.feed_totals(one["file_id"], one["file_size"], one["bytes_read"], z, z,
                         clock=np.array([e["ts"] / 1e6]), duration_us=dur)
        tot = bank.totals()[0].sum(axis=0)
        d, prev = tot - prev, tot
        model[e["seq"], e["origin"]] = "H" if d[col["hits"]] else "D" if d[col["delayed_hits"]] else "M"
    by = defaultdict(list)
    for e in sorted(events, key=lambda e: e["seq"]):
        by[e["path"]].append(e)
    t0 = reads[0]["ts_start"]
    tc, tm, counts = Counter(), Counter(), Counter()
    for r, t in zip(reads, truth):
        cands = by[r["path"]]
        e = min(cands[:2], key=lambda x: abs(x["bytes_read"] - r["bytes_read"])) if cands else None
        if e is not None:
            cands.remove(e)
        tv = "?" if t is None else "H" if t.hit else "D" if t.delayed else "M"
        c = _collect_kind(e) if e else "?"
        m = model[e["seq"], e["origin"]] if e else "?"
        tc[tv + c] += 1
        tm[tv + m] += 1
        counts["truth " + tv] += 1
        counts["collect " + c] += 1
        counts["model " + m] += 1
        if verbose or not tv == c == m:
            blocks = "" if t is None else f"({t.on_disk} on disk/{t.in_flight} in flight/{t.blocks})"
            print(f"{r['ts_start'] - t0:7.2f}-{r['ts_end'] - t0:7.2f} client {r['client']} "
                  f"{r['path'].rsplit('/', 1)[1]} {r['method']} {r['offsets'] or '0+' + str(r['bytes_read'])}: "
                  f"truth {tv}{blocks} collect {c} model {m}")
    print("counts", dict(sorted(counts.items())))
    print("truth->collect", dict(sorted(tc.items())), "truth->model", dict(sorted(tm.items())))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "-v"]
    if not args:
        sys.exit(__doc__)
    main(Path(args[0]), args[1] if len(args) > 1 else "origin_rate", "-v" in sys.argv)
