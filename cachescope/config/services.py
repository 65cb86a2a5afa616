"""The sections of the settings tree read by the services: `api` (`cachescope serve`), `flink` (the
streaming job, runners/flink.py) and `store` (migrations).

Each field is `CACHESCOPE_<SECTION>__<FIELD>` in the environment (CACHESCOPE_API__TOKENS), or
`<section>: {<field>: …}` in the YAML file; the names operators set before the tree existed
(CACHESCOPE_API_TOKENS, CACHESCOPE_WHATIF_MAX_DAYS, …) keep working: config/environment.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApiConfig(_Section):
    """`cachescope serve`: the store, tokens, limits, CORS, timeouts (api/core/config.py)."""

    store_dir: Optional[Path] = Field(None, description="embedded store directory (`serve --store` sets it)")
    clickhouse_url: Optional[str] = Field(None, description="ClickHouse server, clickhouse://host:9000 (`serve --clickhouse`)")
    database: str = Field("cachescope", description="database in the store (`serve --database`)")
    host: str = Field("127.0.0.1", description="address to listen on (`serve --host`)")
    tokens: str = Field("", description="API tokens, hashed: entries `SHA256HEX:SCOPES` (scopes `read`, `whatif`, "
                        "`metrics` joined by `+`) separated by commas or new lines; the hash is sha256 of the token")
    tokens_file: Optional[Path] = Field(None, description="a file of such entries, one a line (# comments allowed)")
    cors_origins: list[str] = Field([], description="origins allowed by CORS (a JSON list); empty: CORS off")
    whatif_max_days: float = Field(200.0, gt=0, description="what-if: longest range in days, warm-up included (a half "
                                   "year with two weeks of warm-up; memory does not grow with the range, the days bound "
                                   "how long a replay holds a core)")
    whatif_max_accesses: int = Field(300_000_000, gt=0, description="what-if: most stored accesses one request replays")
    whatif_concurrency: int = Field(2, ge=1, description="what-if requests at once (one more: 429)")
    whatif_max_configs: int = Field(64, ge=1, description="what-if: most (policy, size) pairs in one request")
    whatif_threads: int = Field(0, ge=0, le=256, description="what-if: threads one replay's caches run on (the same "
                                "answer on any number); 0: the cores available to the process (its CPU affinity)")
    concurrency: int = Field(8, ge=1, description="requests under /v1 worked on at once, reads and what-if together "
                             "(what-if also within whatif_concurrency); /healthz, the page and /metrics are outside it")
    busy_wait_seconds: float = Field(2.0, ge=0, description="a /v1 request finding every slot taken waits this long "
                                     "for one, then gets a 503 with Retry-After")
    max_points: int = Field(150_000, ge=1, description="most points (series x time buckets) in one series answer "
                            "(/v1/efficiency, /v1/compare): about 100 bytes each (15 MB, 3 MB gzipped); more is a "
                            "422 naming `step` with the smallest step that fits")
    max_rows_read: int = Field(20_000_000, ge=1, description="most stored windows one series answer reads (series x "
                               "windows of the table the step picks: minute, hour or day); more is a 422 naming `step`")
    max_body_bytes: int = Field(65_536, ge=1024, description="request bodies above this are refused (413)")
    answer_cache_seconds: float = Field(15.0, ge=0, description="read answers are kept this long, identical "
                                        "requests in flight share one query; 0: no answer kept")
    answer_cache_max_bytes: int = Field(128 * 1024 * 1024, ge=0, description="the kept read answers (their JSON and "
                                        "gzip) take at most this many bytes, the oldest dropped first; an answer of "
                                        "more than 20,000 points is streamed and never kept")
    series_copy_max_rows: int = Field(1_000_000, ge=0, description="/v1/efficiency at hour and day steps answers "
                                      "from an in-process copy of a table of at most this many rows; 0: off")
    series_copy_check_seconds: float = Field(1.0, ge=0, description="how often the copy looks whether its table changed")
    store_connections: int = Field(4, ge=1, le=64, description="server connections kept for concurrent reads "
                                   "(ClickHouse server only)")
    header_timeout_seconds: float = Field(10.0, gt=0, description="a request header must be whole this long after "
                                          "its first byte, else 408 and close")
    body_timeout_seconds: float = Field(30.0, gt=0, description="a request body stalling this long closes the connection")
    keep_alive_seconds: float = Field(5.0, gt=0, description="an idle kept-alive connection is closed after this long")
    max_connections: int = Field(256, ge=1, description="connections open at once; one more gets a 503")
    max_header_bytes: int = Field(16_384, ge=1024, le=1_048_576, description="a request header above this is refused (400)")


class FlinkConfig(_Section):
    """The streaming job's options (flink-jobs/shadow_caches.py): its command-line options override them."""

    bootstrap: Optional[str] = Field(None, description="Kafka bootstrap servers host:port")
    clickhouse: Optional[str] = Field(None, description="clickhouse://host:port[/database]")
    database: Optional[str] = Field(None, description="database (default: the URL's path, else `default`)")
    checkpoint_dir: Optional[str] = Field(None, description="checkpoints, file:// or s3://")
    topic: str = Field("cachescope.events", description="Kafka topic of the events")
    late_topic: str = Field("cachescope.events.late", description="late events (side output)")
    reject_topic: str = Field("cachescope.events.rejects", description="messages that do not decode")
    consumer_group: str = Field("cachescope-shadow-caches", description="Kafka consumer group")
    checkpoint_interval: str = Field("30s", description="checkpoint period; also how often late and rejected "
                                     "records become visible")
    parallelism: int = Field(1, ge=1, description="subtasks (with pipeline.shards: one cache group over several)")
    execution_mode: Literal["process", "thread"] = Field("process", description="PyFlink's Python execution mode")
    flush_seconds: float = Field(2.0, gt=0, description="how often rows are written")
    flush_rows: int = Field(100_000, ge=1, description="a cache group writes as soon as this many rows wait")
    write_retry_seconds: float = Field(300.0, ge=0, description="how long a write the store refuses transiently "
                                       "(down, a shard lost) is retried, doubling the wait from 0.5 s to 8 s, before "
                                       "the job fails (and restarts from its checkpoint); 0: never retried")
    bundle_time: str = Field("5s", description="PyFlink bundle length: keyed state is serialised once per bundle")
    restart_attempts: int = Field(10, ge=0, description="restarts from the last checkpoint before the job fails")
    jar_dir: Optional[Path] = Field(None, description="directory of the Kafka connector jar (default: "
                                    ".cache/flink-jars of the checkout)")
    monitor_every: str = Field("15s", description="the pipeline monitor's period (a thread of the driver); 0: off")
    job_name: str = Field("cachescope shadow caches", min_length=1, description="the job's name on the cluster: a "
                          "second job beside the first (new shadow caches) needs its own, and so does its submit.sh "
                          "(JOB_NAME)")


class StoreConfig(_Section):
    migrations_dir: Optional[Path] = Field(None, description="the migrations applied (default: the package's "
                                           "cachescope/store/ddl)")
