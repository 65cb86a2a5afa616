"""Rejected lines written bounded: the first N per reason go out (the rejects file, `parse`'s
stderr), the rest are only counted, so a hostile or binary input cannot fill the disk. N is the
setting `ingest.rejects_per_reason`. A reason is counted by its key (the reason without its
specifics: `reason_key`); past MAX_REASONS distinct keys, new ones share one bucket.
"""

from __future__ import annotations

from collections import Counter

from ingest.pipeline import reason_key

MAX_REASONS = 10_000
OTHER = "(other reasons)"


class RejectLimit:
    def __init__(self, per_reason: int):
        self.per_reason = per_reason
        self.written: Counter = Counter()
        self.dropped: Counter = Counter()
        self._keys: dict[str, str] = {}

    def admit(self, reason: str) -> bool:
        """Whether a record of `reason` is written (else it is counted as not written)."""
        key = self._keys.get(reason)
        if key is None:
            key = reason_key(reason)
            if key not in self.written and len(self.written) >= MAX_REASONS:
                key = OTHER
            if len(self._keys) < MAX_REASONS:
                self._keys[reason] = key
        if self.written[key] < self.per_reason:
            self.written[key] += 1
            return True
        self.dropped[key] += 1
        return False

    @property
    def not_written(self) -> int:
        return sum(self.dropped.values())

    def summary(self) -> str:
        """How many were not written, for a command's summary line ("" when none)."""
        if not self.dropped:
            return ""
        return (f"{self.not_written:,} rejects not written (only the first {self.per_reason:,} per reason are; "
                "set ingest.rejects_per_reason): "
                + ", ".join(f"{k} {n:,}" for k, n in self.dropped.most_common(5))
                + (", …" if len(self.dropped) > 5 else ""))

    def as_dict(self) -> dict:
        return {"rejects_not_written": self.not_written, "rejects_per_reason": self.per_reason,
                "by_reason": dict(self.dropped.most_common())}
