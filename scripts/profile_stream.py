#!/usr/bin/env python
"""The Flink job's per-message work in one process, stage by stage, without Flink or Kafka.

    .venv/bin/python scripts/profile_stream.py [--events 1000000] [--days 1] [--cprofile OUT]

Runs exactly what flink-jobs/shadow_caches.py does for each message (decode, GroupState.process,
state pickled once per bundle, rows written on the flush period) into a ClickHouse server, and
prints the seconds spent in each stage: where the streaming path's time goes, measured on the
same events as scripts/bench_stream.py. Starts ClickHouse with scripts/services when it is not
running and stops what it started.
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.path.insert(0, str(REPO / "scripts"))


def messages(events: int, days: float, per_message: int) -> list[bytes]:
    from bench_stream import parsed_accesses

    from cachescope.core.messages import encode_batch

    parsed = parsed_accesses(events, days)
    out, by_group = [], defaultdict(list)
    for ev in parsed:
        batch = by_group[ev.cache_group]
        batch.append(ev)
        if len(batch) == per_message:
            out.append(encode_batch(ev.cache_group, batch))
            by_group[ev.cache_group] = []
    out += [encode_batch(g, b) for g, b in by_group.items() if b]
    return out


def run(msgs: list[bytes], store, bundle_s: float, flush_s: float, background: bool,
        flush_rows: int) -> dict[str, float]:
    from cachescope.config import load_config
    from cachescope.core.group_state import GroupState
    from cachescope.core.messages import cache_group_of, decode_batch
    from cachescope.core.writer import RowWriter

    config = load_config().pipeline
    writer = RowWriter(store, background=background)
    t = defaultdict(float)
    states: dict[str, GroupState] = {}
    clock = time.perf_counter
    last_bundle = last_flush = clock()
    for m in msgs:
        a = clock()
        group = cache_group_of(m)
        _, cols = decode_batch(m)
        b = c = clock()
        st = states.get(group) or states.setdefault(group, GroupState.new(group, config))
        st.process(cols, m)
        d = clock()
        t["decode"] += b - a
        t["process"] += d - c
        if d - last_bundle >= bundle_s:  # PyFlink serialises keyed state when a bundle ends
            for s in states.values():
                pickle.dumps(s)  # the state cache keeps the object: no unpickling
            last_bundle = clock()
            t["state pickling"] += last_bundle - d
        if d - last_flush >= flush_s or len(st.outbox) >= flush_rows:
            for s in states.values():
                s.write(writer, "profile")
            last_flush = clock()
            t["writes" if not background else "handing rows to the writer"] += last_flush - d
    a = clock()
    for s in states.values():
        s.finish()
        s.write(writer, "profile")
    writer.close()
    t["writes" if not background else "final writes"] += clock() - a
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--per-message", type=int, default=2500, help="events per message (the shippers' --batch)")
    ap.add_argument("--bundle-seconds", type=float, default=5.0, help="PyFlink's python.fn-execution.bundle.time")
    ap.add_argument("--flush-seconds", type=float, default=2.0)
    ap.add_argument("--flush-rows", type=int, default=100_000)
    ap.add_argument("--inline-writes", action="store_true", help="write in the processing thread (as before)")
    ap.add_argument("--cprofile", default=None, help="also write a cProfile dump here")
    args = ap.parse_args()

    from bench_stream import service

    ch_env, started = service("clickhouse")
    try:
        from cachescope.store import ClickHouseStore, migrations

        msgs = messages(args.events, args.days, args.per_message)
        from cachescope.core.messages import decode_batch

        n = sum(len(decode_batch(m)[1]) for m in msgs)
        database = f"profile_{uuid.uuid4().hex[:8]}"
        store = ClickHouseStore(ch_env["CLICKHOUSE_URL"], database=database)
        migrations.migrate(store, events_ttl_days=0)
        t0 = time.perf_counter()
        if args.cprofile:
            import cProfile

            prof = cProfile.Profile()
            t = prof.runcall(run, msgs, store, args.bundle_seconds, args.flush_seconds,
                              not args.inline_writes, args.flush_rows)
            prof.dump_stats(args.cprofile)
        else:
            t = run(msgs, store, args.bundle_seconds, args.flush_seconds, not args.inline_writes, args.flush_rows)
        wall = time.perf_counter() - t0
        print(f"# {n:,} events in {len(msgs):,} messages, default 24 shadow caches, bundle {args.bundle_seconds} s, "
              f"flush {args.flush_seconds} s")
        for stage, s in sorted(t.items(), key=lambda kv: -kv[1]):
            print(f"{stage:<16} {s:>8.2f} s {100 * s / wall:>5.1f}%  {1e6 * s / n:>6.2f} µs/event")
        print(f"{'total':<16} {wall:>8.2f} s         {n / wall:>10,.0f} events/s")
        store.command(f"DROP DATABASE {database}")
        store.close()
    finally:
        if started:
            subprocess.run([str(REPO / "scripts/services"), "stop", "clickhouse"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
