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

Two ways in, both from the migrations:
* a fresh database gets the *final* schema: the migrations run on a scratch database of the same
  server with their single-node engines (`plan`), and every object they leave is created in its
  cluster form. No ALTER, RENAME or copy of a migration's history runs on the cluster.
* a database that has migrations applied gets the new ones one by one: .sql statements rewritten;
  a Python migration (`forward(store, values)`) runs against a store that rewrites every command
  it sends (ALTER and RENAME of a sharded table recreate its Distributed table).

    python -m cachescope.store.cluster render [--no-replicated] [--no-distributed] [--cluster C] [--on-cluster]   (plans in chDB)
    python -m cachescope.store.cluster apply --clickhouse URL [--database D] [same options]
"""

from __future__ import annotations

import datetime as dt
import re
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from cachescope.errors import UserError
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


class ClusterSchemaError(UserError, RuntimeError):
    """The cluster's tables are not what the migrations make (exit 1)."""


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


def _sharding_key(stmt: str) -> str:
    # a cache_group column, in a migration's layout or in ClickHouse's one-line SHOW CREATE
    has = re.search(r"(?:^|[(,])\s*`?cache_group`?\s+[A-Z]", stmt, re.M)
    return "cityHash64(cache_group)" if has else "rand()"


def _distributed(database: str, name: str, key: str, variant: Variant) -> str:
    return (f"CREATE TABLE IF NOT EXISTS {database}.{name}{variant.on()} AS {database}.{name}{LOCAL_SUFFIX}\n"
            f"ENGINE = Distributed('{variant.cluster}', '{database}', '{name}{LOCAL_SUFFIX}', {key})")


_CREATE_AS = re.compile(r"^CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<db>\w+)\.(?P<name>\w+)\s+AS\s+(?P<sdb>\w+)\.(?P<src>\w+)\s*$",
                        re.IGNORECASE)
_TRUNCATE = re.compile(r"^TRUNCATE\s+(?:TABLE\s+)?(?:IF\s+EXISTS\s+)?(?P<db>\w+)\.(?P<name>\w+)", re.IGNORECASE)
_RENAME = re.compile(r"^RENAME\s+TABLE\s+(?P<db>\w+)\.(?P<name>\w+)\s+TO\s+(?P<db2>\w+)\.(?P<new>\w+)\s*$", re.IGNORECASE)
_REPLICATED = re.compile(r"Replicated(?P<kind>\w*MergeTree)\('[^']*',\s*'[^']*'(?:,\s*)?")


def single_node_engine(engine_full: str) -> str:
    """`engine_full` of a local table with its Replicated prefix and Keeper arguments taken out."""
    return _REPLICATED.sub(lambda m: m.group("kind") + "(", engine_full).replace("MergeTree()", "MergeTree")


def _localize(stmt: str, database: str, tables) -> str:
    """Point references to distributed tables at their local tables."""
    for t in sorted(tables, key=len, reverse=True):
        stmt = re.sub(rf"\b{re.escape(database)}\.{re.escape(t)}\b(?!{LOCAL_SUFFIX})",
                      f"{database}.{t}{LOCAL_SUFFIX}", stmt)
    return stmt


def rewrite(statements: list[str], database: str, variant: Variant, tables: dict[str, str],
            engine_of=None) -> list[str]:
    """The cluster form of statements. `tables` collects (and is read for) the names that became
    `<name>_local` + Distributed, with their sharding keys, across migrations in order.
    `engine_of(table)`: the single-node ENGINE clause of a table, for `CREATE TABLE t AS src`."""
    out: list[str] = []
    on = variant.on()
    for raw in statements:
        stmt = _strip_comments(raw)
        if m := _CREATE_AS.match(stmt):
            if engine_of is None:
                raise ClusterSchemaError(f"CREATE TABLE {m.group('name')} AS {m.group('src')}: needs the source's engine")
            # the copy gets its own Keeper path: AS alone would make it a replica of the source
            stmt = f"{stmt} ENGINE = {engine_of(m.group('src'))}"
            if variant.distributed and m.group("src") in tables:
                tables[m.group("name")] = tables[m.group("src")]
            out.extend(rewrite([stmt], database, variant, tables, engine_of))
            continue
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
                key = tables.get(name) or _sharding_key(stmt)
                tables[name] = key
                out.append(_distributed(database, name, key, variant))
        elif m := _CREATE_MV.match(stmt):
            # the view fires on inserts into its (local) source and writes its (local) target
            body = _localize(stmt, database, tables) if variant.distributed else stmt
            out.append(_after_name(body, _CREATE_MV.match(body), on))
        elif m := _CREATE_VIEW.match(stmt):
            out.append(_after_name(stmt, m, on))  # reads the Distributed tables: unchanged
        elif m := _ALTER.match(stmt):
            name = m.group("name")
            if variant.distributed and name in tables:
                # the local table, then a fresh Distributed table over it (it takes the new columns;
                # a Distributed table accepts no ORDER BY, TTL, … changes)
                local = _localize(stmt, database, {name})
                out.append(_after_name(local, _ALTER.match(local), on))
                out.append(f"DROP TABLE IF EXISTS {database}.{name}{on} SYNC")
                out.append(_distributed(database, name, tables[name], variant))
            else:
                out.append(_after_name(stmt, m, on))
        elif m := _TRUNCATE.match(stmt):
            local = _localize(stmt, database, {m.group("name")}) if variant.distributed else stmt
            out.append(_after_name(local, _TRUNCATE.match(local), on))
        elif m := _RENAME.match(stmt):
            name, new = m.group("name"), m.group("new")
            if variant.distributed and name in tables:
                out.append(f"RENAME TABLE {database}.{name}{LOCAL_SUFFIX} TO {database}.{new}{LOCAL_SUFFIX}{on}")
                out.append(f"DROP TABLE IF EXISTS {database}.{name}{on} SYNC")
                tables[new] = tables.pop(name)
                out.append(_distributed(database, new, tables[new], variant))
            else:
                out.append(f"{stmt}{on}")
        elif m := _DROP.match(stmt):
            name = m.group("name")
            out.append(_after_name(stmt, m, on))
            if variant.distributed and name in tables:
                local = _localize(stmt, database, {name})
                local = _after_name(local, _DROP.match(local), on)
                out.append(local if re.search(r"\bSYNC\s*$", local) else local + " SYNC")
                tables.pop(name)
        elif _INSERT.match(stmt):
            # ON CLUSTER: once, through the Distributed tables (every node has the DDL by then).
            # Node by node: each node copies its own rows, local table to local table (another
            # shard may not have the target table yet)
            local = variant.distributed and not variant.on_cluster
            out.append(_localize(stmt, database, tables) if local else stmt)
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


class _RewritingStore:
    """The store a migration sees: every command rewritten for the cluster, run on `target` and
    recorded; queries (system tables, INSERT … SELECT sources) answered by `oracle`."""

    def __init__(self, database: str, variant: Variant, tables: dict[str, str], engine_of, target, oracle=None,
                 run_original: bool = False):
        self.database = database
        self.variant, self.tables, self.engine_of = variant, tables, engine_of
        self.target, self.oracle = target, oracle or target
        self.run_original = run_original  # planning: the oracle runs the single-node statement
        self.statements: list[str] = []

    def command(self, sql: str, params=None) -> None:
        if params:
            raise ClusterSchemaError("a migration command with query parameters cannot be rewritten")
        if self.run_original:
            self.oracle.command(sql)
        for stmt in rewrite([sql], self.database, self.variant, self.tables, self.engine_of):
            self.statements.append(stmt)
            if self.target is not None:
                self.target.command(stmt)

    def query(self, sql: str, params=None):
        return self.oracle.query(sql, params)

    def insert(self, table: str, columns, settings=None):
        return self.oracle.insert(table, columns, settings)


def _engine_lookup(store, database: str, tables: dict[str, str]):
    def engine_of(table: str) -> str:
        name = table + LOCAL_SUFFIX if table in tables else table
        full = store.query("SELECT engine_full FROM system.tables WHERE database = {d:String} AND name = {n:String}",
                           {"d": database, "n": name}).rows
        if not full:
            raise ClusterSchemaError(f"no table {database}.{name} to copy the engine of")
        return single_node_engine(full[0][0])
    return engine_of


def final_schema(scratch, database: str, variant: Variant, events_ttl_days: int = migrations.DEFAULT_EVENTS_TTL_DAYS,
                 health_ttl_days: int = migrations.DEFAULT_HEALTH_TTL_DAYS, directory=None) -> list[str]:
    """The cluster statements that create, in an empty `database`, what every migration leaves.
    `scratch`: a store on an empty database of any ClickHouse (the single-node migrations run there)."""
    migrations.migrate(scratch, events_ttl_days, health_ttl_days, directory)
    rows = scratch.query("SELECT name, engine, create_table_query FROM system.tables WHERE database = {d:String} "
                         "AND name != {m:String} ORDER BY name", {"d": scratch.database, "m": SCHEMA_MIGRATIONS}).rows
    rank = {"MaterializedView": 1, "View": 2}
    unknown = [(n, e) for n, e, _ in rows if e not in rank and not e.endswith("MergeTree")]
    if unknown:
        raise ClusterSchemaError(f"cannot create these for a cluster, teach cachescope.store.cluster: {unknown}")
    tables: dict[str, str] = {}
    out: list[str] = []
    for name, engine, ddl in sorted(rows, key=lambda r: (rank.get(r[1], 0), r[0])):
        ddl = re.sub(rf"\b{re.escape(scratch.database)}\.", f"{database}.", ddl)
        ddl = re.sub(r"^CREATE (TABLE|VIEW|MATERIALIZED VIEW) ", r"CREATE \1 IF NOT EXISTS ", ddl)
        out.extend(rewrite([ddl], database, variant, tables))
    return out


def render(database: str, variant: Variant, scratch, events_ttl_days: int = migrations.DEFAULT_EVENTS_TTL_DAYS,
           health_ttl_days: int = migrations.DEFAULT_HEALTH_TTL_DAYS, directory=None) -> list[str]:
    """The whole cluster schema for a fresh database: schema_migrations, then final_schema."""
    return [schema_migrations_ddl(database, variant)] + final_schema(
        scratch, database, variant, events_ttl_days, health_ttl_days, directory)


def _distributed_tables(store, database: str) -> dict[str, str]:
    """The sharded tables a database has: name → sharding key, read from its Distributed tables."""
    out = {}
    for name, full in store.query("SELECT name, engine_full FROM system.tables WHERE database = {d:String} "
                                  "AND engine = 'Distributed'", {"d": database}).rows:
        m = re.search(r"Distributed\((?:'[^']*',\s*){3}(.*)\)\s*$", full)
        out[name] = m.group(1) if m else "rand()"
    return out


def apply(store, variant: Variant, events_ttl_days: int = migrations.DEFAULT_EVENTS_TTL_DAYS,
          health_ttl_days: int = migrations.DEFAULT_HEALTH_TTL_DAYS, directory=None) -> list[migrations.Migration]:
    """Apply the migrations not yet recorded, in their cluster form; return those applied.
    A fresh database gets the final schema (planned on a scratch database of the same server);
    one with migrations applied gets each new migration rewritten."""
    from cachescope.store.server import ClickHouseStore

    db = store.database
    if variant.on_cluster:
        store.command(f"CREATE DATABASE IF NOT EXISTS {db}{variant.on()}")
    store.command(schema_migrations_ddl(db, variant))
    done = migrations.applied(store)
    all_migrations = migrations.discover(directory)
    todo = [m for m in all_migrations if m.version not in done]
    for m in all_migrations:
        if m.version in done and done[m.version][1] != m.checksum:
            raise migrations.MigrationError(f"migration {m.label} was changed after it was applied to {db}: "
                                            "add a new migration instead")
    if not todo:
        return []
    if not done:
        scratch = ClickHouseStore(store.url, database=f"{db}__plan_{uuid.uuid4().hex[:8]}")
        try:
            stmts = final_schema(scratch, db, variant, events_ttl_days, health_ttl_days, directory)
        finally:
            scratch.command(f"DROP DATABASE IF EXISTS {scratch.database} SYNC")
            scratch.close()
        for stmt in stmts:
            store.command(stmt)
    else:
        vals = values(db, events_ttl_days, health_ttl_days)
        tables = _distributed_tables(store, db) if variant.distributed else {}
        for m in todo:
            proxy = _RewritingStore(db, variant, tables, _engine_lookup(store, db, tables), store)
            if m.path.suffix == ".py":
                m.apply(proxy, vals)
            else:
                for stmt in m.statements(vals):
                    proxy.command(stmt)
    for m in todo:
        store.insert(SCHEMA_MIGRATIONS, {"version": [m.version], "name": [m.name], "checksum": [m.checksum],
                                         "applied_at": [dt.datetime.now(dt.timezone.utc)]})
    return todo


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
            import tempfile

            from cachescope.store import EmbeddedStore

            # the single-node migrations run in an embedded ClickHouse (chDB) in a temporary folder
            with tempfile.TemporaryDirectory() as tmp:
                scratch = EmbeddedStore(Path(tmp) / "plan", database="plan")
                try:
                    stmts = render(a.database, variant, scratch, a.events_ttl_days, a.health_ttl_days)
                finally:
                    scratch.close()
            print(f"-- {variant}: a fresh database\n" + ";\n\n".join(stmts) + ";")
            return 0
        if not a.clickhouse:
            print("cluster: apply needs --clickhouse clickhouse://host:port", file=sys.stderr)
            return 2
        import logging

        from cachescope.store import ClickHouseStore, StoreError

        logging.getLogger("clickhouse_driver").setLevel(logging.CRITICAL)  # one line below, no traceback
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
