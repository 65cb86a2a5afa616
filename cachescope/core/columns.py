"""A batch of AccessEvents as numpy columns: the form the core and the engine work on."""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Iterable, Mapping

import numpy as np

from cachescope.events import AccessEvent

OPS = {"read": 0, "write": 1, "delete": 2}
OP_NAMES = np.array(["read", "write", "delete"], dtype=object)
#: observed_* columns use -1 for "not from a real cache"
NO_OBSERVATION = -1


@dataclass
class EventColumns:
    ts: np.ndarray  # int64, UTC microseconds
    seq: np.ndarray  # uint64
    file_id: np.ndarray  # uint64
    file_size: np.ndarray  # uint64
    bytes_read: np.ndarray  # uint64
    op: np.ndarray  # uint8: 0 read, 1 write, 2 delete
    tier: np.ndarray  # object (str)
    server: np.ndarray  # object (str)
    source: np.ndarray  # object (str)
    site: np.ndarray  # object (str)
    client: np.ndarray  # object (str)
    vo: np.ndarray  # object (str)
    path: np.ndarray  # object (str)
    cache_group: np.ndarray  # object (str)
    observed_hit_bytes: np.ndarray  # int64, -1 = none
    observed_miss_bytes: np.ndarray
    observed_bypass_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, index: np.ndarray) -> "EventColumns":
        return EventColumns(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    @classmethod
    def empty(cls) -> "EventColumns":
        return cls.from_events([])

    @classmethod
    def from_events(cls, events: Iterable[Mapping] | Iterable[AccessEvent]) -> "EventColumns":
        """From AccessEvents: structs (from a parser) or dicts (their JSON form, from Kafka)."""
        ev = list(events)
        if ev and isinstance(ev[0], AccessEvent):
            def get(name, default=None):
                return map(attrgetter(name), ev)
        else:
            def get(name, default=None):
                return (e.get(name, default) for e in ev)

        def col(name, dtype, default=None):
            return np.fromiter(get(name, default), dtype=dtype, count=len(ev))

        def observed(name):
            return np.fromiter((NO_OBSERVATION if v is None else v for v in get(name)), dtype=np.int64, count=len(ev))

        def text(name):
            a = np.empty(len(ev), dtype=object)
            a[:] = [v or "" for v in get(name)]
            return a

        try:
            op = np.fromiter(map(OPS.__getitem__, get("op", "read")), dtype=np.uint8, count=len(ev))
        except KeyError as e:
            raise ValueError(f"op {e.args[0]!r} is not read, write or delete") from None
        return cls(
            ts=col("ts", np.int64),
            seq=col("seq", np.uint64, 0),
            file_id=col("file_id", np.uint64),
            file_size=col("file_size", np.uint64),
            bytes_read=col("bytes_read", np.uint64),
            op=op,
            tier=text("tier"),
            server=text("server"),
            source=text("source"),
            site=text("site"),
            client=text("client"),
            vo=text("vo"),
            path=text("path"),
            cache_group=text("cache_group"),
            observed_hit_bytes=observed("observed_hit_bytes"),
            observed_miss_bytes=observed("observed_miss_bytes"),
            observed_bypass_bytes=observed("observed_bypass_bytes"),
        )

    def access_event_rows(self) -> dict[str, np.ndarray]:
        """Columns of the access_events table (observed_* masked where absent: NULL)."""
        rows = {
            "ts": self.ts.astype("datetime64[us]"),
            "site": self.site, "source": self.source, "server": self.server, "client": self.client,
            "vo": self.vo, "path": self.path, "file_id": self.file_id, "file_size": self.file_size,
            "bytes_read": self.bytes_read, "op": OP_NAMES[self.op], "tier": self.tier,
            "cache_group": self.cache_group, "seq": self.seq,
        }
        for name in ("observed_hit_bytes", "observed_miss_bytes", "observed_bypass_bytes"):
            v = getattr(self, name)
            rows[name] = np.ma.masked_array(v, mask=v < 0)  # NULL where no real cache reported
        return rows

    @classmethod
    def concat(cls, parts: list["EventColumns"]) -> "EventColumns":
        if not parts:
            return cls.empty()
        return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})
