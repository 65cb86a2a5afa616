"""Log parsers (one module per format, ingest/formats/), the shared enrichment step and the line
pipeline that turns a log stream into AccessEvents; shippers to Kafka build on `LineParser`."""

__all__ = ["FORMATS", "Format", "LineParser", "ParseStats", "RejectRecord", "get_format", "open_lines"]

# Imported on first use (PEP 562): `ingest.formats` alone must not pull in the configuration and
# the processing core, or every command's start-up would pay for it.
_WHERE = {"FORMATS": "formats", "Format": "formats", "get_format": "formats", "LineParser": "pipeline",
          "ParseStats": "pipeline", "RejectRecord": "pipeline", "open_lines": "pipeline"}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"ingest.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
