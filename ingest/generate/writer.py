"""Writing a workload's lines to files, streaming (daily and per-site files as producers write them)."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from ingest.generate.model import DAY_US, Workload
from ingest.generate.renderers import CSV_HEADER, PER_SITE, RENDERERS


def write(fmt: str, w: Workload, out: Path, single_file: bool) -> list[Path]:
    """Write one format, streaming. Directory layout (single_file False):
    dcache-billing/<SITE>/billing-YYYY.MM.DD, dcache-json/<SITE>/billing-YYYY.MM.DD.json,
    eos-report/<SITE>/YYYYMMDD.eosreport, http-access/<SITE>/ssl_access_log, csv/<SITE>.csv,
    <format>/<format>.jsonl otherwise (daily files split by the time each line is emitted)."""
    written: list[Path] = []
    handles: dict[object, TextIO] = {}
    base = out / fmt

    def open_file(path: Path) -> TextIO:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = io.open(path, "w", encoding="utf-8", buffering=1 << 20)
        written.append(path)
        if fmt == "csv":
            fh.write(CSV_HEADER + "\n")
        return fh

    def path_for(s: int, day: int) -> Path:
        site = w.sites[s]
        d = datetime.fromtimestamp(day * 86_400, tz=timezone.utc)
        if fmt == "dcache-billing":
            return base / site / f"billing-{d:%Y.%m.%d}"
        if fmt == "dcache-json":
            return base / site / f"billing-{d:%Y.%m.%d}.json"
        if fmt == "eos-report":
            return base / site / f"{d:%Y%m%d}.eosreport"
        if fmt == "http-access":
            return base / site / "ssl_access_log"
        if fmt == "csv":
            return base / f"{site}.csv"
        return base / f"{fmt}.jsonl"

    daily = fmt in ("dcache-billing", "dcache-json", "eos-report")
    per_site = fmt in PER_SITE
    try:
        for _, s, emit, line in RENDERERS[fmt](w):
            if single_file:
                key: object = None
            else:
                key = (s if per_site else 0, emit // DAY_US if daily else 0)
            fh = handles.get(key)
            if fh is None:
                fh = handles[key] = open_file(out if single_file else path_for(s, emit // DAY_US))
            fh.write(line)
            fh.write("\n")
    finally:
        for fh in handles.values():
            fh.close()
    return written
