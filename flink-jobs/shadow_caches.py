"""PyFlink job: Kafka `cachescope.events` → shadow caches per cache group → ClickHouse.

A thin adapter: all the work happens in cachescope.core.GroupProcessor, called once per Kafka
message (a batch of events). The processor and its outbox of unwritten rows live in Flink keyed
state, so a checkpoint captures the caches, the open windows and the rows not yet written,
consistently with the Kafka offsets: a restored job ends with exactly the results of an
uninterrupted one (rows are deterministic, the tables replace duplicates).

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
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONNECTOR_JAR = "flink-sql-connector-kafka-5.0.0-2.2.jar"
END_OF_INPUT = 2**63 - 2  # event-time timer that only a finished bounded source reaches


def build_state_type():
    from pyflink.common import Types

    # thread mode converts PRIMITIVE_ARRAY(BYTE) element by element: pickled objects are ~500× cheaper
    return Types.PICKLED_BYTE_ARRAY()


class GroupState:
    """What one key keeps: the processor and the rows it emitted that are not yet written."""

    def __init__(self, processor, outbox):
        self.processor = processor
        self.outbox = outbox
        self.last_flush = time.monotonic()

    def __reduce__(self):
        # the compiled bank pickles through its own versioned snapshot
        p = self.processor
        return (_restore_group_state, (p.cache_group, p.config.model_dump_json(), p.snapshot(), self.outbox))


def _restore_group_state(cache_group, config_json, snapshot, outbox):
    from cachescope.core import GroupProcessor, PipelineConfig

    config = PipelineConfig.model_validate_json(config_json)
    return GroupState(GroupProcessor.restore(cache_group, config, snapshot), outbox)


def make_function(config_json: str, clickhouse_url: str, database: str, flush_seconds: float, late_tag):
    from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    class ShadowCacheFunction(KeyedProcessFunction):
        def open(self, ctx: RuntimeContext):
            from cachescope.core import PipelineConfig
            from cachescope.store import open_store

            self.config = PipelineConfig.model_validate_json(config_json)
            self.state = ctx.get_state(ValueStateDescriptor("group", build_state_type()))
            self.store = open_store(clickhouse_url=clickhouse_url, database=database)

        def close(self):
            self.store.close()

        def process_element(self, value, ctx):
            from cachescope.core import EventColumns, GroupProcessor
            from cachescope.core.messages import decode_batch
            from cachescope.core.outbox import Outbox

            group = ctx.get_current_key()
            st = self.state.value()
            if st is None:
                st = GroupState(GroupProcessor(group, self.config), Outbox())
                ctx.timer_service().register_event_time_timer(END_OF_INPUT)
            _, events = decode_batch(value[1])
            cols = EventColumns.from_events(events)
            out = st.processor.process(cols)
            st.outbox.add("access_events", cols.access_event_rows())
            st.outbox.add_emitted(out)
            if out.late is not None:
                import orjson

                for i in range(len(out.late)):
                    yield late_tag, orjson.dumps({"cache_group": group, "ts": int(out.late.ts[i]),
                                                  "seq": int(out.late.seq[i]), "file_id": int(out.late.file_id[i]),
                                                  "source": out.late.source[i]}).decode()
            if time.monotonic() - st.last_flush >= flush_seconds:
                self._flush(st, group)
            else:
                ctx.timer_service().register_processing_time_timer(
                    int((time.time() + flush_seconds) * 1000))
            self.state.update(st)

        def on_timer(self, timestamp, ctx):
            st = self.state.value()
            if st is None:
                return
            if timestamp >= END_OF_INPUT:  # bounded input finished: close every window
                st.outbox.add_emitted(st.processor.flush())
            self._flush(st, ctx.get_current_key())
            self.state.update(st)

        def _flush(self, st, group):
            if len(st.outbox):
                health = {"outbox_rows": float(len(st.outbox))}
                for table, columns in st.outbox.drain().items():
                    self.store.insert(table, columns)
                p = st.processor
                health.update(events_in=float(p.events_in), late_events=float(p.late_total))
                self.store.insert_health("flink", group, health)
            st.last_flush = time.monotonic()

    return ShadowCacheFunction()


def default_jars() -> list[str]:
    found = glob.glob(str(REPO / ".cache" / "flink-jars" / CONNECTOR_JAR))
    if not found:
        raise SystemExit(f"connector jar {CONNECTOR_JAR} not found: run `scripts/services fetch-flink-jars` "
                         "or pass --jar")
    return found


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="cachescope shadow-cache job (PyFlink)")
    ap.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers host:port")
    ap.add_argument("--topic", default="cachescope.events")
    ap.add_argument("--late-topic", default="cachescope.events.late", help="late events (side output)")
    ap.add_argument("--consumer-group", default="cachescope-shadow-caches")
    ap.add_argument("--clickhouse", required=True, help="clickhouse://host:port[/database]")
    ap.add_argument("--database", default=None)
    ap.add_argument("--config", default=None, help="pipeline YAML (policies × sizes, windows, curve)")
    ap.add_argument("--checkpoint-dir", required=True, help="checkpoints (file:// path locally, s3:// in production)")
    ap.add_argument("--checkpoint-interval", default="5s")
    ap.add_argument("--restore", default=None, help="checkpoint or savepoint path to resume from")
    ap.add_argument("--bounded", action="store_true", help="stop at the offsets that are the latest at start")
    ap.add_argument("--parallelism", type=int, default=1)
    ap.add_argument("--execution-mode", choices=("process", "thread"), default="process")
    ap.add_argument("--flush-seconds", type=float, default=2.0, help="how often rows are written")
    ap.add_argument("--jar", action="append", default=None, help="connector jar(s)")
    args = ap.parse_args(argv)

    from pyflink.common import Configuration, Types, WatermarkStrategy
    from pyflink.common.serialization import SimpleStringSchema
    from pyflink.datastream import OutputTag, StreamExecutionEnvironment
    from pyflink.datastream.connectors.base import DeliveryGuarantee
    from pyflink.datastream.connectors.kafka import (KafkaOffsetsInitializer, KafkaRecordSerializationSchema,
                                                     KafkaSink, KafkaSource)

    from cachescope.config import load_config
    from cachescope.core.messages import cache_group_of

    config = load_config(args.config).pipeline
    jars = args.jar or default_jars()
    ckpt = args.checkpoint_dir if "://" in args.checkpoint_dir else Path(args.checkpoint_dir).resolve().as_uri()

    conf = Configuration()
    conf.set_string("pipeline.jars", ";".join(Path(j).resolve().as_uri() for j in jars))
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.client.executable", sys.executable)
    conf.set_string("python.execution-mode", args.execution_mode)
    conf.set_string("python.state.cache-size", "100000")
    conf.set_string("execution.checkpointing.interval", args.checkpoint_interval)
    conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
    conf.set_string("execution.checkpointing.dir", ckpt)
    conf.set_string("state.checkpoints.dir", ckpt)
    conf.set_string("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    conf.set_string("execution.checkpointing.num-retained", "3")
    if args.restore:
        conf.set_string("execution.state-recovery.path", args.restore)
        conf.set_string("execution.savepoint.path", args.restore)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)

    builder = (KafkaSource.builder()
               .set_bootstrap_servers(args.bootstrap)
               .set_topics(args.topic)
               .set_group_id(args.consumer_group)
               .set_starting_offsets(KafkaOffsetsInitializer.earliest())
               .set_value_only_deserializer(SimpleStringSchema()))
    if args.bounded:
        builder = builder.set_bounded(KafkaOffsetsInitializer.latest())
    # event time is the core's business (per cache group, from the events themselves)
    messages = env.from_source(builder.build(), WatermarkStrategy.no_watermarks(), "kafka: " + args.topic)

    late_tag = OutputTag("late-events", Types.STRING())
    url = args.clickhouse
    database = args.database or (url.rstrip("/").rsplit("/", 1)[-1] if url.count("/") > 2 else "default")
    shadow = (messages
              .map(lambda m: (cache_group_of(m), m), output_type=Types.TUPLE([Types.STRING(), Types.STRING()]))
              .name("cache group of message")
              .key_by(lambda t: t[0], key_type=Types.STRING())
              .process(make_function(config.model_dump_json(), url, database, args.flush_seconds, late_tag),
                       output_type=Types.STRING())
              .name("shadow caches → ClickHouse"))
    late_sink = (KafkaSink.builder()
                 .set_bootstrap_servers(args.bootstrap)
                 .set_record_serializer(KafkaRecordSerializationSchema.builder()
                                        .set_topic(args.late_topic)
                                        .set_value_serialization_schema(SimpleStringSchema()).build())
                 .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
                 .build())
    shadow.get_side_output(late_tag).sink_to(late_sink).name("late events → " + args.late_topic)
    env.execute("cachescope shadow caches")


if __name__ == "__main__":
    main()
