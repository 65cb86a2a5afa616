"""The processing core: engine-agnostic, batch-at-a-time. The Flink job and the embedded replay
are thin adapters around `GroupProcessor`; no logic lives in them twice."""

from cachescope.core.columns import EventColumns
from cachescope.config.pipeline import PipelineConfig
from cachescope.core.processor import Emitted, GroupProcessor

__all__ = ["EventColumns", "PipelineConfig", "GroupProcessor", "Emitted"]
