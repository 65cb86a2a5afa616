"""PyFlink job: Kafka `cachescope.events` → shadow caches per cache group → ClickHouse.

A thin adapter: all the work happens in cachescope.core.GroupProcessor, called once per Kafka
message (a batch of events). The processor and its outbox of unwritten rows live in Flink keyed
state, so a checkpoint captures the caches, the open windows and the rows not yet written,
consistently with the Kafka offsets: a restored job ends with exactly the results of an
uninterrupted one (rows are deterministic, the tables replace duplicates).

The job's entry point is flink-jobs/shadow_caches.py (it calls main() here).

Run locally (MiniCluster):   python flink-jobs/shadow_caches.py --bootstrap 127.0.0.1:9092 \
                                 --clickhouse clickhouse://127.0.0.1:9000/cachescope --checkpoint-dir /tmp/ckpt
On a cluster:                flink run -py flink-jobs/shadow_caches.py -pyexec .venv/bin/python \
                                 -j .cache/flink-jars/flink-sql-connector-kafka-5.0.0-2.2.jar -- --bootstrap …
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path
from urllib.parse import urlparse

from cachescope.config.services import FlinkConfig

REPO = Path(__file__).resolve().parents[1]  # a checkout: its .cache/flink-jars
CONNECTOR_JAR = "flink-sql-connector-kafka-5.0.0-2.2.jar"
END_OF_INPUT = 2**63 - 2  # event-time timer that only a finished bounded source reaches
MIN_WRITE_GAP_MS = 1000
JOB_NAME = FlinkConfig.model_fields["job_name"].default  # the default job keeps its transactional ids


def make_function(config_json: str, clickhouse_url: str, database: str, flush_seconds: float, flush_rows: int,
                  late_tag, reject_tag, webhook_json: str = "", write_retry_seconds: float = 300.0):
    from pyflink.common import Types
    from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    flush_ms = max(1, int(flush_seconds * 1000))

    class ShadowCacheFunction(KeyedProcessFunction):
        def open(self, ctx: RuntimeContext):
            from cachescope.core import PipelineConfig
            from cachescope.core.writer import RowWriter
            from cachescope.store import open_store

            self.config = PipelineConfig.model_validate_json(config_json)
            # thread mode converts PRIMITIVE_ARRAY(BYTE) element by element: pickled objects are ~500× cheaper
            self.state = ctx.get_state(ValueStateDescriptor("group", Types.PICKLED_BYTE_ARRAY()))
            self.store = open_store(clickhouse_url=clickhouse_url, database=database)
            self.health_store = None  # opened at the first undecodable message (parse health)
            self.webhook = None
            if webhook_json:  # alert rows go to the receiver once written, from a thread of its own
                import orjson

                from cachescope.core.webhook import AlertWebhook
                from cachescope.store import tables

                hook = orjson.loads(webhook_json)
                self.webhook = AlertWebhook(hook["url"], hook["timeout_s"], hook["retries"], hook["max_queued"])

                def written(t, webhook=self.webhook, alerts=tables.ALERTS):
                    webhook.send(t.get(alerts))
            else:
                written = None
            # inserts run beside the processing; rows stay in the keyed state until written
            # a batch per message comes to the writer (most of them held there): room for a
            # few seconds of them while an insert runs
            self.writer = RowWriter(self.store, background=True, max_queued=64, max_held_rows=flush_rows,
                                    on_written=written, retry_for=write_retry_seconds)
            self.timers: dict[str, int] = {}  # key → flush timer last registered (a restart re-registers)
            self.written_at: dict[str, int] = {}  # key → processing time of its last write
            self.armed: set[str] = set()  # keys whose end-of-input timer this attempt registered

        def close(self):
            self.writer.close()
            if self.webhook is not None:
                self.webhook.close()
            self.store.close()
            if self.health_store is not None:
                self.health_store.close()

        def _count_reject(self, group: str) -> None:
            """Parse health: a message that does not decode, counted where dashboard 7 reads rejects."""
            from cachescope.core.health import health_rows
            from cachescope.store import tables

            try:
                if self.health_store is None:  # its own connection: the writer's thread owns self.store
                    from cachescope.store import open_store

                    self.health_store = open_store(clickhouse_url=clickhouse_url, database=database)
                self.health_store.insert(tables.PIPELINE_HEALTH, health_rows("flink", group, {
                    "rejected": 1, "rejected:bad message": 1}))
            except Exception as e:  # health is never worth failing the job for
                print(f"shadow_caches: could not write parse health: {e}", file=sys.stderr)

        def process_element(self, value, ctx):
            import orjson

            from cachescope.core.group_state import GroupState

            if isinstance(value, bytes):  # keyed by its Kafka key in the JVM (see keyed_by_kafka_key)
                group, shard, message = ctx.get_current_key(), 0, value
                group_key = group
            else:  # (key, cache group, shard, message) from the router
                group_key, group, shard, message = value
            cols, rejected = read_message(group, message)
            if cols is None:  # never fail the job on one bad message
                yield reject_tag, rejected
                self._count_reject(group)
                return
            self.writer.check()  # a failed background insert fails the job: it restarts from its checkpoint
            st = self.state.value()
            if st is None:
                st = GroupState.new(group, self.config, shard)
            self._arm(group_key, ctx)
            late = st.process(cols, message)
            if late is not None:
                for i in range(len(late)):
                    yield late_tag, orjson.dumps({"cache_group": group, "ts": int(late.ts[i]), "seq": int(late.seq[i]),
                                                  "source": late.source[i], "path": late.path[i]}).decode()
            # Write now when a window closed (its rows are what dashboards wait for; at most every
            # MIN_WRITE_GAP_MS, for replays of old logs close windows with every message), when
            # many rows wait (a small state to checkpoint) or when the flush period has passed;
            # otherwise the writer's thread holds the rows until the flush period ends (or writes
            # them with the next insert). Timers fire only between PyFlink bundles, so they
            # could not: they only re-hand what a restore put back in the outbox.
            now = ctx.timer_service().current_processing_time()
            last = self.written_at.get(group_key, 0)
            since = now - last
            if ((st.outbox.has_windows and since >= MIN_WRITE_GAP_MS) or len(st.outbox) >= flush_rows
                    or since >= flush_ms):
                st.write(self.writer, "flink")
                self.written_at[group_key] = now
            else:
                st.write(self.writer, "flink", hold_until=(last + flush_ms) / 1000)
            due = now - now % flush_ms + flush_ms
            if self.timers.get(group_key) != due:  # Flink keeps one anyway; this spares the call
                self.timers[group_key] = due
                ctx.timer_service().register_processing_time_timer(due)
            self.state.update(st)

        def _arm(self, key: str, ctx) -> None:
            """The end-of-input timer, once per key and attempt. PyFlink registers a timer from
            Python after the bundle that asked for it, so a checkpoint taken at the end of that
            bundle holds the key's state without its timer: a job restored from it would end
            without closing the key's windows. Every attempt arms each key it meets again (Flink
            keeps one timer per key and time)."""
            if key not in self.armed:
                self.armed.add(key)
                ctx.timer_service().register_event_time_timer(END_OF_INPUT)

        def on_timer(self, timestamp, ctx):
            st = self.state.value()
            key = ctx.get_current_key()
            if timestamp >= END_OF_INPUT:
                self.armed.add(key)  # fired: never armed again
            elif st is not None:  # a restored key may meet a flush timer before (or without) a message
                self._arm(key, ctx)
            if st is not None:
                end = timestamp >= END_OF_INPUT
                if end:  # bounded input finished: close every window
                    st.finish()
                st.write(self.writer, "flink")
                if end:  # written before the job ends: its Python worker may stop without close()
                    self.writer.wait()
                self.state.update(st)
            yield from ()  # PyFlink iterates what on_timer returns

    return ShadowCacheFunction()


def read_message(group: str, message: bytes | str):
    """One message of the events topic, keyed `group`, through the message's one definition
    (cachescope.core.messages): (its events as columns, None), or (None, the reject record as
    JSON) when it does not decode or names another cache group than its key."""
    import orjson

    from cachescope.core.messages import decode_batch

    try:
        named, cols = decode_batch(message)
        if named != group:
            raise ValueError(f"message of cache group {named!r} carries the Kafka key {group!r} "
                             "(the shippers key each message by its cache group)")
    except (ValueError, TypeError, KeyError, OverflowError) as e:
        return None, orjson.dumps({"cache_group": group, "reason": f"bad message: {e}",
                                   "message": _text(message[:10000])}).decode()
    return cols, None


def make_router(shards: int):
    """Message → (key, cache group, shard, message): the key Flink partitions state by. A group
    spread over several shards is split here by file hash, one message per shard."""

    def route(message: str):
        from cachescope.core.messages import cache_group_of, decode_batch, encode_columns
        from cachescope.core.shards import shard_key, split

        try:
            group = cache_group_of(message)
            if shards == 1:
                yield group, group, 0, message
                return
            for k, part in split(decode_batch(message)[1], shards):
                sub = encode_columns(group, part)
                yield shard_key(group, k, shards), group, k, sub if isinstance(message, bytes) else sub.decode()
        except (ValueError, TypeError, KeyError, OverflowError):
            yield "", "", 0, message  # the processing function sends it to the reject topic with its reason

    return route


def keyed_by_kafka_key(env, args, message_type):
    """Messages keyed by their Kafka record key (the shippers' cache group) without a Python hop.

    PyFlink's KafkaSource exposes only the value, and a Python key selector would send every
    message through Python twice. The Table API's Kafka connector reads the key too; keying on
    it happens in the JVM, so a message reaches Python once, in the shadow-cache function (which
    checks the key against the cache group inside the message)."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.data_stream import KeyedStream
    from pyflink.java_gateway import get_gateway
    from pyflink.table import StreamTableEnvironment

    from cachescope.core.messages import GROUP_FIELD

    def literal(v: str) -> str:
        return "'" + v.replace("'", "''") + "'"

    options = {
        "connector": "kafka", "topic": args.topic, "properties.bootstrap.servers": args.bootstrap,
        "properties.group.id": args.consumer_group,
        # the shippers write in transactions: read only committed batches
        "properties.isolation.level": "read_committed",
        "scan.startup.mode": "earliest-offset",
        "key.format": "raw", "key.fields": "kafka_key", "value.format": "raw", "value.fields-include": "EXCEPT_KEY",
    }
    if args.bounded:
        options["scan.bounded.mode"] = "latest-offset"
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql("CREATE TEMPORARY TABLE cachescope_events (kafka_key STRING, message BYTES) WITH ("
                      + ", ".join(f"{literal(k)} = {literal(v)}" for k, v in options.items()) + ")")
    # an unkeyed message (our producers key every one) is keyed by the cache group it names
    rows = t_env.to_data_stream(t_env.sql_query(
        "SELECT CASE WHEN kafka_key IS NULL OR kafka_key = '' THEN COALESCE(JSON_VALUE(CAST(message AS STRING), "
        f"'$.{GROUP_FIELD}'), '') ELSE kafka_key END AS kafka_key, message FROM cachescope_events"))
    # Python operators take Row(key, value) as a RowTypeInfo (the table hands out ExternalTypeInfo)
    j_rows = rows.assign_timestamps_and_watermarks(WatermarkStrategy.no_watermarks())._j_data_stream.returns(
        Types.ROW_NAMED(["kafka_key", "message"], [Types.STRING(), message_type]).get_java_type_info())
    # what DataStream.key_by does after its Python key selector: Row(key, value) keyed on field 0
    j_keyed = j_rows.keyBy(get_gateway().jvm.KeyByKeySelector(),
                                       Types.ROW([Types.STRING()]).get_java_type_info())
    return KeyedStream(j_keyed, message_type, rows)


def _text(message: bytes | str) -> str:
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else message


def kafka_sink(bootstrap: str, topic: str, job_name: str = JOB_NAME):
    """Exactly once into Kafka: records are committed with the checkpoint (consumers: read_committed).
    Each job's transactional ids are its own: a second job writing the same late topic would
    otherwise fence the first one's transactions (the first job's ids are kept as they were, so
    its restore aborts what it left open)."""
    from pyflink.common.serialization import SimpleStringSchema
    from pyflink.datastream.connectors.base import DeliveryGuarantee
    from pyflink.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink

    return (KafkaSink.builder()
            .set_bootstrap_servers(bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                                   .set_value_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix(f"cachescope-{topic}" if job_name == JOB_NAME
                                         else f"cachescope-{topic}-{job_name.replace(' ', '-')}")
            # below the broker's transaction.max.timeout.ms (15 min by default)
            .set_property("transaction.timeout.ms", "600000")
            .build())


def _millis(duration: str) -> int:
    from cachescope.config.durations import parse_duration_us

    return max(1, parse_duration_us(duration) // 1000)


def default_jars(jar_dir: str | Path | None = None) -> list[str]:
    """The connector jar in `jar_dir` (the settings' flink.jar_dir), else in the checkout's .cache."""
    if jar_dir is None:  # a caller without the settings: the environment's value of it
        from cachescope.config.environment import section_environment

        jar_dir = section_environment("flink").get("jar_dir")
    jar_dir = str(jar_dir or REPO / ".cache" / "flink-jars")
    found = glob.glob(os.path.join(jar_dir, CONNECTOR_JAR))
    if not found:
        raise SystemExit(f"connector jar {CONNECTOR_JAR} not found: run `scripts/services install flink-jars` "
                         "or pass --jar")
    return found


_REQUIRED = ("bootstrap", "clickhouse", "checkpoint_dir")


def job_options(argv: list[str] | None = None):
    """(the job's options, the site configuration): the command line over the settings' `flink`
    section; a missing or refused value exits 2 with one line."""
    import typing

    from cachescope.config.services import FlinkConfig

    # every setting of the `flink` section (the YAML's `flink:`, CACHESCOPE_FLINK__<NAME>) is an
    # option too, and an option given here wins; --config, --restore and --bounded are the run's
    ap = argparse.ArgumentParser(description="cachescope shadow-cache job (PyFlink); every option but --config, "
                                 "--restore and --bounded is also a setting of the flink section "
                                 "(CACHESCOPE_FLINK__<OPTION>, or `flink:` in --config)",
                                 argument_default=argparse.SUPPRESS)
    for name, field in FlinkConfig.model_fields.items():
        kind = field.annotation
        choices = typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else None
        shown = ("; required here or in the settings" if name in _REQUIRED
                 else "" if field.default is None else f"; default {field.default}")
        ap.add_argument(f"--{name.replace('_', '-')}", type=kind if kind in (int, float) else str, choices=choices,
                        help=f"{field.description}{shown}")
    ap.add_argument("--config", default=None, help="site YAML (pipeline: policies × sizes, windows, curve; flink: "
                    "these options)")
    ap.add_argument("--restore", default=None, help="checkpoint or savepoint path to resume from")
    ap.add_argument("--bounded", action="store_true", default=False,
                    help="stop at the offsets that are the latest at start")
    ap.add_argument("--jar", action="append", help="connector jar(s) (default: the one in --jar-dir)")
    args = ap.parse_args(argv)
    from pydantic import ValidationError

    from cachescope.config import _describe, load_config
    from cachescope.config.environment import variable
    from cachescope.errors import UserError

    try:
        site_config = load_config(args.config)
    except UserError as e:  # one line, no traceback: the job cannot start with this configuration
        print(f"shadow_caches: {e}", file=sys.stderr)
        raise SystemExit(getattr(e, "exit_code", 2)) from None
    given = {k: v for k, v in vars(args).items() if k in type(site_config.flink).model_fields}
    try:
        options = site_config.flink.model_validate({**site_config.flink.model_dump(), **given})
    except ValidationError as e:  # an option the settings refuse
        ap.error(f"flink.{_describe(e)}")
    missing = [k for k in _REQUIRED if getattr(options, k) is None]
    if missing:
        ap.error("; ".join(f"--{k.replace('_', '-')} is required (or the setting flink.{k}, "
                           f"{variable('flink.' + k)})" for k in missing))
    return argparse.Namespace(**{**vars(args), **options.model_dump(mode="json"), "jar": getattr(args, "jar", None)}), \
        site_config


def main(argv: list[str] | None = None) -> None:
    args, site_config = job_options(argv)

    from pyflink.common import Configuration, Types, WatermarkStrategy
    from pyflink.common.serialization import ByteArraySchema, SimpleStringSchema
    from pyflink.datastream import OutputTag, StreamExecutionEnvironment
    from pyflink.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource

    config = site_config.pipeline
    webhook_json = site_config.alerts.webhook.model_dump_json() if site_config.alerts.webhook else ""
    jars = args.jar or default_jars(args.jar_dir)
    ckpt = args.checkpoint_dir if "://" in args.checkpoint_dir else Path(args.checkpoint_dir).resolve().as_uri()

    conf = Configuration()
    conf.set_string("pipeline.jars", ";".join(Path(j).resolve().as_uri() for j in jars))
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.client.executable", sys.executable)
    conf.set_string("python.execution-mode", args.execution_mode)
    conf.set_string("python.state.cache-size", "100000")
    conf.set_string("python.fn-execution.bundle.time", str(_millis(args.bundle_time)))
    conf.set_string("execution.checkpointing.interval", args.checkpoint_interval)
    conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
    conf.set_string("execution.checkpointing.dir", ckpt)
    conf.set_string("state.checkpoints.dir", ckpt)
    conf.set_string("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    conf.set_string("execution.checkpointing.num-retained", "3")
    conf.set_string("restart-strategy.type", "fixed-delay" if args.restart_attempts else "none")
    conf.set_string("restart-strategy.fixed-delay.attempts", str(args.restart_attempts))
    conf.set_string("restart-strategy.fixed-delay.delay", "5s")
    if args.restore:
        conf.set_string("execution.state-recovery.path", args.restore)
        conf.set_string("execution.savepoint.path", args.restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)

    # Messages travel as bytes in process mode: a String would be re-encoded at every hop
    # (Kafka → JVM → Python → shuffle → Python), which was most of the JVM's time. Thread mode
    # converts byte arrays element by element, so there they stay strings.
    if args.execution_mode == "process":
        value_schema, message_type = ByteArraySchema(), Types.PRIMITIVE_ARRAY(Types.BYTE())
    else:
        value_schema, message_type = SimpleStringSchema(), Types.STRING()
    # event time is the core's business (per cache group, from the events themselves): no watermarks
    if config.shards == 1 and args.execution_mode == "process":
        keyed = keyed_by_kafka_key(env, args, message_type)
    else:
        builder = (KafkaSource.builder()
                   .set_bootstrap_servers(args.bootstrap)
                   .set_topics(args.topic)
                   .set_group_id(args.consumer_group)
                   .set_starting_offsets(KafkaOffsetsInitializer.earliest())
                   .set_value_only_deserializer(value_schema)
                   # the shippers write in transactions: read only committed batches
                   .set_property("isolation.level", "read_committed"))
        if args.bounded:
            builder = builder.set_bounded(KafkaOffsetsInitializer.latest())
        keyed = (env.from_source(builder.build(), WatermarkStrategy.no_watermarks(), "kafka: " + args.topic,
                                 type_info=message_type)
                 .flat_map(make_router(config.shards),
                           output_type=Types.TUPLE([Types.STRING(), Types.STRING(), Types.INT(), message_type]))
                 .name(f"cache group (and shard of {config.shards}) of message")
                 .key_by(lambda t: t[0], key_type=Types.STRING()))

    late_tag = OutputTag("late-events", Types.STRING())
    reject_tag = OutputTag("rejected-messages", Types.STRING())
    url = args.clickhouse
    # the path names the database; query settings (?distributed_foreground_insert=1) stay in the URL
    database = args.database or (urlparse(url).path.strip("/") or "default")
    shadow = (keyed
              .process(make_function(config.model_dump_json(), url, database, args.flush_seconds, args.flush_rows,
                                     late_tag, reject_tag, webhook_json, args.write_retry_seconds),
                       output_type=Types.STRING())
              .name("shadow caches → ClickHouse"))
    for tag, topic in ((late_tag, args.late_topic), (reject_tag, args.reject_topic)):
        shadow.get_side_output(tag).sink_to(kafka_sink(args.bootstrap, topic, args.job_name)).name("→ " + topic)
    monitor = start_monitor(args, url, database)
    try:
        env.execute(args.job_name)
    except Exception as e:  # noqa: BLE001 - Py4J hands every job failure over as one Java stack
        # restarts exhausted: rows it had not confirmed are not in the store, so never exit 0
        print(f"shadow_caches: the job failed ({failure_cause(e)}); rows it had not written are missing from "
              "ClickHouse: run it again once the cause is fixed (rows already written are kept once)",
              file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        if monitor is not None:
            monitor.close()
            monitor.store.close()


def failure_cause(e: BaseException) -> str:
    """The root cause of a failed job in one line: the Python error a worker raised, else the
    innermost Java cause."""
    import re

    text = str(e)
    python = re.findall(r"(?m)^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$", text)
    ours = [f"{k}: {m}" for k, m in python if "store" in m or k == "StoreError"]
    if ours:
        return ours[-1][:500]
    causes = re.findall(r"(?m)^Caused by: (.+)$", text)
    line = causes[-1] if causes else next((ln for ln in text.splitlines() if ln.strip()), type(e).__name__)
    return line.strip()[:500]


def start_monitor(args, url: str, database: str):
    """The pipeline monitor as a thread of the driver (None when off or when it cannot start:
    the job runs without it, and says why)."""
    every = _millis(args.monitor_every) / 1000 if args.monitor_every not in ("0", "0s") else 0
    if every <= 0:
        return None
    from cachescope.store import open_store
    from ingest.health import health_topic
    from runners.monitor import PipelineMonitor

    try:
        return PipelineMonitor(args.bootstrap, open_store(clickhouse_url=url, database=database),
                               {args.consumer_group: [args.topic]}, [health_topic(args.topic)], every).start()
    except Exception as e:
        print(f"shadow_caches: pipeline monitor not started: {type(e).__name__}: {e}", file=sys.stderr)
        return None


if __name__ == "__main__":
    main()
