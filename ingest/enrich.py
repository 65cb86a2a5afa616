"""The enrichment step every parser's output goes through: Access -> AccessEvent.

Normalises the path and classifies its data tier (cachescope.tiers, cached per path), computes
file_id (xxh3-64 of the normalised path, unless the record states its own id), picks the site
(--site overrides; else the record's site; else the configured default), the VO (the path's
rules, else the record's hint, else the site's configured VO), the cache group (config
`cache_groups`), clamps bytes_read to file_size (counted in `clamped`), rejects values the
contract cannot hold (sizes above `MAX_ACCESS_BYTES`, 2^48, times before 1970), and numbers events with `seq` in
input order within its origin (the log stream). A real cache's counters that add up to more than
the bytes read are clamped to them (`clamp_observed`: the rule is written in cachescope/events.py).
"""

from __future__ import annotations

from cachescope.config import CachescopeConfig
from cachescope.events import AccessEvent, file_id_of
from cachescope.tiers import TierClassifier
from cachescope.units import MAX_ACCESS_BYTES
from ingest.formats._base import U64_MAX, Access, BadRecord

_PATH_CACHE_LIMIT = 500_000
_TS_LIMIT = 2**63  # microseconds must fit in int64


def _out_of_range(a: Access) -> None:
    if a.file_size > MAX_ACCESS_BYTES:
        raise BadRecord(f"file size: {a.file_size} bytes is above the {MAX_ACCESS_BYTES:,} bytes (2^48, 256 TiB) one "
                        "access may state: not a real file (the store's per-window counters must hold the sums)")
    if a.bytes_read < 0:
        raise BadRecord(f"bytes read {a.bytes_read} is negative")
    raise BadRecord(f"time {a.ts} us is outside 1970 .. year 292278")


def clamp_observed(nbytes: int, hit: int | None, miss: int | None, bypass: int | None
                   ) -> tuple[int | None, int | None, int | None]:
    """A cache's hit/miss/bypass bytes within `nbytes`: miss first, then bypass, then hit takes
    what is left (re-read bytes were served from the cache; what came from the origin stays)."""
    room = nbytes
    if miss is not None:
        miss = min(miss, room)
        room -= miss
    if bypass is not None:
        bypass = min(bypass, room)
        room -= bypass
    if hit is not None:
        hit = min(hit, room)
    return hit, miss, bypass


def _compiled_tiers(classifier: TierClassifier):
    """The compiled classifier (`PathTiers`) of a classifier, made once and shared by its
    Enrichers and g-stream decoders (one costs ~8 ms and ~0.8 MB: a collector makes an Enricher
    per server stream); None: Python's."""
    made = classifier.__dict__.get("_compiled_tiers")
    if made is None:
        made = False
        spec = classifier.compiled_spec()
        if spec is not None:
            path_tier = classifier.path_tier

            def in_python(path: str, vo_hint: str | None = None) -> tuple[str, int, str, str]:
                norm, tier, vo = path_tier(path, vo_hint)
                return norm, file_id_of(norm), tier, vo

            try:
                from cachescope.specs import PathTiers

                made = PathTiers(spec, in_python)
            except ValueError:  # a regex Rust's engine refuses: every path stays Python's
                pass
        classifier.__dict__["_compiled_tiers"] = made
    return made or None


class Enricher:
    def __init__(
        self,
        source: str,
        *,
        config: CachescopeConfig,
        classifier: TierClassifier,
        site: str = "",
        site_override: bool = False,
        seq_start: int = 0,
        origin: str = "",
    ):
        self.source = source
        self.origin = origin
        self.site = site or config.site
        self.site_override = site_override and bool(site)
        self.cache_groups = config.cache_groups
        self.site_vo = {name: sc.vo for name, sc in config.sites.items()}
        self._path_tier = classifier.path_tier
        #: the compiled classifier (None: the rules are Python's only); a compiled decoder is given it
        self.path_tiers = _compiled_tiers(classifier)
        #: (path, VO hint=None) -> (normalised path, file_id, tier, VO): `path_tier` and the file
        #: id, compiled where the rules allow
        self.resolve_path = self.path_tiers.resolve if self.path_tiers is not None else self._resolve_in_python
        self._paths: dict[str, tuple[str, int, str, str]] = {}
        self._hinted: dict[str, dict[str, tuple[str, int, str, str]]] = {}
        self._group_of: dict[str, dict[str, str]] = {}
        self.seq = seq_start
        self.clamped = 0

    def _resolve(self, cache: dict, path: str, vo_hint: str) -> tuple[str, int, str, str]:
        norm, file_id, tier, vo = self.resolve_path(path, vo_hint or None)
        resolved = (norm, file_id, tier, vo or vo_hint)
        if len(cache) >= _PATH_CACHE_LIMIT:
            cache.clear()
        cache[path] = resolved
        return resolved

    def _resolve_in_python(self, path: str, vo_hint: str | None = None) -> tuple[str, int, str, str]:
        norm, tier, vo = self._path_tier(path, vo_hint)
        return norm, file_id_of(norm), tier, vo

    def group_for(self, site: str, server: str) -> str:
        group = self.cache_groups.group_for(site, server)
        by_server = self._group_of.setdefault(site, {})
        if len(by_server) < 100_000:
            by_server[server] = group
        return group

    def __call__(self, a: Access) -> AccessEvent:
        hint = a.vo
        # one path cache per VO hint: no key string to build per event
        cache = self._paths if not hint else self._hinted.get(hint)
        if cache is None:
            cache = self._hinted[hint] = {}
        info = cache.get(a.path)
        if info is None:
            info = self._resolve(cache, a.path, hint)
        path, file_id, tier, vo = info
        if a.file_id is not None:
            file_id = a.file_id
        if a.tier:
            tier = a.tier
        site = self.site if self.site_override or not a.site else a.site
        if not vo:
            vo = self.site_vo.get(site, "")
        server = a.server
        by_server = self._group_of.get(site)
        group = by_server.get(server) if by_server is not None else None
        if group is None:
            group = self.group_for(site, server)
        size = a.file_size
        nbytes = a.bytes_read
        if nbytes > size:
            nbytes = size
            self.clamped += 1
        if size > MAX_ACCESS_BYTES or nbytes < 0 or not 0 <= a.ts < _TS_LIMIT:
            _out_of_range(a)
        hit, miss, bypass = a.observed_hit_bytes, a.observed_miss_bytes, a.observed_bypass_bytes
        if (hit or 0) + (miss or 0) + (bypass or 0) > nbytes:
            hit, miss, bypass = clamp_observed(nbytes, hit, miss, bypass)
        seq = self.seq
        self.seq = seq + 1
        # positional: a third of the cost of keywords on this hot path (field order of AccessEvent)
        duration = a.duration_us
        if duration is not None and not 0 <= duration <= U64_MAX:
            duration = None  # a duration out of range is not known, the access still counts
        return AccessEvent(a.ts, site, self.source, server, a.client, vo, path, file_id, size, nbytes, a.op, tier,
                           group, hit, miss, bypass, a.observed_hit, a.observed_origin_bytes, self.origin, seq,
                           duration)
