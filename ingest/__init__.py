"""Log parsers (one module per format, ingest/formats/), the shared enrichment step and the line
pipeline that turns a log stream into AccessEvents; shippers to Kafka build on `LineParser`."""

from ingest.formats import FORMATS, Format, get_format
from ingest.pipeline import LineParser, ParseStats, RejectRecord, open_lines

__all__ = ["FORMATS", "Format", "LineParser", "ParseStats", "RejectRecord", "get_format", "open_lines"]
