"""The `collect` section: XRootD's UDP monitoring as `cachescope collect` and `serve --collect`
receive it (ingest/xrootd_monitoring): which senders count, the reorder window, and the bounds on
what the collector holds whatever arrives."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CollectConfig(BaseModel):
    """`cachescope collect` and `serve --collect`: senders, packet order, bounded state."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list, description="senders whose monitoring counts, as addresses or "
                             "CIDRs (`--allow` overrides); empty: the loopback range when listening on loopback, "
                             "else the collector refuses to start")
    reorder_datagrams: int = Field(64, ge=1, le=127, description="reorder window by count: a datagram after a gap "
                                   "waits until this many more of its server's datagrams arrived for the missing "
                                   "one (below 128: XRootD's packet numbers are 8-bit)")
    reorder_seconds: float = Field(5.0, gt=0, description="reorder window by time: a datagram after a gap waits at "
                                   "most this long for the missing one; then the gap counts as lost")
    reorder_max_bytes: int = Field(64 << 20, ge=1 << 20, description="datagrams waiting in reorder windows, all "
                                   "servers together: past this the oldest go on (their gaps count as lost)")
    max_streams: int = Field(256, ge=1, description="server streams (sender, server start time) tracked at once: a "
                             "new one past this closes the one idle longest (its held accesses written)")
    stream_idle_seconds: float = Field(3600.0, gt=0, description="a server stream that sent nothing this long is "
                                       "closed (its held accesses written); its next datagram opens it again")
    max_held_records: int = Field(200_000, ge=1000, description="records held for matching (g-stream closes "
                                  "waiting for the f-stream, f-stream opens and accesses, user and path maps), all "
                                  "streams together: past this the streams idle longest are closed")
    max_ahead_seconds: float = Field(3600.0, gt=0, description="a g-stream record whose detach lies further ahead "
                                     "of its server's clock (its packet's end) is a reject, never held")
