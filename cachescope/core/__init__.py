"""The processing core: engine-agnostic, batch-at-a-time. The Flink job and the embedded replay
are thin adapters around `GroupProcessor`; no logic lives in them twice."""

__all__ = ["EventColumns", "PipelineConfig", "GroupProcessor", "Emitted"]

# Imported on first use (PEP 562): importing a small part of the core must not pull in pandas, or
# every command's start-up would pay for it.
_WHERE = {"EventColumns": "cachescope.core.columns", "PipelineConfig": "cachescope.config.pipeline",
          "GroupProcessor": "cachescope.core.processor", "Emitted": "cachescope.core.processor"}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
