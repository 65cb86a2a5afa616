"""Shared against one cache per server on the default configuration (pipeline.server_caches): the
site group runs its caches again per server, so the Cache servers dashboard has its comparison
after one embedded replay, with nothing configured; the per-server caches travel with the group's
state (Flink's checkpoints) and stay off where the groups are servers already."""

from __future__ import annotations

import datetime as dt
import pickle

import numpy as np
import pytest

from cachescope.config import load_config
from cachescope.core.columns import EventColumns
from cachescope.core.group_state import GroupState
from ingest.generate import make_workload, write
from runners.embedded import replay
from test_dashboards import INTERVAL_S, _dashboards, _numeric, _variables, expand

DAY = (dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc))


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    from cachescope.store import EmbeddedStore

    tmp = tmp_path_factory.mktemp("servers")
    w = make_workload(20_000, days=1, sites=1, servers=4, seed=7)
    files = write("xrootd-gstream", w, tmp / "logs", single_file=False)
    config = load_config()
    assert config.cache_groups.mode == "site" and config.pipeline.server_caches.enabled  # the defaults
    store = EmbeddedStore(tmp / "store", database="servers")
    summary = replay(files, "xrootd-gstream", config=config, store=store)
    yield w, store, summary
    store.close()


def test_the_cache_servers_dashboard_has_rows_on_the_default_configuration(filled):
    w, store, _ = filled
    variables = _variables(store)
    board = _dashboards()["cache-servers.json"]
    ran = 0
    for panel in board["panels"]:
        for t in panel.get("targets", []):
            df = store.query_frame(expand(t["rawSql"], variables, *DAY, INTERVAL_S), {})
            assert len(df) > 0, panel["title"]
            assert _numeric(df) and df[_numeric(df)].notna().all().all(), panel["title"]
            ran += 1
    assert ran == 3
    # the default sizes over 4 servers: 20TB against 4 x 5TB, 200TB against 4 x 50TB
    split = store.query_frame(expand(board["panels"][0]["targets"][0]["rawSql"], variables, *DAY, INTERVAL_S), {})
    assert set(split.total_size_bytes) == {20 * 10**12, 200 * 10**12} and set(split.servers) == {4}
    assert set(split.policy) == {"lru"}  # the group's first policy (the default's lru, arc, s3fifo)


def test_per_server_caches_see_their_servers_reads_and_add_counters_only(filled):
    w, store, summary = filled
    site = w.sites[0]
    # the replay's summary, the raw events, the real cache's rows, the curve and alerts are the group's
    assert set(summary.efficiency.cache_group) == {site}
    for table in ("access_events", "observed", "mrc", "alerts"):
        groups = set(store.query_frame(f"SELECT DISTINCT cache_group FROM {table}").cache_group)
        assert groups <= {site}, table
    groups = set(store.query_frame("SELECT DISTINCT cache_group FROM efficiency").cache_group)
    per_server = {g for g in groups if g.startswith(site + "/")}
    servers = set(store.query_frame("SELECT DISTINCT server FROM access_events WHERE op = 'read'").server)
    assert per_server == {f"{site}/{s}" for s in servers} and len(servers) == 4
    # every read of the site counted once by the per-server caches together, each by its own
    q = ("SELECT cache_group, sum(requests) AS r FROM efficiency FINAL WHERE policy = 'lru' "
         "AND size_bytes = 10000000000000 AND tier != '' GROUP BY cache_group")
    reads_of = dict(store.query_frame(q).itertuples(index=False))
    per = store.query_frame("SELECT server, count() AS n FROM access_events WHERE op = 'read' GROUP BY server")
    assert {f"{site}/{s}": n for s, n in per.itertuples(index=False)} == {g: reads_of[g] for g in per_server}
    assert sum(reads_of[g] for g in per_server) == reads_of[site] > 0
    # hour windows, so a per-server group adds few rows; window completeness reads each group's own
    lengths = store.query_frame("SELECT cache_group LIKE '%/%' AS per_server, "
                                "uniqExact(dateDiff('second', window_start, window_end)) AS k, "
                                "any(dateDiff('second', window_start, window_end)) AS s FROM efficiency "
                                "GROUP BY per_server ORDER BY per_server")
    assert lengths.s.tolist() == [60, 3600] and lengths.k.tolist() == [1, 1]


def _batch(n: int, servers: list[str]) -> EventColumns:
    rng = np.random.default_rng(1)
    return EventColumns.from_events([{
        "ts": 1_704_067_200_000_000 + i * 1_000_000, "site": "S", "source": "csv", "server": servers[i % len(servers)],
        "client": "", "vo": "atlas", "path": f"/f{k}", "file_id": int(k) + 1, "file_size": 10**9, "bytes_read": 10**9,
        "op": "read", "tier": "AOD", "cache_group": "S", "origin": "o", "seq": i} for i, k in
        enumerate(rng.integers(0, 300, n).tolist())])


def test_per_server_caches_are_in_the_group_state_and_survive_a_restore():
    config = load_config().pipeline
    a = GroupState.new("S", config)
    a.process(_batch(3000, ["s1", "s2"]))
    assert set(a.servers) == {"s1", "s2"} and a.servers["s1"].processor.cache_group == "S/s1"
    b = pickle.loads(pickle.dumps(a))  # Flink's keyed state
    assert set(b.servers) == {"s1", "s2"}
    more = _batch(2000, ["s1", "s2", "s3"])
    for st in (a, b):
        st.process(more)
        st.finish()
    assert set(b.servers) == {"s1", "s2", "s3"}
    for s in a.servers:
        x, y = a.servers[s].processor.emitted_totals, b.servers[s].processor.emitted_totals
        assert np.array_equal(x, y) and x.sum() > 0, s


@pytest.mark.parametrize("mode, on", [("site", True), ("server", False), ("region", False)])
def test_per_server_caches_run_in_site_mode_only(mode, on, tmp_path):
    (tmp_path / "c.yaml").write_text(f"cache_groups: {{mode: {mode}}}\n")
    config = load_config(tmp_path / "c.yaml").pipeline
    assert config.server_caches.enabled is on
    st = GroupState.new("S", config)
    st.process(_batch(100, ["s1"]))
    assert bool(st.servers) is on


def test_per_server_policies_and_sizes_are_checked_at_start(tmp_path):
    from cachescope.errors import UsageError

    default = load_config().pipeline
    assert [s.policy for s in default.per_server().shadow.specs()] == ["lru"] * len(default.shadow.sizes)
    (tmp_path / "c.yaml").write_text("pipeline: {server_caches: {policies: [lru], sizes: [1TB, 5TB]}}\n")
    per = load_config(tmp_path / "c.yaml").pipeline.per_server()
    assert [(s.policy, s.capacity) for s in per.shadow.specs()] == [("lru", 10**12), ("lru", 5 * 10**12)]
    assert per.windows.efficiency == "1h" and not per.curve.enabled and not per.alert_rules
    (tmp_path / "bad.yaml").write_text("pipeline: {server_caches: {policies: [nope]}}\n")
    with pytest.raises(UsageError, match="server_caches"):
        load_config(tmp_path / "bad.yaml")


def test_one_insert_holds_the_groups_minutes_and_its_servers_hours():
    # the writer merges whatever waits: a group's minute rows and its per-server caches' hour rows
    from cachescope.core.efficiency_rows import EfficiencyRows
    from cachescope.store import tables

    st = GroupState.new("S", load_config().pipeline)
    st.process(_batch(5000, ["s1", "s2"]))
    st.finish()
    parts = [r for own in (st, *st.servers.values()) for r in own.outbox.pending[tables.EFFICIENCY]]
    rows = EfficiencyRows.merged(parts)
    span = (rows["window_end"] - rows["window_start"]).astype("timedelta64[s]").astype(np.int64)
    groups = np.asarray(rows["cache_group"]).astype(str)
    assert set(span[groups == "S"]) == {60} and set(span[groups != "S"]) == {3600}
    assert set(groups) == {"S", "S/s1", "S/s2"}


def test_the_reports_tiers_count_each_read_once_beside_the_per_server_caches(filled):
    """The report sums its reference cache over the cache groups: the site group's per-server
    groups (SITE/SERVER, same policies and sizes) see the same reads again and stay out of it."""
    from cachescope import reads
    from cachescope.report import _reference_cache, tiers_section

    w, store, summary = filled
    policy, size = _reference_cache(store, *DAY)
    totals = reads.efficiency_totals(store, *DAY, policies=[policy], sizes=[size])
    site_reads = int(totals[totals.cache_group == w.sites[0]]["requests"].sum())
    assert site_reads > 0
    section = tiers_section(store, *DAY)
    assert int(section.table["reads"].sum()) == site_reads
