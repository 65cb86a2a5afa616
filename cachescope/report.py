"""`cachescope report`: PNG plots and one self-contained HTML page of a period, from the store.

Sections, each a plot with its numbers in a table beside it: miss-ratio curves per policy with
Belady as the bound (the exact LRU curve the pipeline keeps, the live policies at their sizes,
and Belady replayed here over the stored accesses at those sizes), efficiency by data tier, one
shared cache against one per server, the real XCache against its shadow, and the alerts of the
period. Every number comes from the read layer (cachescope.reads).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from cachescope import reads

#: Belady needs every access of the period in memory: beyond this many, the first ones only
BELADY_MAX_ACCESSES = 2_000_000
MAX_GROUPS = 6
TB = 10**12  # the capacity axes' unit (sizes are decimal, as sites write them)


@dataclass
class Section:
    key: str
    title: str
    text: str
    table: pd.DataFrame
    png: bytes | None = None
    notes: list[str] = field(default_factory=list)


def _fmt_size(n) -> str:
    n = float(n)
    for unit, f in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= f:
            return f"{n / f:.3g} {unit}"
    return f"{n:.0f} B"


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def _figure(w: float = 7.5, h: float = 4.2):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(w, h))


def belady_points(store, start: dt.datetime, end: dt.datetime, group: str, sizes: list[int]) -> tuple[pd.DataFrame, str]:
    """Belady (offline optimum) at `sizes` over the group's stored accesses of the period: one
    what-if pass (cachescope.replay), SHARDS-sampled above BELADY_MAX_ACCESSES accesses."""
    from cachescope.replay import WhatIf, run_whatif, scope

    req = WhatIf(["belady"], [int(s) for s in sizes], start, end, cache_groups=[group])
    n, tiers = scope(store, req) if sizes else (0, [])
    if not n:
        return pd.DataFrame(columns=["size_bytes", "hit_efficiency", "transfer_efficiency"]), ""
    note = ""
    if n > BELADY_MAX_ACCESSES:
        req.sample_rate = BELADY_MAX_ACCESSES / n
        note = f"Belady SHARDS-sampled at rate {req.sample_rate:.3g} of {n:,} accesses"
    rows = [{"size_bytes": a["size_bytes"], "hit_efficiency": _efficiency(a["hit_ratio"]),
             "transfer_efficiency": _efficiency(a["byte_hit_ratio"])}
            for a in run_whatif(store, req, tier_names=tiers).answers()]
    return pd.DataFrame(rows), note


def _efficiency(v: float | None) -> float:
    return np.nan if v is None else float(v)


def curves_section(store, start, end) -> Section:
    groups = reads.cache_groups(store)
    groups = groups.sort_values("accesses", ascending=False)["cache_group"].tolist()[:MAX_GROUPS]
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(len(groups) or 1, 2, figsize=(11, 3.6 * max(1, len(groups))), squeeze=False)
    table, notes = [], []
    for row, g in enumerate(groups):
        curve = reads.mrc(store, start, end, cache_groups=[g])
        live = reads.efficiency_totals(store, start, end, cache_groups=[g])
        sizes = sorted({int(s) for s in live["size_bytes"]})  # the bound at every size the shadows run
        bel, note = belady_points(store, start, end, g, sizes)
        if note:
            notes.append(f"{g}: {note}")
        for col, (metric, label) in enumerate((("hit_efficiency", "hit efficiency"),
                                               ("transfer_efficiency", "transfer efficiency"))):
            ax = axes[row][col]
            c = curve[curve["requests"] > 0]
            if len(c):
                ax.plot(c["capacity_bytes"] / TB, c[metric], color="0.3", lw=1.5, label="LRU exact curve")
            for policy, part in live.groupby("policy"):
                ax.plot(part["size_bytes"] / TB, part[metric], "o-", label=policy)
            if len(bel):
                ax.plot(bel["size_bytes"] / TB, bel[metric], "k^--", label="belady (bound)")
            ax.set_xscale("log")
            # operators size caches in TB: plain numbers on the log axis, not powers of ten of bytes
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.set_ylim(0, 1)
            ax.set_xlabel("cache size (TB)")
            ax.set_ylabel(label)
            ax.set_title(f"{g}: {label}")
            ax.grid(alpha=0.3)
            if row == 0 and col == 0:
                ax.legend(fontsize=8)
        for r in live.itertuples():
            table.append({"cache group": g, "policy": r.policy, "size": _fmt_size(r.size_bytes),
                          "hit eff.": r.hit_efficiency, "delayed hits": int(r.delayed_hits),
                          "transfer eff.": r.transfer_efficiency})
        for r in bel.itertuples():  # the offline optimum fetches instantly: no delayed hit
            table.append({"cache group": g, "policy": "belady", "size": _fmt_size(r.size_bytes),
                          "hit eff.": r.hit_efficiency, "delayed hits": 0, "transfer eff.": r.transfer_efficiency})
    fig.tight_layout()
    return Section("curves", "Miss-ratio curves", "Hit and transfer efficiency against cache size: the exact LRU "
                   "curve of the pipeline, each live policy at its sizes, and Belady (the offline optimum, replayed "
                   "here over the stored accesses) as the bound.", pd.DataFrame(table), _png(fig), notes)


def _reference_cache(store, start, end) -> tuple[str, int] | None:
    live = reads.efficiency_totals(store, start, end)
    if not len(live):
        return None
    policies = list(dict.fromkeys(live["policy"]))
    policy = "xcache" if "xcache" in policies else "lru" if "lru" in policies else policies[0]
    return policy, int(live[live["policy"] == policy]["size_bytes"].max())


def _is_server_group_of_a_site(groups: "pd.Series") -> "pd.Series":
    """A `SITE/SERVER` group whose site group is there too sees the site's reads again (its
    per-server caches, pipeline.server_caches): summed with it, every read would count twice."""
    present = set(groups)
    return groups.map(lambda g: "/" in g and g.split("/", 1)[0] in present).astype(bool)


def tiers_section(store, start, end) -> Section:
    ref = _reference_cache(store, start, end)
    df = pd.DataFrame()
    if ref is not None:
        df = reads.efficiency_totals(store, start, end, policies=[ref[0]], sizes=[ref[1]], by_tier=True)
        df = df[~_is_server_group_of_a_site(df["cache_group"])]
        df = df.groupby("tier_key")[["requests", "hits", "delayed_hits", "bytes_requested", "bytes_hit"]].sum().reset_index()
        df["hit_efficiency"] = df["hits"] / df["requests"]
        df["transfer_efficiency"] = df["bytes_hit"] / df["bytes_requested"]
        df["delayed_hit_ratio"] = df["delayed_hits"] / df["requests"]
        df = df.sort_values("bytes_requested", ascending=False)
    fig, ax = _figure()
    if len(df):
        x = np.arange(len(df))
        ax.bar(x - 0.27, df["hit_efficiency"], 0.27, label="hit efficiency")
        # beside the hits, not in them: reads that waited for blocks in flight (xcache with fetch times)
        ax.bar(x, df["delayed_hit_ratio"], 0.27, label="delayed hits / reads")
        ax.bar(x + 0.27, df["transfer_efficiency"], 0.27, label="transfer efficiency")
        ax.set_xticks(x, df["tier_key"], rotation=45, ha="right")
        ax.set_ylim(0, 1)
        ax.legend()
        ax.set_title(f"by data tier, {ref[0]} {_fmt_size(ref[1])}")
    table = pd.DataFrame({"tier": df.get("tier_key", []), "reads": df.get("requests", []),
                          "bytes read": [_fmt_size(b) for b in df.get("bytes_requested", [])],
                          "hit eff.": df.get("hit_efficiency", []), "delayed hits": df.get("delayed_hits", []),
                          "transfer eff.": df.get("transfer_efficiency", [])})
    what = f"the {ref[0]} shadow cache of {_fmt_size(ref[1])}" if ref else "no shadow cache"
    return Section("tiers", "Efficiency by data tier", f"Volume and efficiency per data tier, for {what}, "
                   "summed over the cache groups; delayed hits (reads that fetched nothing but waited for blocks still "
                   "in flight from the origin) are shown beside the hits, not counted in them.", table, _png(fig))


SPLIT_POLICIES = ("lru", "arc")


def replayed_split(store, start: dt.datetime, end: dt.datetime, group: str, sizes: list[int]) -> tuple[pd.DataFrame, str]:
    """One cache per server of size S/N against one shared cache of size S, replayed through the
    engine over the group's stored accesses (for sites whose pipeline runs one grouping only).
    Deletes reach every per-server cache, as they reach every shadow cache live."""
    from cachescope.simulation import CacheSpec, ShadowBank

    df = reads.whatif_accesses(store, start, end, cache_groups=[group])
    note = ""
    if len(df) > BELADY_MAX_ACCESSES:
        note = f"{group}: replayed over the first {BELADY_MAX_ACCESSES:,} of {len(df):,} accesses"
        df = df.iloc[:BELADY_MAX_ACCESSES]
    servers = sorted({str(v) for v in df.loc[df["op_code"] != 2, "server"]})
    if len(servers) < 2 or not sizes:
        return pd.DataFrame(), note
    op = df["op_code"].to_numpy(np.uint8)
    cols = (df["file_id"].to_numpy(np.uint64), df["file_size"].to_numpy(np.uint64),
            df["bytes_read"].to_numpy(np.uint64))

    def run(specs: list[CacheSpec], mask: np.ndarray) -> np.ndarray:
        bank = ShadowBank(specs, 1)
        bank.feed(*(c[mask] for c in cols), np.zeros(int(mask.sum()), np.uint8), op[mask])
        return bank.totals().sum(axis=1).astype(float)  # caches × fields

    everything = np.ones(len(df), bool)
    specs = [CacheSpec(p, int(s)) for p in SPLIT_POLICIES for s in sizes]
    shared = run(specs, everything)
    server = df["server"].astype(str).to_numpy()
    split = sum(run([CacheSpec(sp.policy, max(1, sp.capacity // len(servers))) for sp in specs],
                    (server == srv) | (op == 2)) for srv in servers)
    rows = []
    for i, sp in enumerate(specs):
        rows.append({"policy": sp.policy, "total_size_bytes": sp.capacity, "servers": len(servers),
                     "shared_hit_efficiency": shared[i, 1] / shared[i, 0] if shared[i, 0] else np.nan,
                     "split_hit_efficiency": split[i, 1] / split[i, 0] if split[i, 0] else np.nan,
                     "shared_transfer_efficiency": shared[i, 3] / shared[i, 2] if shared[i, 2] else np.nan,
                     "split_transfer_efficiency": split[i, 3] / split[i, 2] if split[i, 2] else np.nan})
    return pd.DataFrame(rows), note


def split_section(store, start, end) -> Section:
    sites = sorted({str(s) for s in reads.cache_groups(store)["cache_group"] if "/" not in str(s)})
    parts = []
    for site in sites:
        df = reads.cache_split(store, start, end, site)
        if len(df):
            df.insert(0, "site", site)
            parts.append(df)
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    notes = []
    if not len(df):  # the live pipeline runs one grouping: replay the stored accesses both ways
        groups = reads.cache_groups(store).sort_values("accesses", ascending=False)["cache_group"].tolist()
        for g in groups[:MAX_GROUPS]:
            live = reads.efficiency_totals(store, start, end, cache_groups=[g])
            sizes = sorted({int(s) for s in live["size_bytes"]})
            replayed, note = replayed_split(store, start, end, g, sizes[1:len(sizes) - 1:2][:3] or sizes[:3])
            if note:
                notes.append(note)
            if len(replayed):
                replayed.insert(0, "site", g)
                parts.append(replayed)
        df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        if len(df):
            notes.append("Replayed through the engine from the stored accesses (cold caches at the start of "
                         "the period), since no site runs both groupings live.")
    fig, ax = _figure()
    if len(df):
        labels = [f"{r.site} {r.policy} {_fmt_size(r.total_size_bytes)}" for r in df.itertuples()]
        x = np.arange(len(df))
        ax.bar(x - 0.2, df["shared_hit_efficiency"], 0.4, label="one shared cache")
        ax.bar(x + 0.2, df["split_hit_efficiency"], 0.4, label="one per server (same total)")
        ax.set_xticks(x, labels, rotation=30, ha="right")
        ax.set_ylim(0, 1)
        ax.set_ylabel("hit efficiency")
        ax.legend()
        table = pd.DataFrame({"site": df["site"], "policy": df["policy"],
                              "total size": [_fmt_size(s) for s in df["total_size_bytes"]], "servers": df["servers"],
                              "shared hit": df["shared_hit_efficiency"], "per-server hit": df["split_hit_efficiency"],
                              "shared transfer": df["shared_transfer_efficiency"],
                              "per-server transfer": df["split_transfer_efficiency"]})
    else:
        ax.text(0.5, 0.5, "no site runs both groupings", ha="center", va="center")
        ax.set_axis_off()
        table = pd.DataFrame()
        notes.append("Needs the site as one cache group and its servers as cache groups (site/server, "
                     "cache_groups.mode server) at sizes whose per-server sum equals the shared size.")
    return Section("split", "One shared cache vs one per server", "The same accesses through one cache of the site "
                   "and through one cache per server of equal total size.", table, _png(fig), notes)


def _series_step(start, end) -> int:
    """Seconds per point of a time-series plot: hours up to two weeks, days beyond."""
    return 3600 if (end - start).total_seconds() <= 14 * 86400 else 86400


def real_section(store, start, end) -> Section:
    step = _series_step(start, end)
    real = reads.observed_series(store, start, end, step)
    ref = _reference_cache(store, start, end)
    fig, ax = _figure(9, 4.2)
    rows = []
    notes = []
    for g, part in real.groupby("cache_group"):
        ax.plot(part["time"], part["transfer_efficiency"], lw=1.5, label=f"real {g}")
        shadow = pd.DataFrame()
        if ref is not None:
            shadow = reads.efficiency_series(store, start, end, step, cache_groups=[g], policies=[ref[0]],
                                             sizes=[ref[1]])
            if len(shadow):
                ax.plot(shadow["time"], shadow["transfer_efficiency"], "--", lw=1.2,
                        label=f"shadow {g} {ref[0]} {_fmt_size(ref[1])}")
        total = int((part["hit_bytes"] + part["miss_bytes"] + part["bypass_bytes"]).sum())
        sums = {c: int(part[c].sum()) for c in ("accesses", "hits", "bytes_read", "cache_bytes_low", "cache_bytes_high",
                                                 "origin_accesses", "origin_bytes", "origin_bytes_read")}
        real_t = reads.real_cache_totals(sums)
        if real_t["transfer_efficiency_approximate"]:
            ax.fill_between(part["time"], part["transfer_efficiency_low"], part["transfer_efficiency_high"], alpha=0.15,
                            label=f"real {g}: range (no b_todisk)")
            notes.append(f"{g}: the real cache's records lack b_todisk (XRootD < 5.7.2) for "
                         f"{sums['accesses'] - sums['origin_accesses']} of {sums['accesses']} accesses: its transfer "
                         "efficiency is only a range (low: hits by its verdict; high: b_hit, which with prefetch counts "
                         "blocks in flight from the origin as hits), and the real-vs-shadow alert compares hit "
                         "efficiency.")
        sh = shadow["bytes_hit"].sum() / shadow["bytes_requested"].sum() if len(shadow) else np.nan
        sh_hit = shadow["hits"].sum() / shadow["requests"].sum() if len(shadow) else np.nan
        sh_delayed = int(shadow["delayed_hits"].sum()) if len(shadow) else None
        sh_wan = int(shadow["wan_bytes"].sum()) if len(shadow) else None
        sh_saving = 1 - sh_wan / shadow["bytes_requested"].sum() if len(shadow) and shadow["bytes_requested"].sum() else np.nan

        def num(v):
            return np.nan if v is None else v

        rows.append({"cache group": g, "real transfer eff.": num(real_t["transfer_efficiency"]),
                     "real transfer eff. range": (f"{num(real_t['transfer_efficiency_low']):.3f} – "
                                                  f"{num(real_t['transfer_efficiency_high']):.3f} (approximate)"
                                                  if real_t["transfer_efficiency_approximate"] else "exact"),
                     "shadow transfer eff.": sh,
                     "real hit eff.": num(real_t["hit_efficiency"]),
                     "shadow hit eff.": sh_hit, "shadow delayed hits": sh_delayed,
                     "shadow": f"{ref[0]} {_fmt_size(ref[1])}" if ref else "",
                     "bytes read": _fmt_size(total),
                     "real WAN bytes": _fmt_size(real_t["origin_bytes"]) if real_t["origin_accesses"] else "– (no b_todisk)",
                     "real WAN saving": num(real_t["wan_saving"]),
                     "shadow WAN bytes": _fmt_size(sh_wan) if sh_wan is not None else "",
                     "shadow WAN saving": sh_saving})
    if not rows:
        ax.text(0.5, 0.5, "no real-cache records (XCache formats) in the period", ha="center", va="center")
        ax.set_axis_off()
    else:
        ax.set_ylim(0, 1)
        ax.set_ylabel("transfer efficiency")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.autofmt_xdate()
    return Section("real", "Real XCache vs shadow", "The real cache's own transfer efficiency (bytes served from its "
                   "disk / bytes read: a hit serves all its bytes, a miss its bytes read − the bytes it fetched from "
                   "the origin, b_todisk + b_bypass) and its WAN bytes and saving (1 − WAN bytes / bytes read) against "
                   "the shadow cache of the same policy and size.", pd.DataFrame(rows),
                   _png(fig), notes)


def ages_section(store, start, end) -> Section:
    """How long data stays in each shadow cache: the mean age of its files over time (what XCache's
    own monitoring shows) and, per cache, the mean residence of the files it evicted."""
    step = _series_step(start, end)
    series = reads.residence_series(store, start, end, step)
    ref = _reference_cache(store, start, end)
    fig, ax = _figure(9, 4.2)
    rows = []
    keys = ["cache_group", "policy", "size_bytes"]
    for (g, policy, size), part in series.groupby(keys):
        reads_n, evictions = part["age_reads"].sum(), part["evictions"].sum()
        rows.append({"cache group": g, "policy": policy, "size": _fmt_size(size),
                     "mean file age (h)": part["resident_age_s"].sum() / reads_n / 3600 if reads_n else np.nan,
                     "residence before eviction (h)": part["evicted_age_s"].sum() / evictions / 3600
                     if evictions else np.nan, "evictions": int(evictions)})
        if ref is not None and (policy, int(size)) == ref:
            ax.plot(part["time"], part["mean_age_s"] / 3600, lw=1.5, label=f"{g} {policy} {_fmt_size(size)}")
    if rows and ax.lines:
        ax.set_ylabel("mean age of the files in the cache (h)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.autofmt_xdate()
    else:
        ax.text(0.5, 0.5, "no shadow-cache reads in the period", ha="center", va="center")
        ax.set_axis_off()
    notes = [] if rows else ["Rows written before the residence ages were counted (migration 0010) read 0."]
    what = f"{ref[0]} {_fmt_size(ref[1])}" if ref else "the shadow caches"
    return Section("ages", "How long data stays in each cache", f"Mean age of the files in the cache over time "
                   f"({what}, as a site's XCache monitoring shows it) and, per shadow cache, how long the files it "
                   "evicted had stayed.", pd.DataFrame(rows), _png(fig), notes)


def alerts_section(store, start, end) -> Section:
    spans = reads.alert_spans(store, start, end)
    fig, ax = _figure(9, max(2.0, 0.35 * len(spans) + 1))
    rows = []
    for i, r in enumerate(spans.itertuples()):
        t0 = r.fired_at
        t1 = r.resolved_at if not r.open else pd.Timestamp(end)
        ax.barh(i, (t1 - t0).total_seconds() / 86400, left=t0, height=0.6,
                color={"critical": "#c0392b", "warning": "#e67e22"}.get(r.severity, "#2980b9"))
        rows.append({"cache group": r.cache_group, "rule": r.rule, "severity": r.severity,
                     "fired": f"{r.fired_at:%Y-%m-%d %H:%M}",
                     "resolved": "firing" if r.open else f"{r.resolved_at:%Y-%m-%d %H:%M}", "summary": r.summary})
    if rows:
        ax.set_yticks(range(len(rows)), [f"{r['cache group']} · {r['rule']}" for r in rows], fontsize=8)
        ax.xaxis_date()
        fig.autofmt_xdate()
    else:
        ax.text(0.5, 0.5, "no alert in the period", ha="center", va="center")
        ax.set_axis_off()
    return Section("alerts", "Alerts", "Alerts the pipeline fired in the period (alert rules evaluated as windows "
                   "close), from when they fired to when they resolved.", pd.DataFrame(rows), _png(fig))


def build(store, start: dt.datetime | None = None, end: dt.datetime | None = None) -> tuple[list[Section], dt.datetime, dt.datetime]:
    span = reads.time_span(store)
    if span is None and (start is None or end is None):
        raise ValueError("the store holds no results yet: replay or stream some logs first")
    start = start or span[0]
    end = end or span[1]
    if end <= start:
        raise ValueError(f"--to {end.isoformat()} is not after --from {start.isoformat()}")
    sections = [curves_section(store, start, end), tiers_section(store, start, end), split_section(store, start, end),
                real_section(store, start, end), ages_section(store, start, end), alerts_section(store, start, end)]
    return sections, start, end


def _cell(v) -> str:
    if isinstance(v, float):
        return "–" if np.isnan(v) else f"{v:.3f}"
    return html.escape(str(v))


def _table_html(df: pd.DataFrame) -> str:
    if not len(df):
        return "<p class=empty>no rows</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
                   for row in df.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write(sections: list[Section], start: dt.datetime, end: dt.datetime, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    parts = []
    for s in sections:
        img = ""
        if s.png:
            (out / f"{s.key}.png").write_bytes(s.png)
            img = f'<img alt="{html.escape(s.title)}" src="data:image/png;base64,{base64.b64encode(s.png).decode()}">'
        notes = "".join(f"<p class=note>{html.escape(n)}</p>" for n in s.notes)
        parts.append(f'<section id="{s.key}"><h2>{html.escape(s.title)}</h2><p>{html.escape(s.text)}</p>{notes}'
                     f'<div class=row><div class=plot>{img}</div><div class=numbers>{_table_html(s.table)}</div>'
                     "</div></section>")
    page = (
        "<!doctype html><html><head><meta charset=utf-8><title>cachescope report</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}h1{margin-bottom:0}"
        ".row{display:flex;gap:1.5em;flex-wrap:wrap;align-items:flex-start}.plot img{max-width:100%}"
        ".plot{flex:1 1 560px}.numbers{flex:1 1 380px;overflow-x:auto}table{border-collapse:collapse;font-size:13px}"
        "td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}.note{color:#666;font-size:13px}"
        "</style></head><body>"
        f"<h1>cachescope report</h1><p>{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC</p>"
        + "".join(parts) + "</body></html>")
    path = out / "report.html"
    path.write_text(page)
    return path
