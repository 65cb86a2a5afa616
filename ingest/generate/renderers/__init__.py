"""One renderer per log format: (access index or -1 for noise, site, emit time us, line) in the order
the producer writes them."""

from __future__ import annotations

from typing import Callable, Iterator

from ingest.generate.model import Workload
from ingest.generate.renderers._common import Line
from ingest.generate.renderers.csv import render_csv
from ingest.generate.renderers.dcache_billing import render_dcache_billing
from ingest.generate.renderers.dcache_json import render_dcache_json
from ingest.generate.renderers.eos_report import render_eos_report
from ingest.generate.renderers.http_access import render_http_access
from ingest.generate.renderers.rucio_trace import render_rucio_trace
from ingest.generate.renderers.xcache_reporter import render_xcache_reporter
from ingest.generate.renderers.xrootd_collector import render_xrootd_collector
from ingest.generate.renderers.xrootd_gstream import render_xrootd_gstream

CSV_HEADER = "timestamp,obj_id,obj_size,tier,path,bytes_read"

RENDERERS: dict[str, Callable[[Workload], Iterator[Line]]] = {
    "dcache-billing": render_dcache_billing,
    "dcache-json": render_dcache_json,
    "xrootd-gstream": render_xrootd_gstream,
    "xrootd-collector": render_xrootd_collector,
    "xcache-reporter": render_xcache_reporter,
    "eos-report": render_eos_report,
    "rucio-trace": render_rucio_trace,
    "http-access": render_http_access,
    "csv": render_csv,
}
# formats whose lines name no site: written per site when writing to a directory
PER_SITE = {"dcache-billing", "dcache-json", "eos-report", "http-access", "csv"}


def render(fmt: str, w: Workload) -> list[Line]:
    """(access index or -1, site, emit time, line) of `fmt`, in the order the producer writes them."""
    return list(RENDERERS[fmt](w))
