"""What-if replays under the server's bounds: range, accesses, (policy, size) pairs, how many at
once (429 rather than a queue: a replay holds a core for seconds), with their metrics."""

from __future__ import annotations

import contextlib
import threading
import time

from api.errors import ApiError
from cachescope.reads import UnknownName
from cachescope.replay import WhatIf, WhatIfError, WhatIfResult, check, run_whatif, scope


class Limits:
    def __init__(self, settings, metrics):
        self.settings = settings
        self.metrics = metrics
        self._slots = threading.BoundedSemaphore(settings.whatif_concurrency)

    def run(self, store, req: WhatIf, where: str = "body") -> WhatIfResult:
        s = self.settings
        try:
            check(req)
        except WhatIfError as e:
            raise ApiError(e.status, e.field, str(e), where) from None
        days = (req.end - req.start + req.warmup).total_seconds() / 86_400
        if days > s.whatif_max_days:
            raise ApiError(413, "to", f"a what-if covers at most {s.whatif_max_days:g} days (warm-up included), "
                                      f"this one {days:.1f}: shorten the range, or raise the server's bound "
                                      "(CACHESCOPE_WHATIF_MAX_DAYS: it limits how long a replay holds a core)", where)
        n = len(req.specs())
        if n > s.whatif_max_configs:
            raise ApiError(413, "size", f"{n} (policy, size) pairs; at most {s.whatif_max_configs} per request", where)
        with self.slot(where):
            return self._run(store, req, where)

    @contextlib.contextmanager
    def slot(self, where: str = "body"):
        """One of the replays allowed at once (any pass over the stored accesses), else a 429."""
        if not self._slots.acquire(blocking=False):
            self.metrics.whatif_refused.inc()
            raise ApiError(429, "", f"{self.settings.whatif_concurrency} what-if replays are running: retry in a few "
                                    "seconds", where, headers={"Retry-After": "5"})
        try:
            yield
        finally:
            self._slots.release()

    def _run(self, store, req: WhatIf, where: str) -> WhatIfResult:
        t0 = time.perf_counter()
        try:
            accesses, tiers = scope(store, req)
            if accesses > self.settings.whatif_max_accesses:
                raise ApiError(413, "to", f"the range holds {accesses:,} accesses; at most "
                                          f"{self.settings.whatif_max_accesses:,} per what-if: shorten it or sample "
                                          "(sample_rate)", where)
            result = run_whatif(store, req, tier_names=tiers, on_chunk=self.metrics.whatif_rows.inc,
                                threads=self.settings.whatif_threads)
        except WhatIfError as e:
            raise ApiError(e.status, e.field, str(e), where) from None
        except UnknownName as e:  # a name the store holds nothing of (replay.check_names)
            raise ApiError(422, e.field, str(e), where) from None
        self.metrics.whatif_seconds.observe(time.perf_counter() - t0)
        return result
