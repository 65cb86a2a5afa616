"""GET /v1/configs: the shadow caches the live pipeline runs (or ran), and the cache groups."""

from fastapi import APIRouter, Depends, Request

from api import params as P
from api.deps import get_store, require
from api.models import ERRORS, ConfigsAnswer
from cachescope import reads

router = APIRouter(tags=["configs"])


@router.get("/configs", response_model=ConfigsAnswer, responses=ERRORS, dependencies=[require("read")])
def configs(request: Request, store=Depends(get_store)):
    """Per cache group: each (policy, size) with results, its sampling, partitions, shards and span."""
    def compute():
        df = reads.live_configs(store)
        rows = []
        if len(df):
            first, last = P.iso(df["first_window"]), P.iso(df["last_window"])
            for i, r in enumerate(df.itertuples(index=False)):
                rows.append({"cache_group": str(r.cache_group), "policy": str(r.policy), "size_bytes": int(r.size_bytes),
                             "sample_rate": float(r.sample_rate), "partitions": int(r.partitions), "shards": int(r.shards),
                             "first_window": first[i], "last_window": last[i]})
        g = reads.cache_groups(store)
        groups = []
        if len(g):
            first, last = P.iso(g["first_access"]), P.iso(g["last_access"])
            for i, r in enumerate(g.itertuples(index=False)):
                groups.append({"cache_group": str(r.cache_group), "site": str(r.site), "accesses": int(r.accesses),
                               "servers": int(r.servers), "first_access": first[i], "last_access": last[i]})
        return P.json_response({"configs": rows, "cache_groups": groups})

    return request.app.state.answers.get(request, compute)
