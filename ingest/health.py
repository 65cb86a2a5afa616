"""The shippers' parse health, as one record per Kafka transaction.

Each shipper transaction also carries one record on `<events topic>.health`: the lines it read,
the events it sent and its rejected and skipped lines by reason. Being in the transaction, the
counts are exactly those of what was committed (an aborted batch counts nothing, a retried one
once). The pipeline monitor (runners/monitor.py) writes them into `pipeline_health`.
"""

from __future__ import annotations

import time
import orjson

HEALTH_SUFFIX = ".health"


def health_topic(events_topic: str) -> str:
    return events_topic + HEALTH_SUFFIX


def health_record(shipper: str, fmt: str, lines: int, events: int, rejected: dict[str, int],
                  skipped: dict[str, int], truncated: int = 0, counts: dict[str, int] | None = None) -> bytes:
    """One transaction's counts; lines rejected (malformed) and skipped (not accesses) by reason;
    truncated: times the followed file was found truncated in place (copytruncate) and read again
    from its start since the previous transaction; `counts`: other metrics of this transaction
    (`cachescope collect`: datagrams received, lost in packet-sequence gaps, dropped as
    undecodable), each becoming a pipeline_health metric."""
    doc = {"shipper": shipper, "format": fmt, "ts": time.time(), "lines": lines, "events": events,
           "rejected": rejected, "skipped": skipped, "truncated": truncated}
    if counts:
        doc["counts"] = counts
    return orjson.dumps(doc)
