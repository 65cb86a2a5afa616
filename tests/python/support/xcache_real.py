"""A real XCache for the test suite: XRootD 5.5 (Debian's xrootd-server, -server-plugins, -client,
python3-xrootd; `scripts/install-system-deps`) or XRootD 6.x (built by `scripts/build-xrootd6`,
outside the checkout) as an origin and caching proxies, on this machine.

`XCacheLab` (used by tests/python/integration/xcache/test_xcache_real.py):
- a network namespace with only `lo` (`unshare --net=FILE`, entered with `nsenter`): xrootd 5.5
  cannot listen on 127.0.0.1 alone, so nothing of it is reachable from outside;
- each cache on a tmpfs of its own: XrdPfc compares the whole filesystem's usage (statvfs) with
  its watermarks, so the filesystem must hold the cache and nothing else;
- origin data: a few small files (`make_plan`); an origin xrootd serving them and, per cache, a
  proxy (XrdPss + XrdPfc) with `pfc.diskusage LOW HIGH purgeinterval 60s`, `pfc.trace dump` (one
  log line per file a purge removes: ingest/xrdpfc_log.py reads them), prefetch off and
  `xrootd.async off` (then the g-stream's b_miss is the bytes fetched, not 64 KiB a block), and
  its UDP monitoring to a port in the namespace where the test's receiver listens;
- xrootd refuses to run as root: `-R xrootd` (the Debian package's user); it loads its plugins
  after dropping to that user, so a 6.x build (under root's home) is linked or copied into the
  lab's directory first, its `lib/` on LD_LIBRARY_PATH (`libXrdPss.so` then resolves to
  `libXrdPss-6.so`, ahead of Debian's `-5`);
- 6.x logs its purge checks from XrdPfc_ResourceMonitor (ingest/xrdpfc_resmon_log.py): the
  workload and the log filter look for those lines there;
- the client: tests/python/support/xcache_workload.py under Debian's python3, rounds of reads between the
  caches' purges (it watches their logs);
- everything stopped by PID, the tmpfs unmounted, the namespace removed (`stop`, also after a
  failure).
Times here are for a harness, never a verdict: a step that does not happen (an xrootd that does
not initialise) fails with one line naming what and where its log is.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[3]
WORKLOAD = Path(__file__).with_name("xcache_workload.py")
#: ../shared/xcache-lab/workload.py: concurrent clients, ROOT-style partial reads (its planned mode)
LAB_WORKLOAD = Path(__file__).with_name("xcache_lab_workload.py")
DEBIAN_PYTHON = "/usr/bin/python3"
XRD_USER = "xrootd"
MiB = 1 << 20
ORIGIN_PORT = 1094
PURGE_INTERVAL = 60  # XrdPfc's minimum


class LabError(Exception):
    """The lab cannot run here, or a part of it failed: one line for the test report."""


@dataclass(frozen=True)
class XRootD:
    """Which XRootD runs the lab: Debian's (on PATH) or a build (`build`: its `bin/`, `lib/`)."""

    version: str
    build: Optional[Path] = None

    @property
    def resmon(self) -> bool:
        """Purges driven by XrdPfc_ResourceMonitor (XRootD 5.7 and later)."""
        major, minor = (int(x) for x in self.version.split(".")[:2])
        return (major, minor) >= (5, 7)

    @property
    def plugin_suffix(self) -> str:
        return f"-{self.version.split('.')[0]}"

    #: log lines that mark a purge (5.5) or a purge check (≥ 5.7) begun and ended
    @property
    def purge_markers(self) -> dict[str, list[str]]:
        if self.resmon:
            return {"Started": ["perform_purge_check() Purge check:"],
                    "Finished": ["perform_purge_check() purge not required", "OldStylePurgeDriver Finished",
                                 "perform_purge_check() purge required but previous purge task"]}
        return {"Started": ["Purge() Started"], "Finished": ["Purge() Finished"]}


DEBIAN_XROOTD = XRootD("5.5.3")


def built_xrootd() -> XRootD:
    """The XRootD 6.x that scripts/build-xrootd6 builds (the version is pinned there)."""
    script = REPO / "scripts" / "build-xrootd6"
    version = subprocess.run(["bash", str(script), "--version"], capture_output=True, text=True, check=True)
    prefix = subprocess.run(["bash", str(script), "--prefix"], capture_output=True, text=True, check=True)
    return XRootD(version.stdout.strip(), Path(prefix.stdout.strip()) / "build")


@dataclass
class CacheSetup:
    """One caching proxy: its name, tmpfs size and `pfc.diskusage` watermarks (XRootD's syntax:
    `96m`, `0.9`), its port and its monitoring's UDP destinations (XRootD allows two) inside the
    namespace, and the site name it reports."""

    name: str
    fs_mib: int
    low: str
    high: str
    port: int
    udp: tuple[int, ...]
    site: str


@dataclass
class Plan:
    files: list[tuple[str, int]]  # (lfn, size)
    rounds: list[list[dict]]  # per purge interval: {"path", "size", "bytes"}

    @property
    def reads(self) -> int:
        return sum(len(r) for r in self.rounds)


def make_plan(seed: int = 27, rounds: int = 4) -> Plan:
    """The workload: two analysis campaigns alternating from one purge interval to the next, each
    reading its own 10 files with Zipf(1) popularity (30 reads a round, 30 % of them partial: the
    first 1-4 MiB, at most half the file), after 8 files read once each (the long tail). A file of
    a campaign comes back two intervals later: a cache keeps it only when its watermarks leave room
    for it, which is what tells a well-sized cache from a misconfigured one within a few purges."""
    rng = random.Random(seed)
    pool_tiers = ("NANOAODSIM", "MINIAODSIM", "AODSIM")

    def size() -> int:  # log-uniform 1-8 MiB, not a whole number of blocks
        return int(math.exp(rng.uniform(0, math.log(8))) * MiB) + rng.randrange(1, 4096)

    files: list[tuple[str, int]] = []
    campaigns = []
    for c in range(2):
        names = [(f"/store/mc/XCacheLive/TTbar_{'AB'[c]}/{pool_tiers[c]}/v1/0000/file_{i:02d}.root", size())
                 for i in range(10)]
        files += names
        campaigns.append(names)
    zipf = [1.0 / (i + 1) for i in range(10)]
    plan_rounds = []
    for k in range(rounds):
        reads = []
        for i in range(8):
            lfn, sz = f"/store/mc/XCacheLive/Tail/{pool_tiers[2]}/v1/{k:04d}/tail_{i:02d}.root", size()
            files.append((lfn, sz))
            reads.append({"path": lfn, "size": sz, "bytes": sz})
        names = campaigns[k % 2]
        for lfn, sz in rng.choices(names, weights=zipf, k=30):
            want = sz
            if rng.random() < 0.3:
                want = min(sz // 2, rng.randint(1, 4) * MiB)
            reads.append({"path": lfn, "size": sz, "bytes": want})
        plan_rounds.append(reads)
    return Plan(files, plan_rounds)


def check_machine(xrootd: XRootD = DEBIAN_XROOTD) -> None:
    """One line saying why the real XCache cannot run here (LabError), or nothing."""
    if os.geteuid() != 0:
        raise LabError("the real-XCache test needs root (a tmpfs mount and a network namespace): run the suite as root")
    for tool in ("xrootd", "xrdcp", "unshare", "nsenter", "ip", "mount", "umount"):
        if shutil.which(tool) is None:
            raise LabError(f"{tool} is missing: run scripts/install-system-deps")
    if not list(Path("/usr/lib").glob("*/libXrdPfc-5.so")):
        raise LabError("XrdPfc (libXrdPfc-5.so) is missing: run scripts/install-system-deps (xrootd-server-plugins)")
    if xrootd.build is not None:
        need = [xrootd.build / "bin" / "xrootd", *(xrootd.build / "lib" / f"libXrd{p}{xrootd.plugin_suffix}.so"
                                                   for p in ("Pss", "Pfc"))]
        missing = [str(n) for n in need if not n.exists()]
        if missing or not (xrootd.build / ".complete").exists():
            raise LabError(f"XRootD {xrootd.version} is not built ({missing[0] if missing else 'unfinished build'}): "
                           "run scripts/build-xrootd6")
    p = subprocess.run([DEBIAN_PYTHON, "-c", "import XRootD.client"], capture_output=True)
    if p.returncode != 0:
        raise LabError(f"{DEBIAN_PYTHON} cannot import XRootD: run scripts/install-system-deps (python3-xrootd)")
    p = subprocess.run(["id", "-u", XRD_USER], capture_output=True)
    if p.returncode != 0:
        raise LabError(f"no user {XRD_USER!r} (created by Debian's xrootd-server): run scripts/install-system-deps")


def _child_setup() -> None:
    # a child we signal must not inherit an ignored SIGINT (a suite run in the background)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


ORIGIN_CFG = """\
# the origin: a plain xrootd data server exporting /store from a local directory
all.export /store
xrd.port {port}
oss.localroot {root}/origin
all.adminpath {root}/admin/origin
all.pidpath {root}/admin/origin
xrd.trace off
"""

CACHE_CFG = """\
# an XCache: xrootd as a caching proxy (XrdPss with the XrdPfc file cache under it)
all.export /store
all.sitename {site}
xrd.port {port}
all.adminpath {root}/admin/{name}
all.pidpath {root}/admin/{name}
ofs.osslib libXrdPss.so
pss.cachelib libXrdPfc.so
pss.origin 127.0.0.1:{origin_port}
oss.localroot {root}/{name}
pfc.blocksize 1m
pfc.prefetch 0
pfc.ram 1g
pfc.diskusage {low} {high} purgeinterval {interval}s
pfc.trace dump
# synchronous reads: b_hit/b_miss then count what was on disk and what was fetched
xrootd.async off
xrootd.monitor all flush 5s fstat 10s lfn ops ssq xfr 3 ident 60s window 10s {dests}
xrootd.mongstream pfc use flush 5s
"""


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen
    log: Path
    pump: Optional[threading.Thread] = None


@dataclass
class XCacheLab:
    caches: list[CacheSetup]
    plan: Plan
    xrootd: XRootD = DEBIAN_XROOTD
    #: `pfc.diskusage … purgeinterval` (6.x checks every 60 s whatever it says)
    purge_interval: int = PURGE_INTERVAL
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cachescope-xcache-")))
    procs: dict[str, _Proc] = field(default_factory=dict)
    mounted: list[Path] = field(default_factory=list)
    netns: Optional[Path] = None
    started_at: float = 0.0
    #: a `tc` rate (`100mbit`) for what the origin sends, on the namespace's `lo`: a WAN stand-in
    origin_link_rate: Optional[str] = None
    #: also keep each cache's whole log, pfc.trace's per-block dump lines included (logs/NAME.full.log)
    full_log: bool = False

    # -- set-up --------------------------------------------------------------------------------

    def start(self) -> None:
        """Namespace, filesystems, data, configurations, origin and caches (receivers first:
        `spawn` them between `prepare` and `start_servers`)."""
        self.prepare()
        self.start_servers()

    def prepare(self) -> None:
        check_machine(self.xrootd)
        self.started_at = time.time()
        self.root.chmod(0o755)  # xrootd runs as XRD_USER: it must reach its files here
        for d in ("origin", "conf", "logs", "admin/origin", *(f"admin/{c.name}" for c in self.caches)):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        self._netns()
        for c in self.caches:
            self._tmpfs(self.root / c.name, c.fs_mib)
        self._origin_data()
        self._install_build()
        (self.root / "conf/origin.cfg").write_text(ORIGIN_CFG.format(port=ORIGIN_PORT, root=self.root))
        for c in self.caches:
            self.config_path(c.name).write_text(CACHE_CFG.format(
                site=c.site, port=c.port, root=self.root, name=c.name, origin_port=ORIGIN_PORT, low=c.low,
                high=c.high, interval=self.purge_interval,
                dests=" ".join(f"dest files io info user fstat pfc 127.0.0.1:{u}" for u in c.udp)))
        subprocess.run(["chown", "-R", f"{XRD_USER}:", str(self.root / "admin"), str(self.root / "logs"),
                        *(str(self.root / c.name) for c in self.caches)], check=True)

    def start_servers(self) -> None:
        self._xrootd("origin", self.root / "conf/origin.cfg")
        for c in self.caches:
            self._xrootd(c.name, self.config_path(c.name))
        for name in ("origin", *(c.name for c in self.caches)):
            self._wait_log(name, "initialization completed")

    def config_path(self, name: str) -> Path:
        return self.root / "conf" / f"{name}.cfg"

    def log_path(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def _netns(self) -> None:
        ns = self.root / "netns"
        ns.touch()
        p = subprocess.run(["unshare", f"--net={ns}", "true"], capture_output=True, text=True)
        if p.returncode != 0:
            raise LabError(f"cannot create a network namespace (unshare --net): {p.stderr.strip()}")
        self.netns = ns
        subprocess.run(self.inns(["ip", "link", "set", "lo", "up"]), check=True)
        if self.origin_link_rate:
            self._origin_link(self.origin_link_rate)

    def _origin_link(self, rate: str) -> None:
        """What the origin sends (TCP source port ORIGIN_PORT) through one htb class of `rate`;
        everything else on `lo` unlimited (../shared/xcache-lab/lab.sh's setup_link)."""
        if shutil.which("tc") is None:
            raise LabError("tc is missing (iproute2): run scripts/install-system-deps")
        for argv in (["qdisc", "replace", "dev", "lo", "root", "handle", "1:", "htb", "default", "10"],
                     ["class", "replace", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", "100gbit"],
                     ["class", "replace", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate", rate,
                      "burst", "1mb", "cburst", "1mb"],
                     ["filter", "replace", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match",
                      "ip", "sport", str(ORIGIN_PORT), "0xffff", "flowid", "1:20"]):
            p = subprocess.run(self.inns(["tc", *argv]), capture_output=True, text=True)
            if p.returncode != 0:
                raise LabError(f"cannot limit the origin link to {rate} (tc {' '.join(argv[:2])}): {p.stderr.strip()}")

    def _tmpfs(self, path: Path, mib: int) -> None:
        path.mkdir(exist_ok=True)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m,mode=0755", "cachescope-xcache", str(path)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise LabError(f"cannot mount a tmpfs for the cache at {path} (XrdPfc measures its whole filesystem): "
                           f"{p.stderr.strip()}")
        self.mounted.append(path)

    def _origin_data(self) -> None:
        pool = os.urandom(8 * MiB)  # each file: a unique 4 KiB head, then a slice of one random pool
        for lfn, size in self.plan.files:
            p = self.root / "origin" / lfn.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "wb") as f:
                f.write(os.urandom(4096))
                f.write(pool[: size - 4096])
        for d, _, files in os.walk(self.root / "origin"):
            os.chmod(d, 0o755)

    def _install_build(self) -> None:
        """The 6.x build where XRD_USER can load it (hard links when on one filesystem)."""
        if self.xrootd.build is None:
            return
        dest = self.root / "xrootd"
        for sub in ("bin", "lib"):
            src = self.xrootd.build / sub
            p = subprocess.run(["cp", "-al", str(src), str(dest / sub)], capture_output=True)
            if p.returncode != 0:
                shutil.rmtree(dest / sub, ignore_errors=True)
                shutil.copytree(src, dest / sub, symlinks=True)
        for d, _, _ in os.walk(dest):
            os.chmod(d, 0o755)

    def xrootd_argv(self, name: str, cfg: Path) -> list[str]:
        if self.xrootd.build is None:
            return ["xrootd", "-R", XRD_USER, "-n", name, "-c", str(cfg)]
        base = self.root / "xrootd"
        return ["env", f"LD_LIBRARY_PATH={base / 'lib'}", str(base / "bin" / "xrootd"), "-R", XRD_USER, "-n", name,
                "-c", str(cfg)]

    def inns(self, argv: list[str]) -> list[str]:
        """argv run inside the lab's network namespace."""
        assert self.netns is not None
        return ["nsenter", f"--net={self.netns}", *argv]

    # -- processes -----------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str], env: Optional[dict] = None) -> subprocess.Popen:
        """A process inside the namespace (a receiver: `cachescope collect`, `serve --collect`),
        stdout and stderr to logs/NAME.log; stopped by `stop` (SIGTERM) unless stopped before."""
        log = self.root / "logs" / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(self.inns(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                                     preexec_fn=_child_setup, start_new_session=True)
        self.procs[name] = _Proc(name, popen, log)
        return popen

    def _xrootd(self, name: str, cfg: Path) -> None:
        # xrootd logs to stderr; XrdPfc's dump level adds ~1300 lines a read: keep all but those,
        # and keep Purge()'s (one per removed file)
        log = self.log_path(name)
        out = open(self.root / "logs" / f"{name}.out", "wb")  # noqa: SIM115 - closed with the process
        popen = subprocess.Popen(self.inns(self.xrootd_argv(name, cfg)),
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, cwd=self.root / "admin",
                                 preexec_fn=_child_setup, start_new_session=True)
        out.close()
        full = self.root / "logs" / f"{name}.full.log" if self.full_log and name != "origin" else None
        pump = threading.Thread(target=_filter_log, args=(popen.stderr, log, full), name=f"log-{name}", daemon=True)
        pump.start()
        self.procs[name] = _Proc(name, popen, log, pump)

    def _wait_log(self, name: str, text: str, guard_s: float = 60.0) -> None:
        proc = self.procs[name]
        t0 = time.monotonic()
        while True:
            if proc.log.exists() and text in proc.log.read_text(errors="replace"):
                return
            if proc.popen.poll() is not None:
                raise LabError(f"{name} exited ({proc.popen.returncode}) before '{text}': see {proc.log}")
            if time.monotonic() - t0 > guard_s:
                raise LabError(f"{name}: no '{text}' in {proc.log} after {guard_s:.0f} s")
            time.sleep(0.1)

    def stop_process(self, name: str) -> Optional[int]:
        """SIGTERM, then SIGKILL if it does not go; its exit code (None if it was not running)."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return None
        if proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGTERM)
            try:
                proc.popen.wait(20)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
        if proc.pump is not None:
            proc.pump.join()
        return proc.popen.returncode

    def stop(self) -> None:
        """Everything, by PID; then unmount and remove the namespace. Safe to call twice."""
        for name in [n for n in self.procs if n not in ("origin", *(c.name for c in self.caches))]:
            self.stop_process(name)  # receivers first: they write what they hold
        for name in list(self.procs):
            self.stop_process(name)
        for path in self.mounted[:]:
            subprocess.run(["umount", str(path)], check=False)
            self.mounted.remove(path)
        if self.netns is not None:
            subprocess.run(["umount", str(self.netns)], check=False, capture_output=True)
            self.netns = None

    def remove(self) -> None:
        """Delete the lab's directory (after `stop`)."""
        assert not self.mounted and self.netns is None
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the workload --------------------------------------------------------------------------

    def run_workload(self, round_seconds: float = 52.0, settle_seconds: float = 3.0,
                     hold_seconds: float = 0.3) -> list[dict]:
        """The plan's reads through every cache (tests/python/support/xcache_workload.py under Debian's
        python3, in the namespace); one dict per read and cache."""
        plan_path, out_path = self.root / "plan.json", self.root / "reads.jsonl"
        plan_path.write_text(json.dumps({
            "caches": [{"name": c.name, "url": f"root://127.0.0.1:{c.port}/", "log": str(self.log_path(c.name)),
                        "markers": self.xrootd.purge_markers} for c in self.caches],
            "rounds": self.plan.rounds, "round_seconds": round_seconds, "settle_seconds": settle_seconds,
            "hold_seconds": hold_seconds}))
        log = self.root / "logs" / "workload.log"
        with open(log, "wb") as out:
            p = subprocess.run(self.inns([DEBIAN_PYTHON, str(WORKLOAD), str(plan_path), str(out_path)]),
                               stdout=out, stderr=out, preexec_fn=_child_setup)
        reads = [json.loads(line) for line in out_path.read_text().splitlines()] if out_path.exists() else []
        if p.returncode != 0:
            bad = [r for r in reads if r["status"] != "ok"]
            raise LabError(f"the workload failed (exit {p.returncode}, {len(bad)} failed reads"
                           f"{': ' + bad[0]['status'] if bad else ''}): see {log}")
        return reads

    def run_clients(self, cache: CacheSetup, n: int, args: list[str],
                    files: Optional[list[tuple[str, int]]] = None) -> list[dict]:
        """`n` reads of the plan's files through `cache` by the lab's workload in its planned mode
        (`--clients N` processes at once, `args` as tests/python/support/xcache_lab_workload.py takes
        them), over `files` (default: all the plan's); one dict per read, by start time: ts_start, ts_end, path, size, method, offsets,
        bytes_read, status, client."""
        import csv

        listing, trace = self.root / "files.txt", self.root / "workload.csv"
        listing.write_text("".join(f"{size} {lfn}\n" for lfn, size in (self.plan.files if files is None else files)))
        log = self.root / "logs" / "workload.log"
        with open(log, "wb") as out:
            p = subprocess.run(self.inns([DEBIAN_PYTHON, str(LAB_WORKLOAD), str(n), "--server",
                                          f"127.0.0.1:{cache.port}", "--files", str(listing), "--trace", str(trace),
                                          *args]), stdout=out, stderr=out, preexec_fn=_child_setup)
        rows = list(csv.DictReader(open(trace, newline=""))) if trace.exists() else []
        if p.returncode != 0 or len(rows) != n:
            bad = [r for r in rows if r["status"] != "ok"]
            raise LabError(f"the workload failed (exit {p.returncode}, {len(rows)} of {n} reads, {len(bad)} failed"
                           f"{': ' + bad[0]['status'] if bad else ''}): see {log}")
        for r in rows:
            r.update(ts_start=float(r["ts_start"]), ts_end=float(r["ts_end"]), size=int(r["size"]),
                     bytes_read=int(r["bytes_read"]))
        return rows

    def purges(self, name: str):
        from ingest.xrdpfc_log import parse_purges

        with open(self.log_path(name), errors="replace") as f:
            return parse_purges(f)


def _filter_log(stream, path: Path, full: Optional[Path] = None) -> None:
    with open(path, "ab", buffering=0) as out, open(full or os.devnull, "ab") as whole:
        for line in iter(stream.readline, b""):
            if full is not None:
                whole.write(line)
            # a purge's dump lines: 5.5's `Purge() Removed file`, 6.x's `UnlinkPurgeStateFilesInMap …`
            if b" dump " in line and b"Purge()" not in line and b"UnlinkPurgeStateFilesInMap" not in line:
                continue
            out.write(line)
    stream.close()


if __name__ == "__main__":  # a manual run: python tests/python/support/xcache_real.py [ROUNDS [ROUND_S [6]]] (as root)
    caches = [CacheSetup("ok", 256, "80m", "100m", 1095, (9931,), "XCacheOK"),
              CacheSetup("small", 256, "8m", "16m", 1096, (9932,), "XCacheSmall")]
    n_rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    six = len(sys.argv) > 3 and sys.argv[3] == "6"
    lab = XCacheLab(caches, make_plan(rounds=n_rounds), xrootd=built_xrootd() if six else DEBIAN_XROOTD,
                    purge_interval=300 if six else PURGE_INTERVAL)
    try:
        lab.prepare()
        for c in caches:  # a raw listener per cache, to see the datagrams arrive
            lab.spawn(f"udp-{c.name}", [sys.executable, "-c", "import socket,sys\ns=socket.socket(2,2);"
                                        f"s.bind(('127.0.0.1',{c.udp[0]}))\nn=0\nwhile True:\n s.recv(65536);n+=1;"
                                        "print(n,flush=True)"])
        lab.start_servers()
        print("started", lab.root, flush=True)
        reads = lab.run_workload(round_seconds=float(sys.argv[2]) if len(sys.argv) > 2 else 52.0)
        print(len(reads), "reads", flush=True)
        time.sleep(12)
        for c in caches:
            for p in lab.purges(c.name):
                print(c.name, p.start, p.used_disk, p.removed, p.removed_bytes, p.protected, p.left_to_remove)
    finally:
        lab.stop()
        print("stopped; kept", lab.root)
