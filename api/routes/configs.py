"""GET /v1/configs: the shadow caches the live pipeline runs (or ran), and the cache groups."""

from fastapi import APIRouter, Request

from api import params as P
from api.deps import AnswersDep, StoreDep, require
from api.models import ERRORS, ConfigsAnswer
from cachescope import reads

router = APIRouter(tags=["configs"])

#: the answer's fields in order, each with its JSON type (the span's two times follow)
_CONFIG = {"cache_group": str, "policy": str, "size_bytes": int, "sample_rate": float, "partitions": int, "shards": int}
_GROUP = {"cache_group": str, "site": str, "accesses": int, "servers": int}


def _records(df, fields: dict, first: str, last: str) -> list[dict]:
    """One dict per row of `df`: `fields` converted, then the `first` and `last` times as ISO strings."""
    if not len(df):
        return []
    firsts, lasts = P.iso(df[first]), P.iso(df[last])
    return [{**{k: kind(getattr(r, k)) for k, kind in fields.items()}, first: firsts[i], last: lasts[i]}
            for i, r in enumerate(df.itertuples(index=False))]


@router.get("/configs", response_model=ConfigsAnswer, responses=ERRORS, dependencies=[require("read")])
def configs(request: Request, store: StoreDep, answers: AnswersDep):
    """Per cache group: each (policy, size) with results, its sampling, partitions, shards and span."""
    def compute():
        return P.json_response({"configs": _records(reads.live_configs(store), _CONFIG, "first_window", "last_window"),
                                "cache_groups": _records(reads.cache_groups(store), _GROUP, "first_access",
                                                         "last_access")})

    return answers.get(request, compute)
