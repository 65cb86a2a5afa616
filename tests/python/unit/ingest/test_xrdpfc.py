"""XrdPfc's files for the xcache model: parameters as sites write them, the cache's configuration
file, `xrdpfc_print -j` output as a warm start, and the simulate/pipeline options that use them."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cachescope.events import file_id_of
from cachescope.simulation import CacheSpec, ShadowBank, load_trace, simulate
from cachescope.xrdpfc import XrdPfcError, cinfo_lfn, param_value, params_for, read_config, read_seed

CLI = [str(Path(sys.executable).parent / "cachescope")]
LAB = "xcache-lab/captures"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True)


def test_param_values_take_fractions_sizes_and_durations():
    assert param_value("high_watermark", "0.95") == 0.95
    assert param_value("low_watermark", "300MB") == 300e6
    assert param_value("low_watermark", "1.5GiB") == 1.5 * 2**30
    assert param_value("baseline_used", "2GB") == 2e9
    assert param_value("block_size", "1MiB") == 2**20
    assert param_value("purge_interval", "60s") == 60
    assert param_value("purge_interval", "5m") == 300
    assert param_value("purge_cold_age", "7d") == 7 * 86400
    assert param_value("purge_cold_age", 3600) == 3600
    assert param_value("purge_cold_period", "10") == 10
    assert param_value("prefetch", "0") == 0
    assert param_value("small_ratio", "0.1") == 0.1  # another policy's: a plain number
    for name, bad in [("high_watermark", "lots"), ("purge_interval", "soon"), ("purge_cold_period", "1.5"),
                      ("block_size", "-1"), ("small_ratio", "10MB")]:
        with pytest.raises(XrdPfcError, match=name):
            param_value(name, bad)
    assert params_for("xcache", {"high_watermark": "200MB"}) == {"high_watermark": 200e6}
    with pytest.raises(XrdPfcError, match="policy lru"):
        params_for("lru", {"x": "1MB"})


def test_the_lab_configuration_file(shared_dir):
    params = read_config(shared_dir / LAB / "run1-default/cache.cfg")
    # pfc.blocksize 1m; pfc.diskusage 150m 200m purgeinterval 60s (XRootD's sizes are binary);
    # pfc.prefetch 10
    assert params == {"block_size": 2**20, "low_watermark": 150 * 2**20, "high_watermark": 200 * 2**20,
                      "purge_interval": 60, "prefetch": 10}


def test_configuration_syntax(tmp_path):
    cfg = tmp_path / "xcache.cfg"
    cfg.write_text(
        "# a site's file\n"
        "set cachesize = 0.95\n"
        "all.export /store\n"
        "if exec xrootd\n"
        "  pfc.blocksize 512k   # comment\n"
        "  pfc.diskusage 0.90 ${cachesize} files 0.5 0.6 0.7 \\\n"
        "      purgeinterval 5m purgecoldfiles 7d 3\n"
        "else\n"
        "  pfc.blocksize 4m\n"
        "fi\n"
        "if named other\n  pfc.diskusage 0.1 0.2\nfi\n"
        "pfc.prefetch 10\npfc.ram 8g\npfc.trace info\n"
        "xrd.port $(undefined_but_not_pfc)\n")
    assert read_config(cfg) == {
        "block_size": 512 * 1024, "low_watermark": 0.90, "high_watermark": 0.95, "files_baseline": 0.5,
        "files_nominal": 0.6, "files_max": 0.7, "purge_interval": 300, "purge_cold_age": 7 * 86400,
        "purge_cold_period": 3, "prefetch": 10}
    for text, message in [
        ("pfc.diskusage 0.9 2000000000\n", "plain number is a fraction"),
        ("pfc.diskusage 0.9 0.95 purgeinterval 30s\n", "60 s to 1 h"),
        ("pfc.diskusage 0.9 0.95 whatever\n", "'whatever'"),
        ("pfc.diskusage 0.9 $high\n", r"\$high is not set"),
        ("if vm.example.org\npfc.blocksize 1m\nfi\n", "not supported"),
        ("if exec xrootd\npfc.blocksize 1m\n", "no fi"),
        ("pfc.newthing 1\n", "pfc.newthing"),
        ("pfc.prefetch many\n", "pfc.prefetch"),
    ]:
        cfg.write_text(text)
        with pytest.raises(XrdPfcError, match=message) as e:
            read_config(cfg)
        assert str(e.value).startswith(str(cfg))
    with pytest.raises(XrdPfcError, match="cannot read"):
        read_config(tmp_path / "missing.cfg")
    # no pfc.prefetch: XrdPfc's default, 10 blocks; pfc.prefetch 0 turns it off
    cfg.write_text("pfc.diskusage 0.9 0.95\n")
    assert read_config(cfg)["prefetch"] == 10
    cfg.write_text("pfc.prefetch 0\n")
    assert read_config(cfg) == {"prefetch": 0}


def test_seed_from_xrdpfc_print(shared_dir, tmp_path):
    path = shared_dir / LAB / "run1-default/cinfo-print.json"
    files = read_seed(path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(files) == len(records) == 50
    first = records[0]  # lab_0003.root: complete, 3 blocks of 1 MiB, 2653969 bytes
    lfn = cinfo_lfn(first["file"])
    assert lfn == "/store/mc/LabXCache/TTbar/AODSIM/v1/0000/lab_0003.root"
    fid, cached, last = files[0]
    assert (fid, cached) == (file_id_of(lfn), 2653969)
    assert last == 1795770038  # 261127:090038 (the last detach), UTC
    # a partly downloaded file: the block map when printed, else state_percentage
    partial = {**first, "state_complete": "incomplete", "state_percentage": 100 / 3}
    mapped = {**first, "block_array": "x.x"}
    (tmp_path / "p.json").write_text(json.dumps([partial, mapped, {**first, "state_percentage": 0.0}]))
    got = read_seed(tmp_path / "p.json")
    assert [c for _, c, _ in got] == [2**20, 2653969 - 2**20]
    (tmp_path / "bad.json").write_text('{"file": "x.cinfo"}\n')
    with pytest.raises(XrdPfcError, match="bad.json:1"):
        read_seed(tmp_path / "bad.json")


def test_seeded_bank_starts_warm():
    spec = CacheSpec("xcache", 10_000, {"block_size": 1.0})
    cold, warm = ShadowBank([spec], 1), ShadowBank([spec], 1)
    warm.seed(0, [(7, 100, 1_000), (8, 100, 1_001)])
    cols = (np.array([7, 8, 9], np.uint64), np.full(3, 100, np.uint64), np.full(3, 100, np.uint64),
            np.zeros(3, np.uint8), np.zeros(3, np.uint8))
    for bank in (cold, warm):
        bank.feed_totals(*cols, clock=np.array([2_000, 2_001, 2_002]))
    assert cold.totals()[0, 0, 1] == 0 and warm.totals()[0, 0, 1] == 2
    with pytest.raises(ValueError, match="only before its first request"):
        warm.seed(0, [(1, 1, 1)])
    with pytest.raises(ValueError, match="only xcache"):
        ShadowBank([CacheSpec("lru", 100)], 1).seed(0, [(1, 1, 1)])


def test_purges_run_in_the_traces_time(tmp_path):
    # a 60-byte file a second (each file again every 97 s) in a 200-byte cache (hwm 190, lwm
    # 180), purges every 60 s of the timestamp column, at the first read's time and after
    rows = "".join(f"{t},{t % 97},60\n" for t in range(1, 200))
    (tmp_path / "t.csv").write_text("timestamp,obj_id,obj_size\n" + rows)
    spec = CacheSpec("xcache", 200, {"block_size": 1.0, "purge_interval": 60.0})
    trace = load_trace(tmp_path / "t.csv")
    bank = ShadowBank([spec], 1)
    bank.feed_totals(trace.file_id, trace.file_size, trace.bytes_read, trace.tier, np.zeros(len(trace), np.uint8),
                     clock=trace.timestamp)
    times = [r["time"] for r in bank.purge_log(0)[0]]
    assert times == [1, 61, 121, 181]
    # the whole-trace run and the streamed one give the xcache its clock the same way
    whole = simulate(trace, [spec])
    out = cli("simulate", str(tmp_path / "t.csv"), "--policy", "xcache", "--size", "200",
              "--param", "block_size=1", "--param", "purge_interval=1m", "--json")
    assert out.returncode == 0, out.stderr.decode()
    row = json.loads(out.stdout)
    assert (row["hits"], row["evictions"]) == (int(whole[0, 0, 1]), int(whole[0, 0, 5]))
    assert row["evictions"] > 0


def test_simulate_xcache_options(shared_dir, tmp_path):
    run = shared_dir / LAB / "run1-default"
    trace = str(run / "workload.sim.csv.gz")
    base = ["simulate", trace, "--policy", "xcache", "--size", "3072MiB", "--json"]
    configured = cli(*base, "--xcache-config", str(run / "cache.cfg"))
    assert configured.returncode == 0, configured.stderr.decode()
    by_param = cli(*base, "--param", "block_size=1MiB", "--param", "low_watermark=150MiB",
                   "--param", "high_watermark=200MiB", "--param", "purge_interval=60s", "--param", "prefetch=10")
    assert json.loads(configured.stdout) == json.loads(by_param.stdout)
    seeded = cli(*base, "--xcache-config", str(run / "cache.cfg"), "--xcache-seed", str(run / "cinfo-print.json"))
    assert seeded.returncode == 0, seeded.stderr.decode()
    assert json.loads(seeded.stdout)["hits"] >= json.loads(configured.stdout)["hits"]
    for args, code, message in [
        (["--param", "high_watermark=lots"], 2, "--param parameter high_watermark='lots'"),
        (["--xcache-config", str(tmp_path / "none.cfg")], 1, "cannot read"),
        (["--param", "low_watermark=0.99"], 2, "low_watermark"),
    ]:
        out = cli(*base, *args)
        err = out.stderr.decode()
        assert out.returncode == code and message in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1, err
    out = cli("simulate", trace, "--policy", "lru", "--size", "1GB", "--xcache-config", str(run / "cache.cfg"))
    assert out.returncode == 2 and b"add --policy xcache" in out.stderr


def test_pipeline_shadow_caches_take_xcache_config_and_units(shared_dir):
    from cachescope.config.pipeline import ShadowCaches

    cfg = shared_dir / LAB / "run1-default/cache.cfg"
    shadow = ShadowCaches(policies=["lru", "xcache"], sizes=["3GiB"], xcache_config=str(cfg),
                          params={"xcache": {"purge_interval": "2m", "baseline_used": "10MB"}})
    xc = [s for s in shadow.specs() if s.policy == "xcache"][0]
    assert xc.params == {"block_size": 2**20, "low_watermark": 150 * 2**20, "high_watermark": 200 * 2**20,
                         "purge_interval": 120, "baseline_used": 10e6, "prefetch": 10}
    with pytest.raises(ValueError, match="high_watermark"):
        ShadowCaches(policies=["xcache"], sizes=["1GB"], params={"xcache": {"high_watermark": "lots"}})
    with pytest.raises(ValueError, match="not in policies"):
        ShadowCaches(policies=["lru"], sizes=["1GB"], xcache_config=str(cfg))


def test_xrootd_version_param_and_config(tmp_path):
    """`xrootd_version` as sites name it (the engine takes major + minor / 100), and from a
    configuration that loads a `-6` plugin; a `-5` or plain name says nothing."""
    assert param_value("xrootd_version", "6.2.1") == pytest.approx(6.02)
    assert param_value("xrootd_version", "v5.5.3") == pytest.approx(5.05)
    assert param_value("xrootd_version", "5.10") == pytest.approx(5.10)
    assert param_value("xrootd_version", 6) == 6
    for bad in ("six", "", "3.1", "6.2.x1", True):
        with pytest.raises(XrdPfcError, match="xrootd_version"):
            param_value("xrootd_version", bad)
    cfg = tmp_path / "xcache.cfg"
    for line, version in [("ofs.osslib libXrdPss-6.so\npss.cachelib libXrdPfc-6.so\n", 6.0),
                          ("ofs.osslib /usr/lib64/libXrdPss-6.so\n", 6.0),
                          ("ofs.osslib libXrdPss.so\npss.cachelib libXrdPfc.so\n", None),
                          ("ofs.osslib libXrdPss-5.so\n", None)]:
        cfg.write_text(line + "pfc.diskusage 0.9 0.95\n")
        assert read_config(cfg).get("xrootd_version") == version, line


def test_xcache_on_6x_purges_every_minute_whatever_purgeinterval_says():
    """The engine: `purgeinterval 300` on 6.x still checks every 60 s of event time (5.5: every 300)."""
    n = 30
    ids = np.arange(1, n + 1, dtype=np.uint64)
    sizes = np.full(n, 10 << 20, np.uint64)
    ts = (1_000_000 + np.arange(n) * 20) * 1_000_000  # a read every 20 s, 600 s in all
    counts = {}
    for version in ("5.5.3", "6.2.1"):
        params = {"purge_interval": 300.0, "xrootd_version": param_value("xrootd_version", version)}
        bank = ShadowBank([CacheSpec("xcache", 100 << 20, params)], 2)
        zeros = np.zeros(n, np.uint8)
        bank.feed(ids, sizes, sizes, zeros, zeros, ts=ts.astype(np.int64))
        (log,) = bank.purge_log(0)
        counts[version] = [m["time"] - 1_000_000 for m in log]
    assert counts["5.5.3"] == [0, 300]
    assert counts["6.2.1"] == list(range(0, 600, 60))
