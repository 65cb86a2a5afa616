"""A batch of AccessEvents as numpy columns: the form the core and the engine work on.

The columns are derived from the contract's field table (`cachescope.events.FIELD_KINDS`): one
array per AccessEvent field, attribute access by field name (`cols.ts`, `cols.origin`, …).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Iterable, Mapping

import numpy as np

from cachescope.events import DURATION_FIELDS, FIELD_KINDS, FIELD_NAMES, NULLABLE_FIELDS, OP_CODES, OP_NAMES, AccessEvent

#: observed_* columns (counters and flags) use -1 for "not from a real cache" / "the record does not say"
NO_OBSERVATION = -1

#: numpy dtype of each kind of field
KIND_DTYPES = {"ts": np.int64, "text": object, "u64": np.uint64, "op": np.uint8, "observed": np.int64,
               "flag": np.int8, "duration": np.int64}
DTYPES: dict[str, type] = {name: KIND_DTYPES[kind] for name, kind in FIELD_KINDS.items()}

#: op code → name, for the few places that show an op to a person
OP_NAME_ARRAY = np.array(OP_NAMES, dtype=object)


class EventColumns:
    """One numpy array per AccessEvent field, all of one length (event i is element i of each):
    ts int64 µs, text fields object (str), u64 fields uint64, op uint8 codes, observed_* counters
    int64 and flags (observed_hit) int8, duration_us int64, NO_OBSERVATION for null."""

    __slots__ = FIELD_NAMES

    def __init__(self, **columns: np.ndarray):
        # the one field with a default (null) may be left out, as in AccessEvent
        for name in DURATION_FIELDS:
            if name not in columns and "ts" in columns:
                columns[name] = np.full(len(columns["ts"]), NO_OBSERVATION, dtype=np.int64)
        if columns.keys() != set(FIELD_NAMES):
            missing = sorted(set(FIELD_NAMES) - columns.keys())
            extra = sorted(columns.keys() - set(FIELD_NAMES))
            raise TypeError(f"EventColumns needs every AccessEvent field: missing {missing}, unknown {extra}")
        for name, value in columns.items():
            setattr(self, name, value)

    def __len__(self) -> int:
        return len(self.ts)

    def columns(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in FIELD_NAMES}

    def take(self, index: np.ndarray) -> "EventColumns":
        return EventColumns(**{name: getattr(self, name)[index] for name in FIELD_NAMES})

    def slice(self, start: int, stop: int) -> "EventColumns":
        """Events start..stop as views of these arrays (no copy)."""
        return EventColumns(**{name: getattr(self, name)[start:stop] for name in FIELD_NAMES})

    @classmethod
    def empty(cls) -> "EventColumns":
        return cls(**{name: np.zeros(0, dtype=dtype) for name, dtype in DTYPES.items()})

    @classmethod
    def from_events(cls, events: Iterable[Mapping] | Iterable[AccessEvent]) -> "EventColumns":
        """From AccessEvents: structs (from a parser) or dicts (their JSON form)."""
        ev = list(events)
        if not ev:
            return cls.empty()
        if isinstance(ev[0], AccessEvent):
            def get(name):
                return map(attrgetter(name), ev)
        else:
            def get(name):
                return (e.get(name) for e in ev)

        n = len(ev)
        out: dict[str, np.ndarray] = {}
        for name, kind in FIELD_KINDS.items():
            if kind == "text":
                a = np.empty(n, dtype=object)
                a[:] = [v or "" for v in get(name)]
            elif kind == "op":
                try:
                    a = np.fromiter(map(OP_CODES.__getitem__, get(name)), dtype=np.uint8, count=n)
                except KeyError as e:
                    raise ValueError(f"op {e.args[0]!r} is not one of {', '.join(OP_NAMES)}") from None
            elif kind in ("observed", "flag", "duration"):
                a = np.fromiter((NO_OBSERVATION if v is None else v for v in get(name)), dtype=DTYPES[name], count=n)
            else:
                a = np.fromiter(get(name), dtype=DTYPES[name], count=n)
            out[name] = a
        return cls(**out)

    def access_event_rows(self) -> dict[str, np.ndarray]:
        """Columns of the access_events table: op stays its integer code (the Enum8's values),
        observed_* masked where absent (NULL), ts as datetime64[us]."""
        rows = self.columns()
        rows["ts"] = self.ts.astype("datetime64[us]")
        for name in NULLABLE_FIELDS:
            v = rows[name]
            rows[name] = np.ma.masked_array(v, mask=v < 0)
        return rows

    @classmethod
    def concat(cls, parts: list["EventColumns"]) -> "EventColumns":
        if not parts:
            return cls.empty()
        return cls(**{name: np.concatenate([getattr(p, name) for p in parts]) for name in FIELD_NAMES})
