// The built-in page: every number comes from the REST API (/v1/…) of the same server; charts are
// uPlot, served by the app (api/static/vendor, installed from npm at build time).
// Names come from the logs (sites, servers, tiers, alert summaries): they only ever enter the page
// as text (textContent, option values), never as HTML; the server's CSP forbids inline script.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { configs: [], groups: [], span: null };
// the uPlot instances, for whoever inspects the page (tests read their series and data)
window.cachescope = { charts: {}, loaded: {} };

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"];

function fmtSize(b) {
  const units = [["PB", 1e15], ["TB", 1e12], ["GB", 1e9], ["MB", 1e6]];
  for (const [u, f] of units) if (b >= f) return `${+(b / f).toPrecision(3)} ${u}`;
  return `${b} B`;
}
const fmtEff = (v) => (v === null || v === undefined || Number.isNaN(v) ? "–" : v.toFixed(3));

async function api(path, options) {
  const r = await fetch(path, options);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const msg = (body.detail && (body.detail.message || JSON.stringify(body.detail))) || body.message || r.statusText;
    throw new Error(`${path.split("?")[0]}: ${msg}`);
  }
  return body;
}

function status(text) { $("status").textContent = text; }

// a table row of text cells: each cell is a string, or [text, class]
function row(cells, attrs = {}) {
  const tr = document.createElement("tr");
  for (const [k, v] of Object.entries(attrs)) tr.setAttribute(k, v);
  for (const c of cells) {
    const td = document.createElement("td");
    const [text, cls] = Array.isArray(c) ? c : [c, ""];
    td.textContent = String(text);
    if (cls) td.className = cls;
    tr.appendChild(td);
  }
  return tr;
}

function selected(sel) { return Array.from(sel.selectedOptions).map((o) => o.value); }

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (Array.isArray(v)) v.forEach((x) => q.append(k, x));
    else if (v !== undefined && v !== null && v !== "") q.append(k, v);
  }
  return q.toString();
}

function fill(sel, values, label = (v) => v, pick = () => false) {
  sel.replaceChildren();
  for (const v of values) {
    const o = document.createElement("option");
    o.value = v;
    o.textContent = label(v);
    o.selected = pick(v);
    sel.appendChild(o);
  }
}

function draw(key, el, opts, data) {
  const old = window.cachescope.charts[key];
  if (old) old.destroy();
  el.replaceChildren();
  const width = Math.max(320, el.clientWidth || 800);
  const u = new uPlot({ width, height: 300, ...opts }, data, el);
  window.cachescope.charts[key] = u;
  el.dataset.series = String(opts.series.length - 1);
  el.dataset.points = String(data[0].length);
  return u;
}

// ------------------------------------------------------------------ efficiency over time

async function loadEfficiency() {
  const group = $("group").value;
  const metric = $("metric").value;
  const tier = $("tier").value;
  const ans = await api(`/v1/efficiency?${query({
    cache_group: group, policy: selected($("policy")), size: selected($("size")), tier: tier ? [tier] : [],
    step: $("step").value })}`);
  // one x axis: the union of the buckets
  const times = [...new Set(ans.series.flatMap((s) => s.time))].sort();
  const index = new Map(times.map((t, i) => [t, i]));
  const xs = times.map((t) => Date.parse(t) / 1000);
  const data = [xs];
  const series = [{}];
  ans.series.forEach((s, i) => {
    const ys = new Array(times.length).fill(null);
    // delayed hits / reads of the bucket, beside the hit efficiency (a delayed hit is not a hit)
    const value = metric === "delayed_hit_ratio"
      ? (j) => (s.requests[j] ? (s.delayed_hits ? s.delayed_hits[j] : 0) / s.requests[j] : null)
      : (j) => s[metric][j];
    s.time.forEach((t, j) => { ys[index.get(t)] = value(j); });
    data.push(ys);
    series.push({ label: `${s.policy} ${fmtSize(s.size_bytes)}${s.tier && s.tier !== "ALL" ? " · " + s.tier : ""}`,
                  stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: false });
  });
  draw("efficiency", $("eff-chart"), {
    series, scales: { y: { range: [0, 1] } },
    axes: [{}, { label: $("metric").selectedOptions[0].textContent,
                 values: (u, v) => v.map((x) => x.toFixed(2)) }],
  }, data);
  window.cachescope.loaded.efficiency = ans.series.map((s) => `${s.policy}/${s.size_bytes}/${s.tier}`);
}

// ------------------------------------------------------------------ curve

async function loadCurve() {
  const ans = await api(`/v1/mrc?${query({ cache_group: $("group").value })}`);
  const pts = (ans.curves.ALL || []).filter((p) => p.requests > 0);
  const data = [pts.map((p) => p.capacity_bytes), pts.map((p) => p.hit_ratio), pts.map((p) => p.byte_hit_ratio)];
  draw("curve", $("curve-chart"), {
    series: [{ label: "capacity", value: (u, v) => (v == null ? "" : fmtSize(v)) },
             { label: "hit efficiency", stroke: PALETTE[0], width: 2 },
             { label: "transfer efficiency", stroke: PALETTE[1], width: 2 }],
    scales: { x: { time: false, distr: 3 }, y: { range: [0, 1] } },
    // log axis: label the powers of ten only
    axes: [{ values: (u, v) => v.map((x) => (x && Math.abs(Math.log10(x) % 1) < 1e-6 ? fmtSize(x) : "")) }, {}],
  }, data);
}

// ------------------------------------------------------------------ tiers

async function loadTiers() {
  const policy = selected($("policy"))[0] || state.policies[0];
  const size = selected($("size"))[0] || state.sizes[state.sizes.length - 1];
  const ans = await api(`/v1/efficiency?${query({ cache_group: $("group").value, policy, size, by_tier: true,
                                                  step: "1d" })}`);
  const rows = ans.series.map((s) => {
    const sum = (k) => s[k].reduce((a, b) => a + b, 0);
    const r = sum("requests"), h = sum("hits"), br = sum("bytes_requested"), bh = sum("bytes_hit");
    const d = s.delayed_hits ? sum("delayed_hits") : 0;
    return { tier: s.tier, r, br, hit: r ? h / r : null, delayed: d, transfer: br ? bh / br : null };
  }).sort((a, b) => b.br - a.br);
  $("tier-caption").textContent = `${policy} ${fmtSize(+size)}, whole period`;
  $("tier-table").querySelector("tbody").replaceChildren(...rows.map((x) =>
    row([x.tier, [x.r, "num"], [fmtSize(x.br), "num"], [fmtEff(x.hit), "num"], [x.delayed, "num"],
         [fmtEff(x.transfer), "num"]])));
}

// ------------------------------------------------------------------ real vs shadow

async function loadReal() {
  const group = $("group").value;
  const size = selected($("size"))[0] || state.sizes[state.sizes.length - 1];
  $("real-caption").textContent = `${group}: the real cache's transfer efficiency (and its hit efficiency, dotted) ` +
    `beside the shadows' transfer efficiency at ${fmtSize(+size)}`;
  let ans;
  try {
    ans = await api(`/v1/compare?${query({ cache_group: group, size, step: $("step").value === "1m" ? "1h" : $("step").value,
                                          xcache: false })}`);
  } catch (e) {
    $("real-chart").textContent = e.message;
    return;
  }
  const w = ans.windows || [];
  const names = [...new Set(w.flatMap((p) => Object.keys(p.shadow || {})))].sort();
  const data = [w.map((p) => Date.parse(p.time) / 1000), w.map((p) => p.observed_transfer_efficiency),
                w.map((p) => (p.observed_accesses ? p.observed_hit_efficiency : null))];
  const series = [{}, { label: "real cache", stroke: "#111", width: 2.5 },
                  { label: "real cache (hit eff.)", stroke: "#111", width: 1.2, dash: [2, 3] }];
  names.forEach((n, i) => {
    data.push(w.map((p) => (p.shadow && n in p.shadow ? p.shadow[n] : null)));
    series.push({ label: `shadow ${n}`, stroke: PALETTE[i % PALETTE.length], width: 1.5, dash: [6, 4] });
  });
  // without b_todisk (XRootD 5.5 with prefetch) the real transfer efficiency is a range: both bounds drawn
  if (w.some((p) => p.observed_transfer_efficiency_approximate)) {
    data.push(w.map((p) => p.observed_transfer_efficiency_low), w.map((p) => p.observed_transfer_efficiency_high));
    series.push({ label: "real cache, lower bound (verdict)", stroke: "#777", width: 1, dash: [1, 2] },
                { label: "real cache, upper bound (b_hit)", stroke: "#777", width: 1, dash: [1, 2] });
  }
  draw("real", $("real-chart"), { series, scales: { y: { range: [0, 1] } } }, data);
  const o = ans.overall || {};
  $("real-numbers").textContent = o.observed_transfer_efficiency_approximate
    ? `Real cache transfer efficiency approximate: ${fmtEff(o.observed_transfer_efficiency_low)} – ` +
      `${fmtEff(o.observed_transfer_efficiency_high)} (its records lack b_todisk, XRootD < 5.7.2: with prefetch ` +
      "b_hit counts blocks still in flight from the origin as hits; the real-vs-shadow alert compares hit efficiency)"
    : `Real cache transfer efficiency ${fmtEff(o.observed_transfer_efficiency)} (exact: from its verdict and b_todisk)`;
  const wan = [["real cache", o.observed_transfer_efficiency_approximate
    ? `${fmtEff(o.observed_transfer_efficiency_low)} – ${fmtEff(o.observed_transfer_efficiency_high)} (approx.)`
    : fmtEff(o.observed_transfer_efficiency),
    o.observed_origin_accesses ? fmtSize(o.observed_origin_bytes) : "– (no b_todisk)", fmtEff(o.observed_wan_saving)]];
  Object.keys(o.shadow_wan_bytes || {}).sort().forEach((n) => wan.push([`shadow ${n}`, fmtEff((o.shadow || {})[n]),
    fmtSize(o.shadow_wan_bytes[n]), fmtEff((o.shadow_wan_saving || {})[n])]));
  $("wan-table").querySelector("tbody").replaceChildren(...wan.map((x) =>
    row([x[0], [x[1], "num"], [x[2], "num"], [x[3], "num"]])));
  // residence: the mean age of the files in each stored shadow, per window (hours)
  const aged = [...new Set(w.flatMap((p) => Object.keys(p.shadow_mean_age_s || {})))].sort();
  const ages = [w.map((p) => Date.parse(p.time) / 1000)];
  const ageSeries = [{}];
  aged.forEach((n, i) => {
    ages.push(w.map((p) => (p.shadow_mean_age_s && p.shadow_mean_age_s[n] != null ? p.shadow_mean_age_s[n] / 3600 : null)));
    ageSeries.push({ label: `shadow ${n} (h)`, stroke: PALETTE[i % PALETTE.length], width: 1.5 });
  });
  draw("age", $("age-chart"), { series: ageSeries }, ages);
}

// ------------------------------------------------------------------ alerts

async function loadAlerts() {
  const ans = await api(`/v1/alerts?${query({ cache_group: $("group").value })}`);
  const rows = ans.alerts || [];
  const none = row([["no alert", "muted"]]);
  none.firstChild.colSpan = 5;
  $("alerts-table").querySelector("tbody").replaceChildren(...(rows.length ? rows.map((a) =>
    row([String(a.ts || a.time || "").replace("T", " ").slice(0, 16), a.cache_group || "", a.rule || "",
         // the state is a class only when it is one the style sheet knows
         [a.state || "", ["firing", "resolved"].includes(a.state) ? a.state : ""], a.summary || ""])) : [none]));
}

// ------------------------------------------------------------------ what-if

async function runWhatIf(ev) {
  ev.preventDefault();
  const group = $("group").value;
  const body = { policy: $("wi-policy").value, size: $("wi-size").value, from: $("wi-from").value,
                 to: $("wi-to").value, cache_group: group };
  const tbody = $("whatif-table").querySelector("tbody");
  $("whatif-note").textContent = "replaying…";
  try {
    const [ans, live] = await Promise.all([
      api("/v1/whatif", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) }),
      // the live shadows over the same range, in whole hours (the windows they were counted in)
      api(`/v1/efficiency?${query({ cache_group: group, from: hour(body.from, 0), to: hour(body.to, 1), step: "1h" })}`),
    ]);
    const rows = [row([`what-if ${body.policy} ${fmtSize(ans.size_bytes)}`, [ans.requests, "num"],
                       [fmtEff(ans.hit_ratio), "num"], [ans.delayed_hits ?? 0, "num"], [fmtEff(ans.byte_hit_ratio), "num"]],
                      { class: "answer", "data-kind": "whatif" })];
    for (const s of live.series) {
      const sum = (k) => s[k].reduce((a, b) => a + b, 0);
      const r = sum("requests"), br = sum("bytes_requested");
      rows.push(row([`live ${s.policy} ${fmtSize(s.size_bytes)}`, [r, "num"], [fmtEff(r ? sum("hits") / r : null), "num"],
                     [s.delayed_hits ? sum("delayed_hits") : 0, "num"],
                     [fmtEff(br ? sum("bytes_hit") / br : null), "num"]], { "data-kind": "live" }));
    }
    tbody.replaceChildren(...rows);
    $("whatif-note").textContent = `${ans.requests} read accesses replayed in ${(ans.seconds || 0).toFixed(2)} s`;
    window.cachescope.loaded.whatif = ans;
  } catch (e) {
    tbody.replaceChildren();
    $("whatif-note").textContent = e.message;
  }
}

function hour(iso, up) {
  const t = Date.parse(iso);
  const h = 3600e3;
  return new Date((up ? Math.ceil(t / h) : Math.floor(t / h)) * h).toISOString();
}

function day(iso, up) {
  const t = Date.parse(iso);
  const d = 86400e3;
  return new Date((up ? Math.floor(t / d) + 1 : Math.floor(t / d)) * d).toISOString().replace(".000Z", "Z");
}

// ------------------------------------------------------------------ start

async function refresh() {
  status("loading…");
  try {
    await Promise.all([loadEfficiency(), loadCurve(), loadTiers(), loadReal(), loadAlerts()]);
    status("");
    document.body.dataset.ready = "1";
  } catch (e) {
    status(e.message);
  }
}

async function start() {
  const c = await api("/v1/configs");
  state.configs = c.configs;
  state.groups = c.cache_groups.map((g) => g.cache_group);
  const first = c.cache_groups.map((g) => g.first_access).sort()[0];
  const last = c.cache_groups.map((g) => g.last_access).sort().slice(-1)[0];
  state.span = [first, last];
  $("span").textContent = first ? `${first.slice(0, 16).replace("T", " ")} – ${last.slice(0, 16).replace("T", " ")} UTC` : "no data";
  fill($("group"), state.groups);
  const onGroup = () => {
    const mine = state.configs.filter((x) => x.cache_group === $("group").value);
    state.policies = [...new Set(mine.map((x) => x.policy))];
    state.sizes = [...new Set(mine.map((x) => x.size_bytes))].sort((a, b) => a - b);
    fill($("policy"), state.policies, (v) => v, (v) => v === state.policies[0]);
    fill($("size"), state.sizes, (v) => fmtSize(v), (v) => v === state.sizes[state.sizes.length - 1]);
  };
  onGroup();
  $("wi-from").value = first ? day(first, 0) : "";  // whole days of the stored period
  $("wi-to").value = last ? day(last, 1) : "";
  $("group").addEventListener("change", () => { onGroup(); refresh(); });
  for (const id of ["policy", "size", "tier", "metric", "step"]) $(id).addEventListener("change", refresh);
  $("whatif").addEventListener("submit", runWhatIf);
  $("selectors").addEventListener("submit", (ev) => ev.preventDefault());
  // tiers seen: from the tier series of the first policy and size
  try {
    const t = await api(`/v1/efficiency?${query({ cache_group: $("group").value, policy: state.policies[0],
                                                  size: state.sizes[0], by_tier: true, step: "1d" })}`);
    const tiers = [...new Set(t.series.map((s) => s.tier))].sort();
    for (const tier of tiers) {
      const o = document.createElement("option");
      o.value = o.textContent = tier;
      $("tier").appendChild(o);
    }
  } catch (e) { /* the selector stays at "all tiers" */ }
  await refresh();
}

start().catch((e) => status(e.message));
