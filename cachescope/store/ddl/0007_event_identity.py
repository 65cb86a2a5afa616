"""Event identity: access_events rebuilt under ORDER BY (cache_group, ts, origin, seq).

An event is identified by (cache_group, origin, seq): `origin` names the log stream (a file on a
host, a Kafka topic partition, a collector) and `seq` counts within it. The old key
(cache_group, ts, seq, source) made two shippers of one format collide, and ReplacingMergeTree
kept one of each colliding pair. Existing rows are copied with origin 'legacy:<source>' (their
own collisions were already merged away; nothing more is lost). Replays read in
(ts, origin, seq) order: within one group that is the table's key order.

A Python migration so that each step can check the store: it can be run again after an
interruption at any point (copy → rename old aside → rename copy in → drop old).
"""

OLD_ASIDE = "access_events_0001"
COPY = "access_events_next"

ACCESS_EVENTS_DDL = """CREATE TABLE IF NOT EXISTS {database}.{table}
(
    ts DateTime64(6, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
    site LowCardinality(String),
    source LowCardinality(String),
    server LowCardinality(String),
    client LowCardinality(String),
    vo LowCardinality(String),
    path String CODEC(ZSTD(1)),
    file_id UInt64,
    file_size UInt64,
    bytes_read UInt64,
    op Enum8('read' = 0, 'write' = 1, 'delete' = 2),
    tier LowCardinality(String),
    cache_group LowCardinality(String),
    observed_hit_bytes Nullable(UInt64),
    observed_miss_bytes Nullable(UInt64),
    observed_bypass_bytes Nullable(UInt64),
    origin LowCardinality(String),
    seq UInt64 CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(ts)
ORDER BY (cache_group, ts, origin, seq)
{events_ttl}
SETTINGS ttl_only_drop_parts = 1"""

_OLD_COLUMNS = ("ts, site, source, server, client, vo, path, file_id, file_size, bytes_read, op, tier, cache_group, "
                "observed_hit_bytes, observed_miss_bytes, observed_bypass_bytes")


def forward(store, values) -> None:
    db = values["database"]

    def exists(table: str) -> bool:
        return bool(store.query("SELECT count() FROM system.tables WHERE database = {db:String} AND name = {t:String}",
                                {"db": db, "t": table}).scalar())

    def has_origin(table: str) -> bool:
        return bool(store.query("SELECT count() FROM system.columns WHERE database = {db:String} AND table = {t:String} "
                                "AND name = 'origin'", {"db": db, "t": table}).scalar())

    def create(table: str) -> None:
        store.command(ACCESS_EVENTS_DDL.format(database=db, table=table, events_ttl=values["events_ttl"]))

    if exists("access_events") and not has_origin("access_events"):
        create(COPY)
        store.command(f"TRUNCATE TABLE {db}.{COPY}")  # a copy an interrupted run left is redone whole
        store.command(f"INSERT INTO {db}.{COPY} ({_OLD_COLUMNS}, origin, seq) "
                      f"SELECT {_OLD_COLUMNS}, concat('legacy:', source), seq FROM {db}.access_events")
        store.command(f"RENAME TABLE {db}.access_events TO {db}.{OLD_ASIDE}")
    if not exists("access_events"):
        if exists(COPY):
            store.command(f"RENAME TABLE {db}.{COPY} TO {db}.access_events")
        else:
            create("access_events")
    store.command(f"DROP TABLE IF EXISTS {db}.{OLD_ASIDE}")
    store.command(f"DROP TABLE IF EXISTS {db}.{COPY}")
