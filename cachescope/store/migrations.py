"""Numbered ClickHouse migrations (cachescope/store/ddl/NNNN_name.sql, package data), snuba style.

Each file is plain SQL, one or more statements separated by `;`, with placeholders filled at
apply time: {database}, {events_ttl} (the access_events TTL clause), {health_ttl_days}. A change
that must look at the store first (rebuilding a table under a new key, safely re-runnable after
an interruption at any step) is a Python file `NNNN_name.py` with `forward(store, values)`. Applied migrations are recorded in
`schema_migrations` (version, name, checksum, applied_at): re-running applies only new files,
and a file changed after it was applied is an error (write a new migration instead). The
checksum is of the file as written, so TTL settings do not change it. Statements are
idempotent (IF NOT EXISTS) so a migration interrupted half-way can simply be run again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from importlib import resources
from dataclasses import dataclass
from pathlib import Path

from cachescope.errors import UserError
from cachescope.store.base import Store
from cachescope.store.tables import SCHEMA_MIGRATIONS

DEFAULT_EVENTS_TTL_DAYS = 90
DEFAULT_HEALTH_TTL_DAYS = 30

SCHEMA_MIGRATIONS_DDL = f"""CREATE TABLE IF NOT EXISTS {{database}}.{SCHEMA_MIGRATIONS}
(
    version UInt32,
    name String,
    checksum String,
    applied_at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY version"""

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.(sql|py)$")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


class MigrationError(UserError, RuntimeError):
    """A migration that cannot be applied, or a store at another version (exit 1)."""

    subject = "migration"


def migrations_dir() -> Path:
    """The settings' store.migrations_dir (CACHESCOPE_STORE__MIGRATIONS_DIR, or the flat
    CACHESCOPE_MIGRATIONS_DIR), else the package's own ddl/ (found through importlib.resources,
    so an installed wheel or a container image carries its migrations)."""
    from cachescope.config.environment import section_environment
    from cachescope.config.services import StoreConfig

    configured = StoreConfig.model_validate(section_environment("store")).migrations_dir
    if configured:
        return configured
    return Path(str(resources.files("cachescope.store") / "ddl"))


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"

    def statements(self, values: dict[str, object]) -> list[str]:
        """The SQL statements of a .sql migration (a .py migration has none: it runs code)."""
        if self.path.suffix == ".py":
            return []
        return split_statements(render(self.text, values))

    def apply(self, store: Store, values: dict[str, object]) -> None:
        if self.path.suffix == ".py":
            namespace: dict[str, object] = {"__name__": f"cachescope_migration_{self.label}"}
            exec(compile(self.text, str(self.path), "exec"), namespace)  # noqa: S102 - our own package file
            namespace["forward"](store, values)  # type: ignore[operator]
            return
        for stmt in self.statements(values):
            store.command(stmt)


def discover(directory: Path | None = None) -> list[Migration]:
    directory = directory or migrations_dir()
    if not directory.is_dir():
        raise MigrationError(f"no migrations directory {directory} (set CACHESCOPE_MIGRATIONS_DIR)")
    found: list[Migration] = []
    for p in sorted(directory.iterdir()):
        if p.suffix not in (".sql", ".py") or p.name.startswith("_"):
            continue
        m = _FILE.match(p.name)
        if not m:
            raise MigrationError(f"{p.name}: migration files are named NNNN_name.sql or NNNN_name.py")
        found.append(Migration(int(m.group(1)), m.group(2), p, p.read_text()))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise MigrationError(f"migration versions must run 1, 2, 3, … without gaps or repeats: {versions}")
    return found


def render(template: str, values: dict[str, object]) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) not in values:
            raise MigrationError(f"unknown placeholder {{{m.group(1)}}} in a migration")
        return str(values[m.group(1)])

    return _PLACEHOLDER.sub(sub, template)


def split_statements(sql: str) -> list[str]:
    """Split on `;` outside quotes and comments; drop empty statements."""
    out, buf, i, n = [], [], 0, len(sql)
    quote: str | None = None
    while i < n:
        c = sql[i]
        if quote:
            buf.append(c)
            if c == "\\" and i + 1 < n:
                buf.append(sql[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
            buf.append(c)
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            buf.append(sql[i:j])
            i = j
            continue
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            buf.append(sql[i:j])
            i = j
            continue
        elif c == ";":
            out.append("".join(buf))
            buf = []
        else:
            buf.append(c)
        i += 1
    out.append("".join(buf))
    return [s.strip() for s in out if _has_code(s)]


def _has_code(stmt: str) -> bool:
    lines = [ln for ln in stmt.splitlines() if ln.strip() and not ln.strip().startswith("--")]
    return bool(lines)


@dataclass
class MigrationStatus:
    migration: Migration
    applied_at: dt.datetime | None


def applied(store: Store) -> dict[int, tuple[str, str, dt.datetime]]:
    store.command(render(SCHEMA_MIGRATIONS_DDL, {"database": store.database}))
    r = store.query(f"SELECT version, name, checksum, applied_at FROM {SCHEMA_MIGRATIONS} ORDER BY version")
    return {v: (name, checksum, at) for v, name, checksum, at in r.rows}


def status(store: Store, directory: Path | None = None) -> list[MigrationStatus]:
    done = applied(store)
    return [MigrationStatus(m, done[m.version][2] if m.version in done else None) for m in discover(directory)]


def migrate(
    store: Store,
    events_ttl_days: int = DEFAULT_EVENTS_TTL_DAYS,
    health_ttl_days: int = DEFAULT_HEALTH_TTL_DAYS,
    directory: Path | None = None,
) -> list[Migration]:
    """Apply the migrations not yet recorded in the store's database; return those applied."""
    if int(events_ttl_days) < 0:
        raise MigrationError("events_ttl_days must be 0 (keep) or a number of days")
    if int(health_ttl_days) < 1:
        raise MigrationError("health_ttl_days must be at least 1 day")
    migrations = discover(directory)
    done = applied(store)
    known = {m.version for m in migrations}
    newer = sorted(v for v in done if v not in known)
    if newer:
        raise MigrationError(f"database {store.database} has migrations {newer} this code does not know: "
                             "it was migrated by a newer cachescope")
    # events_ttl_days=0 keeps the events: the TTL counts from each event's own time, so a replay
    # of last year's logs would expire on insert
    events_ttl = f"TTL toDateTime(ts) + INTERVAL {int(events_ttl_days)} DAY" if events_ttl_days else ""
    values = {"database": store.database, "events_ttl": events_ttl, "events_ttl_days": int(events_ttl_days),
              "health_ttl_days": int(health_ttl_days)}
    ran: list[Migration] = []
    for m in migrations:
        if m.version in done:
            name, checksum, _ = done[m.version]
            if checksum != m.checksum:
                raise MigrationError(
                    f"migration {m.label} was changed after it was applied to {store.database} "
                    f"(checksum {checksum[:12]} applied, {m.checksum[:12]} now): add a new migration instead")
            continue
        m.apply(store, values)
        store.insert(SCHEMA_MIGRATIONS, {
            "version": [m.version], "name": [m.name], "checksum": [m.checksum],
            "applied_at": [dt.datetime.now(dt.timezone.utc)],
        })
        ran.append(m)
    return ran
