"""The schema for a ClickHouse cluster, generated from the same numbered migrations.

The migrations (cachescope.store.migrations) are written for one server. A cluster of shards ×
replicas (the Altinity ClickHouseInstallation in deploy/k8s/) runs the same statements rewritten:

* replicated: every *MergeTree engine becomes its Replicated* twin, with the ZooKeeper/Keeper
  path `/clickhouse/{cluster}/tables/{shard}/<database>/<table>` and replica `{replica}` (macros
  the operator defines on every pod).
* distributed: each table is created as `<table>_local` and a Distributed table takes the
  original name, so every reader and writer keeps using `access_events`, `efficiency`, … .
  Rows are spread by `cityHash64(cache_group)`: ReplacingMergeTree collapses duplicates only
  inside one shard, and every table's identity key starts with cache_group, so both copies of a
  replayed row land on the same shard (and a what-if reads one shard). Tables without a
  cache_group column are spread by rand().
  Materialized views are local (they see the inserts into their local source table) and write
  into the local target; plain views read the Distributed tables, unchanged.
* on_cluster: `ON CLUSTER '<cluster>'` on every DDL statement, so one run applies it to every
  node (needs Keeper: distributed DDL).

Statements of a kind this module does not know raise an error instead of passing through
unchanged: a new migration kind must be thought about here once.

    python -m cachescope.store.cluster render [--no-replicated] [--no-distributed] [--cluster C] [--on-cluster]
    python -m cachescope.store.cluster apply --clickhouse URL [--database D] [same options]
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from dataclasses import dataclass

from cachescope.store import migrations
from cachescope.store.tables import SCHEMA_MIGRATIONS

LOCAL_SUFFIX = "_local"
DEFAULT_CLUSTER = "{cluster}"  # the operator's macro: the name of the cluster the pod is in
ZK_PATH = "/clickhouse/{cluster}/tables/{shard}/%s/%s"

_ENGINE = re.compile(
    r"ENGINE\s*=\s*(?P<kind>Replacing|Aggregating|Summing|Collapsing|VersionedCollapsing)?MergeTree"
    r"(?:\s*\((?P<args>[^)]*)\))?", re.IGNORECASE)
_CREATE_TABLE = re.compile(r"^CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<db>\w+)\.(?P<name>\w+)", re.IGNORECASE)
_CREATE_MV = re.compile(r"^CREATE\s+MATERIALIZED\s+VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<db>\w+)\.(?P<name>\w+)",
                        re.IGNORECASE)
_CREATE_VIEW = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<db>\w+)\.(?P<name>\w+)",
                          re.IGNORECASE)
_ALTER = re.compile(r"^ALTER\s+TABLE\s+(?P<db>\w+)\.(?P<name>\w+)", re.IGNORECASE)
_DROP = re.compile(r"^DROP\s+(?P<what>TABLE|VIEW|DICTIONARY)\s+(?:IF\s+EXISTS\s+)?(?P<db>\w+)\.(?P<name>\w+)",
                   re.IGNORECASE)
_INSERT = re.compile(r"^INSERT\s+INTO\s+", re.IGNORECASE)


class ClusterSchemaError(RuntimeError):
    pass


@dataclass(frozen=True)
class Variant:
    replicated: bool = True
    distributed: bool = True
    cluster: str = DEFAULT_CLUSTER
    on_cluster: bool = False

    def on(self) -> str:
        return f" ON CLUSTER '{self.cluster}'" if self.on_cluster else ""


def _strip_comments(stmt: str) -> str:
    return "\n".join(ln for ln in stmt.splitlines() if not ln.strip().startswith("--")).strip()


def _replicated_engine(m: re.Match, database: str, table: str) -> str:
    args = [f"'{ZK_PATH % (database, table)}'", "'{replica}'"]
    if m.group("args") and m.group("args").strip():
        args.append(m.group("args").strip())
    return f"ENGINE = Replicated{m.group('kind') or ''}MergeTree({', '.join(args)})"


def _after_name(stmt: str, m: re.Match, text: str) -> str:
    """Insert `text` right after the object name the pattern matched."""
    return stmt[:m.end()] + text + stmt[m.end():]


def _localize(stmt: str, database: str, tables: set[str]) -> str:
    """Point references to distributed tables at their local tables."""
    for t in sorted(tables, key=len, reverse=True):
        stmt = re.sub(rf"\b{re.escape(database)}\.{re.escape(t)}\b(?!{LOCAL_SUFFIX})",
                      f"{database}.{t}{LOCAL_SUFFIX}", stmt)
    return stmt


def rewrite(statements: list[str], database: str, variant: Variant, tables: set[str]) -> list[str]:
    """The cluster form of one migration's statements. `tables` collects (and is read for) the
    names that became `<name>_local` + Distributed, across migrations in order."""
    out: list[str] = []
    on = variant.on()
    for raw in statements:
        stmt = _strip_comments(raw)
        if m := _CREATE_TABLE.match(stmt):
            name = m.group("name")
            engine = _ENGINE.search(stmt)
            if engine is None:
                raise ClusterSchemaError(f"CREATE TABLE {name}: no *MergeTree engine, nothing to replicate or shard")
            local = name + LOCAL_SUFFIX if variant.distributed else name
            body = stmt[:m.start("name")] + local + stmt[m.end("name"):]
            if variant.replicated:
                engine = _ENGINE.search(body)
                body = body[:engine.start()] + _replicated_engine(engine, database, local) + body[engine.end():]
            body = _after_name(body, _CREATE_TABLE.match(body), on)
            out.append(body)
            if variant.distributed:
                tables.add(name)
                key = "cityHash64(cache_group)" if re.search(r"^\s*cache_group\s", stmt, re.M) else "rand()"
                out.append(f"CREATE TABLE IF NOT EXISTS {database}.{name}{on} AS {database}.{local}\n"
                           f"ENGINE = Distributed('{variant.cluster}', '{database}', '{local}', {key})")
        elif m := _CREATE_MV.match(stmt):
            # the view fires on inserts into its (local) source and writes its (local) target
            body = _localize(stmt, database, tables) if variant.distributed else stmt
            out.append(_after_name(body, _CREATE_MV.match(body), on))
        elif m := _CREATE_VIEW.match(stmt):
            out.append(_after_name(stmt, m, on))  # reads the Distributed tables: unchanged
        elif m := _ALTER.match(stmt):
            name = m.group("name")
            if variant.distributed and name in tables:
                # the local table first: a Distributed table must not name a column its shards lack
                local = _localize(stmt, database, {name})
                out.append(_after_name(local, _ALTER.match(local), on))
            out.append(_after_name(stmt, m, on))
        elif m := _DROP.match(stmt):
            name = m.group("name")
            out.append(_after_name(stmt, m, on))
            if variant.distributed and name in tables:
                local = _localize(stmt, database, {name})
                out.append(_after_name(local, _DROP.match(local), on))
                tables.discard(name)
        elif _INSERT.match(stmt):
            out.append(stmt)  # through the Distributed tables, once (not ON CLUSTER: that would repeat it per node)
        else:
            raise ClusterSchemaError(f"cannot rewrite this statement for a cluster, teach cachescope.store.cluster: "
                                     f"{stmt.splitlines()[0][:80]}")
    return out


def values(database: str, events_ttl_days: int = migrations.DEFAULT_EVENTS_TTL_DAYS,
           health_ttl_days: int = migrations.DEFAULT_HEALTH_TTL_DAYS) -> dict[str, object]:
    # as migrations.migrate(): no TTL clause when events are kept (0)
    ttl = f"TTL toDateTime(ts) + INTERVAL {int(events_ttl_days)} DAY" if events_ttl_days else ""
    return {"database": database, "events_ttl": ttl, "events_ttl_days": int(events_ttl_days),
            "health_ttl_days": int(health_ttl_days)}


def schema_migrations_ddl(database: str, variant: Variant) -> str:
    """The applied-migrations log, one for the whole cluster when replicated (no {shard} in its
    path), so a migration job that reaches any node sees what was applied."""
    ddl = migrations.render(migrations.SCHEMA_MIGRATIONS_DDL, {"database": database})
    if variant.replicated:
        ddl = ddl.replace("ENGINE = MergeTree",
                          f"ENGINE = ReplicatedMergeTree('/clickhouse/{{cluster}}/tables/all/{database}/"
                          f"{SCHEMA_MIGRATIONS}', '{{shard}}-{{replica}}')")
    m = _CREATE_TABLE.match(ddl)
    return _after_name(ddl, m, variant.on())


def render(database: str, variant: Variant, events_ttl_days: int = migrations.DEFAULT_EVENTS_TTL_DAYS,
           health_ttl_days: int = migrations.DEFAULT_HEALTH_TTL_DAYS) -> list[tuple[migrations.Migration, list[str]]]:
    """Every migration with its cluster statements, in order."""
    vals = values(database, events_ttl_days, health_ttl_days)
    tables: set[str] = set()
    return [(m, rewrite(m.statements(vals), database, variant, tables)) for m in migrations.discover()]


def apply(store, variant: Variant, events_ttl_days: int = migrations.DEFAULT_EVENTS_TTL_DAYS,
          health_ttl_days: int = migrations.DEFAULT_HEALTH_TTL_DAYS) -> list[migrations.Migration]:
    """Apply the migrations not yet recorded, in their cluster form; return those applied."""
    db = store.database
    if variant.on_cluster:
        store.command(f"CREATE DATABASE IF NOT EXISTS {db}{variant.on()}")
    store.command(schema_migrations_ddl(db, variant))
    done = migrations.applied(store)
    ran = []
    for m, stmts in render(db, variant, events_ttl_days, health_ttl_days):
        if m.version in done:
            if done[m.version][1] != m.checksum:
                raise migrations.MigrationError(f"migration {m.label} was changed after it was applied to {db}: "
                                                "add a new migration instead")
            continue
        for s in stmts:
            store.command(s)
        store.insert(SCHEMA_MIGRATIONS, {"version": [m.version], "name": [m.name], "checksum": [m.checksum],
                                         "applied_at": [dt.datetime.now(dt.timezone.utc)]})
        ran.append(m)
    return ran


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m cachescope.store.cluster",
                                 description="the replicated/distributed schema, from the same migrations")
    ap.add_argument("action", choices=("render", "apply"))
    ap.add_argument("--clickhouse", help="clickhouse://host:port (apply)")
    ap.add_argument("--database", default="cachescope")
    ap.add_argument("--cluster", default=DEFAULT_CLUSTER, help="remote_servers cluster name (default: the {cluster} macro)")
    ap.add_argument("--no-replicated", action="store_true", help="plain *MergeTree local tables (shards without replicas)")
    ap.add_argument("--no-distributed", action="store_true", help="no Distributed tables (one shard, replicas only)")
    ap.add_argument("--on-cluster", action="store_true", help="ON CLUSTER on every DDL statement (needs Keeper)")
    ap.add_argument("--events-ttl-days", type=int, default=migrations.DEFAULT_EVENTS_TTL_DAYS)
    ap.add_argument("--health-ttl-days", type=int, default=migrations.DEFAULT_HEALTH_TTL_DAYS)
    a = ap.parse_args(argv)
    variant = Variant(not a.no_replicated, not a.no_distributed, a.cluster, a.on_cluster)
    try:
        if a.action == "render":
            print(f"-- {variant}\n" + schema_migrations_ddl(a.database, variant) + ";\n")
            for m, stmts in render(a.database, variant, a.events_ttl_days, a.health_ttl_days):
                print(f"-- {m.label}")
                print(";\n\n".join(stmts) + ";\n")
            return 0
        if not a.clickhouse:
            print("cluster: apply needs --clickhouse clickhouse://host:port", file=sys.stderr)
            return 2
        from cachescope.store import ClickHouseStore, StoreError

        try:
            store = ClickHouseStore(a.clickhouse, database=a.database)
            ran = apply(store, variant, a.events_ttl_days, a.health_ttl_days)
        except (StoreError, OSError, EOFError) as e:
            print(f"cluster: {a.clickhouse}: {str(e).splitlines()[0]}", file=sys.stderr)
            return 1
        for m in ran:
            print(f"applied {m.label}")
        print(f"{a.database}: {len(ran)} migration(s) applied ({variant})")
        return 0
    except (migrations.MigrationError, ClusterSchemaError, ValueError) as e:
        print(f"cluster: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
