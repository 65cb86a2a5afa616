"""The client side of the real-XCache test: reads through the caches, in step with their purges.

Run by Debian's /usr/bin/python3 (python3-xrootd: `import XRootD`; the project's virtual
environment cannot import it) inside the test's network namespace, by tests/python/support/xcache_real.py:

    /usr/bin/python3 xcache_workload.py PLAN.json OUT.jsonl

PLAN: {"caches": [{"name", "url", "log", "markers"}], "rounds": [[{"path", "size", "bytes"}, ...], ...],
"round_seconds": S, "settle_seconds": D, "hold_seconds": H}; markers: {"Started": [...],
"Finished": [...]}, the log lines that begin and end a purge (5.5: `Purge() Started`; 6.x: a
ResourceMonitor purge check). Round k starts once every cache's
log shows its purge k+1 finished (XrdPfc 5.5 purges 1 s after start, then every purgeinterval;
6.x checks 60 s after start, then every 60 s), D seconds later (round 0
at once: a model of the cache purges first at its first access, then every interval of event
time, so the first access marks the real cache's purge times), and spreads its reads evenly over
S seconds, so that no read is in flight when a purge runs and the second-resolution times of the
records cannot put a read on the wrong side of a purge. Each file is held open `hold_seconds`
after its last read before it is closed, as a job that processes what it read does: a file
closed while the cache still writes its last block is detached only at XRootD's 30 s retry, and
a re-open meanwhile joins the same g-stream record (one record, one access's bytes, for two reads). Each
read goes to every cache in turn (same file, same bytes). `bytes` == size: the whole file in
8 MiB chunks; less: one read of that many bytes at offset 0 (a prefix: the access records carry
no offsets, so a model of the cache can only place a partial read at the file's start).
OUT: one JSON line per read and cache: {"cache", "path", "size", "bytes", "got", "start", "end",
"round", "purges", "status"} (times: epoch seconds; purges: how many purges the cache had started
before and after the read, k+1 both when the read kept clear of them); exit 1 when a read failed.
"""

from __future__ import annotations

import json
import sys
import time

from XRootD import client
from XRootD.client.flags import OpenFlags

CHUNK = 8 << 20


def purges(cache: dict, what: str) -> int:
    """How many purges the cache's log shows `what` (Started, Finished)."""
    marks = cache["markers"][what]
    try:
        with open(cache["log"], errors="replace") as f:
            return sum(any(m in line for m in marks) for line in f)
    except FileNotFoundError:
        return 0


def wait_purges(caches: list[dict], n: int) -> None:
    """Until every cache's log shows n finished purges (the caches purge on their own clock)."""
    while any(purges(c, "Finished") < n for c in caches):
        time.sleep(0.2)


def read(url: str, size: int, want: int, hold: float) -> tuple[int, str]:
    f = client.File()
    st, _ = f.open(url, OpenFlags.READ)
    if not st.ok:
        return 0, "open: " + st.message.strip()
    got, status = 0, "ok"
    while got < want:
        st, data = f.read(got, min(CHUNK, want - got))
        if not st.ok:
            status = "read: " + st.message.strip()
            break
        if not data:
            break
        got += len(data)
    time.sleep(hold)
    f.close()
    if status == "ok" and got != want:
        status = f"short read: {got} of {want} bytes"
    return got, status


def main() -> int:
    plan_path, out_path = sys.argv[1:3]
    with open(plan_path) as f:
        plan = json.load(f)
    caches, span, settle = plan["caches"], plan["round_seconds"], plan["settle_seconds"]
    failed = 0
    with open(out_path, "w") as out:
        for k, reads in enumerate(plan["rounds"]):
            wait_purges(caches, k + 1)
            t0 = time.time() + (settle if k else 0.0)
            step = span / max(1, len(reads))
            for i, r in enumerate(reads):
                due = t0 + i * step
                if due > time.time():
                    time.sleep(due - time.time())
                for c in caches:
                    before = purges(c, "Started")
                    start = time.time()
                    got, status = read(c["url"] + r["path"], r["size"], r["bytes"], plan["hold_seconds"])
                    end = time.time()
                    after = purges(c, "Started")
                    failed += status != "ok"
                    out.write(json.dumps({"cache": c["name"], "path": r["path"], "size": r["size"],
                                          "bytes": r["bytes"], "got": got, "start": start, "end": end,
                                          "round": k, "purges": [before, after], "status": status}) + "\n")
                    out.flush()
            print(f"xcache_workload: round {k + 1}/{len(plan['rounds'])} done, {failed} failed reads",
                  file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
