"""Format parsers, one module per log format, all behind one interface (see _base.py).

FORMATS maps the format name used on the command line to its `Format`; `Format.parse(line, ctx)`
returns an `Access`, a `Reject` (with `skipped` set for well-formed records that are not
accesses) or a list of them, and never raises. Each module's docstring says which records are
reads, writes and deletes, and which are skipped or rejected.
"""

from ingest.formats import (
    csv,
    dcache_billing,
    dcache_json,
    eos_report,
    http_access,
    rucio_trace,
    xcache_reporter,
    xrootd_collector,
    xrootd_gstream,
)
from ingest.formats._base import INTERNAL_ERROR, Access, BadRecord, Format, ParseContext, Reject

FORMATS: dict[str, Format] = {
    m.FORMAT.name: m.FORMAT
    for m in (
        dcache_billing,
        dcache_json,
        xrootd_gstream,
        xrootd_collector,
        xcache_reporter,
        eos_report,
        rucio_trace,
        http_access,
        csv,
    )
}


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}; known: {', '.join(FORMATS)}") from None


__all__ = ["FORMATS", "INTERNAL_ERROR", "Access", "BadRecord", "Format", "ParseContext", "Reject", "get_format"]
