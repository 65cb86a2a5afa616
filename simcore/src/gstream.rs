//! XRootD g-stream decoder in compiled code: `ingest/formats/xrootd_gstream.py`'s `_parse` and
//! `ingest/enrich.py`'s `Enricher` over a block of lines, straight into the event columns
//! (`EventColumns`), without a Python object per record. It is given everything it needs when it
//! is made: the compiled tier rules (`PathTiers`, made once per classifier), the site/server →
//! cache-group map (`CacheGroupConfig`'s overrides, mode and region), the sites' VOs and the
//! stream's `GstreamState` (the last header's server and site, access_cnt per server and file),
//! and it never calls into Python. It takes the lines whose outcome it can decide exactly as the
//! Python path does: a JSON object (no backslash, no fraction or exponent, integers within 20
//! digits, nesting within 32) that is a `file_close` with plain non-negative integer counters and
//! times, or a packet header, whose path the compiled classifier answers. Anything else (damaged
//! JSON, other events, fields Python converts or rejects, values out of the contract's range,
//! paths outside printable ASCII) `scan` stops at, before any effect of that line, and returns
//! its index: the pipeline parses that line with the reference parser (which shares the
//! GstreamState and pushes its event here) and the scan resumes. tests/python/unit/ingest/test_gstream_fast.py
//! compares both paths on samples, generated logs, mutated and Hypothesis lines.

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use rustc_hash::FxHashMap;
use crate::json::{Json, Val};

/// Distinct paths kept before the cache starts over (the Enricher's `_PATH_CACHE_LIMIT`).
const PATH_CACHE_LIMIT: usize = 500_000;
/// `MAX_SPLIT` and `COUNTS_LIMIT` of xrootd_gstream.py: accesses one record may stand for, files
/// remembered per server.
const MAX_SPLIT: u64 = 64;
const COUNTS_LIMIT: usize = 1_000_000;
/// `cachescope/units.py`'s MAX_ACCESS_BYTES: the largest file size one access may state (2^48).
const MAX_ACCESS_BYTES: u64 = 1 << 48;
const SECONDS_BELOW: u64 = 100_000_000_000; // 1e11: epoch seconds (epoch_us's rule)

/// The keys `_Record` decodes; the rest are validated and skipped.
#[derive(Default)]
struct Rec<'a> {
    event: Option<Val<'a>>,
    lfn: Option<Val<'a>>,
    size: Option<Val<'a>>,
    b_hit: Option<Val<'a>>,
    b_miss: Option<Val<'a>>,
    b_bypass: Option<Val<'a>>,
    attach_t: Option<Val<'a>>,
    detach_t: Option<Val<'a>>,
    host: Option<Val<'a>>,
    site: Option<Val<'a>>,
    remotes: Option<Val<'a>>,
    access_cnt: Option<Val<'a>>,
    b_todisk: Option<Val<'a>>,
    b_prefetch: Option<Val<'a>>,
    code: Option<Val<'a>>,
    src: Option<Val<'a>>,
    host_id: Option<Val<'a>>,
    site_id: Option<Val<'a>>,
}

impl<'a> Rec<'a> {
    fn slot(&mut self, key: &str) -> Option<&mut Option<Val<'a>>> {
        Some(match key {
            "event" => &mut self.event,
            "lfn" => &mut self.lfn,
            "size" => &mut self.size,
            "b_hit" => &mut self.b_hit,
            "b_miss" => &mut self.b_miss,
            "b_bypass" => &mut self.b_bypass,
            "attach_t" => &mut self.attach_t,
            "detach_t" => &mut self.detach_t,
            "host" => &mut self.host,
            "site" => &mut self.site,
            "remotes" => &mut self.remotes,
            "access_cnt" => &mut self.access_cnt,
            "b_todisk" => &mut self.b_todisk,
            "b_prefetch" => &mut self.b_prefetch,
            "code" => &mut self.code,
            "src" => &mut self.src,
            "hostID" => &mut self.host_id,
            "siteID" => &mut self.site_id,
            _ => return None,
        })
    }
}


/// The record's keys, or None (not a JSON object the fast path reads, or a key given twice).
fn record(line: &str) -> Option<Rec<'_>> {
    if !line.starts_with('{') || memchr::memchr(b'\\', line.as_bytes()).is_some() {
        return None;
    }
    let mut j = Json { text: line, s: line.as_bytes(), i: 0 };
    let mut rec = Rec::default();
    j.object(1, |k, v| match rec.slot(k) {
        Some(slot) if slot.is_some() => None,
        Some(slot) => {
            *slot = Some(v);
            Some(())
        }
        None => Some(()),
    })?;
    (j.i == line.len()).then_some(rec)
}

/// `host` and `site` of a header's `src` object (`""` when not strings), None on a repeated key.
fn src_fields<'a>(line: &'a str, a: usize, b: usize) -> Option<(&'a str, &'a str)> {
    let part = &line[a..b];
    let mut j = Json { text: part, s: part.as_bytes(), i: 0 };
    let (mut host, mut site): (Option<Val>, Option<Val>) = (None, None);
    j.object(1, |k, v| {
        let slot = match k {
            "host" => &mut host,
            "site" => &mut site,
            _ => return Some(()),
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(v);
        Some(())
    })?;
    let text = |v: Option<Val<'a>>| match v {
        Some(Val::Str(s)) => s,
        _ => "",
    };
    Some((text(host), text(site)))
}

/// `epoch_us` for a JSON integer; None where it raises.
fn epoch_us(v: u64) -> Option<u64> {
    let v = v as u128;
    let us = if v == 0 {
        return None;
    } else if v < 100_000_000_000 {
        v * 1_000_000
    } else if v < 100_000_000_000_000 {
        v * 1_000
    } else if v < 100_000_000_000_000_000 {
        v
    } else if v < 100_000_000_000_000_000_000 {
        v / 1_000
    } else {
        return None;
    };
    // the contract's bound (enrich: 0 <= ts < 2**63), else Python rejects the line
    (us < (1u128 << 63)).then_some(us as u64)
}

/// One file close, as `_close` and the Enricher make it (before the stream-dependent parts).
struct Close<'a> {
    ts: u64,
    path: &'a str,
    size: u64,
    served: u128,
    hit: u64,
    miss: u64,
    bypass: u64,
    host: &'a str,
    site: &'a str,
    /// observed_hit: 1, 0, or -1 (the record does not say)
    verdict: i8,
    /// observed_origin_bytes: b_todisk + b_bypass, or -1 (no b_todisk)
    origin: i64,
    /// access_cnt when a count (>= 1)
    count: Option<u64>,
    /// duration_us: detach_t − attach_t in µs, -1 when the record does not give both
    duration: i64,
}

enum Outcome<'a> {
    Close(Close<'a>),
    /// host, site, whether a server ident (`"code":"="`) rather than a packet header
    Header(&'a str, &'a str, bool),
    /// a close that served 0 bytes: path, host, access_cnt (its count is still remembered)
    ZeroBytes(&'a str, &'a str, Option<u64>),
}

fn text<'a>(v: Option<Val<'a>>) -> &'a str {
    match v {
        Some(Val::Str(s)) => s,
        _ => "",
    }
}

/// `_accesses`'s reading of access_cnt: a count >= 1, else none.
fn count(v: Option<Val>) -> Option<u64> {
    match v {
        Some(Val::Int(x)) if x >= 1 => Some(x),
        _ => None,
    }
}

fn counter(v: Option<Val>) -> Option<u64> {
    match v {
        None => Some(0),
        Some(Val::Int(x)) => Some(x),
        _ => None,
    }
}

/// `_parse` of a line, or None where the fast path declines it.
fn outcome(line: &str) -> Option<Outcome<'_>> {
    let r = record(line)?;
    let unset_or_null = matches!(r.event, None | Some(Val::Null));
    let is_close = r.event == Some(Val::Str("file_close")) || (unset_or_null && r.lfn.is_some() && r.b_hit.is_some());
    if !is_close {
        let ident = r.code == Some(Val::Str("="));
        if r.code == Some(Val::Str("g")) || ident || r.host_id.is_some() {
            let (host, site) = match r.src {
                Some(Val::Obj(a, b)) => src_fields(line, a, b)?,
                _ => match r.host_id {
                    Some(Val::Str(h)) => (
                        h.rsplit_once(':').map_or(h, |(head, _)| head),
                        match r.site_id {
                            Some(Val::Str(s)) => s,
                            _ => "",
                        },
                    ),
                    _ => ("", ""),
                },
            };
            return Some(Outcome::Header(host, site, ident));
        }
        return None; // BadRecord or another event's skip: Python words it
    }
    let Some(Val::Str(path)) = r.lfn else { return None };
    if path.is_empty() {
        return None;
    }
    let Some(Val::Int(size)) = r.size else { return None };
    if size > MAX_ACCESS_BYTES {
        return None; // the Enricher's reject (its reason is worded there)
    }
    if r.b_hit.is_none() && r.b_miss.is_none() {
        return None;
    }
    let (hit, miss, bypass) = (counter(r.b_hit)?, counter(r.b_miss)?, counter(r.b_bypass)?);
    let served = hit as u128 + miss as u128 + bypass as u128;
    if served == 0 {
        return Some(Outcome::ZeroBytes(path, text(r.host), count(r.access_cnt)));
    }
    let ts = match r.attach_t {
        Some(Val::Int(w)) if w > 0 && w < SECONDS_BELOW => epoch_us(w)?,
        None | Some(Val::Null) | Some(Val::Int(0)) => match r.detach_t {
            Some(Val::Int(d)) => epoch_us(d)?,
            _ => return None,
        },
        Some(Val::Int(w)) => epoch_us(w)?,
        _ => return None,
    };
    // the observed_* columns are int64 (from_events raises beyond it: Python's path decides)
    if hit > i64::MAX as u64 || miss > i64::MAX as u64 || bypass > i64::MAX as u64 {
        return None;
    }
    // `_verdict`: remotes (an array) and b_todisk/b_prefetch (integers; other values are Python's)
    let mut says = matches!(r.remotes, Some(Val::Arr(_)));
    let mut fetched = matches!(r.remotes, Some(Val::Arr(n)) if n > 0);
    for v in [r.b_todisk, r.b_prefetch] {
        match v {
            None | Some(Val::Null) => {}
            Some(Val::Int(x)) => {
                says = true;
                fetched |= x > 0;
            }
            _ => return None,
        }
    }
    // `_origin`: b_todisk + b_bypass (beyond int64 Python rejects it)
    let origin = match r.b_todisk {
        Some(Val::Int(x)) => {
            let o = x as u128 + bypass as u128;
            if o > i64::MAX as u128 {
                return None;
            }
            o as i64
        }
        _ => -1,
    };
    let verdict = if !says {
        -1
    } else if fetched || miss > 0 || bypass > 0 {
        0
    } else {
        1
    };
    Some(Outcome::Close(Close {
        ts,
        path,
        size,
        served,
        hit,
        miss,
        bypass,
        host: text(r.host),
        site: text(r.site),
        verdict,
        origin,
        count: count(r.access_cnt),
        duration: attach_duration(r.attach_t, r.detach_t),
    }))
}

/// `_duration`: how long the file was attached (detach_t − attach_t, whole seconds, in µs), -1
/// unless both are positive integers in order.
fn attach_duration(attach: Option<Val>, detach: Option<Val>) -> i64 {
    match (attach, detach) {
        (Some(Val::Int(a)), Some(Val::Int(d))) if a > 0 && d >= a && d < SECONDS_BELOW => ((d - a) * 1_000_000) as i64,
        _ => -1,
    }
}

/// What the Enricher knows of a path: normalised path, file id, tier, VO (None when none).
struct PathInfo {
    path: Py<PyAny>,
    file_id: u64,
    tier: Py<PyAny>,
    vo: Option<Py<PyAny>>,
}

#[derive(Default)]
struct Columns {
    ts: Vec<i64>,
    site: Vec<Py<PyAny>>,
    source: Vec<Py<PyAny>>,
    server: Vec<Py<PyAny>>,
    client: Vec<Py<PyAny>>,
    vo: Vec<Py<PyAny>>,
    path: Vec<Py<PyAny>>,
    file_id: Vec<u64>,
    file_size: Vec<u64>,
    bytes_read: Vec<u64>,
    op: Vec<u8>,
    tier: Vec<Py<PyAny>>,
    cache_group: Vec<Py<PyAny>>,
    hit: Vec<i64>,
    miss: Vec<i64>,
    bypass: Vec<i64>,
    verdict: Vec<i8>,
    origin_bytes: Vec<i64>,
    duration: Vec<i64>,
    origin: Vec<Py<PyAny>>,
    seq: Vec<u64>,
}

/// The objects of the last record's site and server.
struct Last {
    site: String,
    server: String,
    site_obj: Py<PyAny>,
    server_obj: Py<PyAny>,
    site_vo: Py<PyAny>,
    group: Py<PyAny>,
}

/// The g-stream's memory of one input stream: the server and site of the last packet header or
/// server ident, and each file's last access_cnt per server (`_accesses`). One object, held in
/// `ctx.state["gstream"]`: the compiled builder borrows it, Python's parser (lines the builder
/// leaves to it, and `cache_record` for the collector) calls its methods. Pickled with the
/// collector's checkpoints.
#[pyclass(module = "cachescope._simcore")]
pub struct GstreamState {
    host: String,
    site: String,
    /// the same texts as Python objects: Python's parser reads them per record
    host_obj: Py<PyAny>,
    site_obj: Py<PyAny>,
    counts: FxHashMap<Box<str>, FxHashMap<Box<str>, u64>>,
}

impl GstreamState {
    fn set_header(&mut self, py: Python<'_>, host: &str, site: &str) {
        if self.host != host {
            self.host = host.to_owned();
            self.host_obj = PyString::new(py, host).into_any().unbind();
        }
        if self.site != site {
            self.site = site.to_owned();
            self.site_obj = PyString::new(py, site).into_any().unbind();
        }
    }

    /// `_accesses`: how many accesses a record of `path` on `server` with access_cnt `count`
    /// stands for (1, or the growth since the file's previous record, at most MAX_SPLIT); remembers it.
    fn seen(&mut self, server: &str, path: &str, count: Option<u64>) -> u64 {
        let Some(count) = count else { return 1 };
        let counts = match self.counts.get_mut(server) {
            Some(c) => c,
            None => self.counts.entry(server.into()).or_default(),
        };
        let before = match counts.get_mut(path) {
            Some(v) => Some(std::mem::replace(v, count)),
            None => {
                if counts.len() >= COUNTS_LIMIT {
                    counts.clear(); // bounded memory: a forgotten file's next record counts as one access
                }
                counts.insert(path.into(), count);
                None
            }
        };
        match before {
            Some(b) if count > b && count - b <= MAX_SPLIT => count - b,
            _ => 1,
        }
    }
}

type Counts = Vec<(String, Vec<(String, u64)>)>;

#[pymethods]
impl GstreamState {
    #[new]
    #[pyo3(signature = (host=String::new(), site=String::new(), counts=Vec::new()))]
    fn new(py: Python<'_>, host: String, site: String, counts: Counts) -> Self {
        let counts = counts
            .into_iter()
            .map(|(server, files)| (server.into(), files.into_iter().map(|(p, c)| (p.into(), c)).collect()))
            .collect();
        let (host_obj, site_obj) =
            (PyString::new(py, &host).into_any().unbind(), PyString::new(py, &site).into_any().unbind());
        Self { host, site, host_obj, site_obj, counts }
    }

    #[getter]
    fn host(&self, py: Python<'_>) -> Py<PyAny> {
        self.host_obj.clone_ref(py)
    }

    #[setter]
    fn set_host(&mut self, py: Python<'_>, host: &str) {
        let site = self.site.clone();
        self.set_header(py, host, &site);
    }

    #[getter]
    fn site(&self, py: Python<'_>) -> Py<PyAny> {
        self.site_obj.clone_ref(py)
    }

    #[setter]
    fn set_site(&mut self, py: Python<'_>, site: &str) {
        let host = self.host.clone();
        self.set_header(py, &host, site);
    }

    /// `_accesses` for an access_cnt of 1 ..= 2^64 - 1 (the caller leaves other values at 1).
    fn accesses(&mut self, server: &str, path: &str, count: u64) -> u64 {
        self.seen(server, path, Some(count))
    }

    /// The remembered access_cnt of `path` on `server`, None when not remembered.
    fn count(&self, server: &str, path: &str) -> Option<u64> {
        self.counts.get(server).and_then(|c| c.get(path)).copied()
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String, String, Counts))> {
        let counts = self
            .counts
            .iter()
            .map(|(s, files)| (s.to_string(), files.iter().map(|(p, c)| (p.to_string(), *c)).collect()))
            .collect();
        Ok((py.get_type::<Self>().into_any(), (self.host.clone(), self.site.clone(), counts)))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<GstreamState>().is_ok_and(|o| {
            let o = o.borrow();
            (&o.host, &o.site, &o.counts) == (&self.host, &self.site, &self.counts)
        })
    }

    fn __repr__(&self) -> String {
        let files: usize = self.counts.values().map(|c| c.len()).sum();
        format!("GstreamState(host={:?}, site={:?}, {} servers, {} files)", self.host, self.site, self.counts.len(), files)
    }
}

/// fnmatchcase over `*` and `?` (patterns with `[` are left to Python: no builder is made).
fn glob(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || (pattern[p] != '*' && pattern[p] == text[t])) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            back = Some((p, t));
            p += 1;
        } else if let Some((bp, bt)) = back {
            p = bp + 1;
            t = bt + 1;
            back = Some((bp, bt + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// `CacheGroupConfig.group_for`, given as its overrides (server glob, site glob, group), mode and region.
struct Groups {
    overrides: Vec<(Vec<char>, Vec<char>, String)>,
    mode: String,
    region: String,
}

impl Groups {
    fn group_for(&self, site: &str, server: &str) -> String {
        if !self.overrides.is_empty() {
            let (sv, st): (Vec<char>, Vec<char>) = (server.chars().collect(), site.chars().collect());
            for (server_glob, site_glob, group) in &self.overrides {
                if glob(server_glob, &sv) && glob(site_glob, &st) {
                    return group.clone();
                }
            }
        }
        match self.mode.as_str() {
            "region" => self.region.clone(),
            "server" if !server.is_empty() => {
                if site.is_empty() {
                    server.to_owned()
                } else {
                    format!("{site}/{server}")
                }
            }
            _ => site.to_owned(),
        }
    }
}

/// Parser and Enricher of one g-stream input, building its event columns. Everything it needs is
/// given when it is made (the compiled tier rules, the cache-group map, the sites' VOs, the
/// stream's GstreamState): it never calls into Python.
#[pyclass]
pub struct GstreamColumns {
    source: Py<PyAny>,
    origin: Py<PyAny>,
    empty: Py<PyAny>,
    /// the Enricher's `site` and `site_override`
    site: String,
    site_override: bool,
    /// `ctx.server`: the server of records before any header
    default_server: String,
    site_vo: FxHashMap<String, String>,
    tiers: Py<crate::python::PyPathTiers>,
    group_map: Groups,
    state: Py<GstreamState>,
    paths: FxHashMap<Box<str>, PathInfo>,
    strings: FxHashMap<Box<str>, Py<PyAny>>,
    groups: FxHashMap<(Box<str>, Box<str>), Py<PyAny>>,
    last: Option<Last>,
    cols: Columns,
    /// the next event's seq (the Enricher's counter while this one runs)
    #[pyo3(get, set)]
    seq: u64,
    /// events whose bytes were clamped to the file size
    #[pyo3(get)]
    clamped: u64,
}

impl GstreamColumns {
    fn string(&mut self, py: Python<'_>, s: &str) -> Py<PyAny> {
        if let Some(o) = self.strings.get(s) {
            return o.clone_ref(py);
        }
        let o = PyString::new(py, s).into_any().unbind();
        if self.strings.len() >= 100_000 {
            self.strings.clear();
        }
        self.strings.insert(s.into(), o.clone_ref(py));
        o
    }

    /// The path's info (from the cache, else the compiled classifier); None when the classifier
    /// leaves the path to Python (the line is declined).
    fn path_info(&mut self, py: Python<'_>, path: &str) -> Option<&PathInfo> {
        if !self.paths.contains_key(path) {
            let (norm, tier, vo) = self.tiers.get().inner.path_tier(path, None)?;
            let info = PathInfo {
                path: PyString::new(py, &norm).into_any().unbind(),
                file_id: xxhash_rust::xxh3::xxh3_64(norm.as_bytes()),
                tier: self.string(py, &tier),
                vo: if vo.is_empty() { None } else { Some(self.string(py, &vo)) },
            };
            if self.paths.len() >= PATH_CACHE_LIMIT {
                self.paths.clear();
            }
            self.paths.insert(path.into(), info);
        }
        self.paths.get(path)
    }

    fn group_of(&mut self, py: Python<'_>, site: &str, server: &str) -> Py<PyAny> {
        let key = (Box::<str>::from(site), Box::<str>::from(server));
        if let Some(g) = self.groups.get(&key) {
            return g.clone_ref(py);
        }
        let name = self.group_map.group_for(site, server);
        let g = self.string(py, &name);
        if self.groups.len() < 100_000 {
            self.groups.insert(key, g.clone_ref(py));
        }
        g
    }

    fn site_vo_of(&mut self, py: Python<'_>, site: &str) -> Py<PyAny> {
        match self.site_vo.get(site).cloned() {
            Some(v) => self.string(py, &v),
            None => self.empty.clone_ref(py),
        }
    }

    /// Enrich and append one close (as many events as it stands for); false when it declines
    /// (nothing appended, nothing remembered).
    fn add(&mut self, py: Python<'_>, c: &Close, st: &mut GstreamState) -> bool {
        let fallback: String;
        let server: &str = if !c.host.is_empty() {
            c.host
        } else if !st.host.is_empty() {
            st.host.as_str()
        } else {
            fallback = self.default_server.clone();
            &fallback
        };
        let rec_site = if !c.site.is_empty() { c.site } else { st.site.as_str() };
        let own_site: String;
        let site: &str = if self.site_override || rec_site.is_empty() {
            own_site = self.site.clone();
            &own_site
        } else {
            rec_site
        };
        let Some(info) = self.path_info(py, c.path) else { return false };
        let (path, file_id, tier) = (info.path.clone_ref(py), info.file_id, info.tier.clone_ref(py));
        let vo = info.vo.as_ref().map(|v| v.clone_ref(py));
        // consecutive records mostly share their site and server: their objects are kept
        let same = self.last.as_ref().is_some_and(|l| l.site == site && l.server == server);
        if !same {
            let last = Last {
                site: site.to_owned(),
                server: server.to_owned(),
                site_obj: self.string(py, site),
                server_obj: self.string(py, server),
                site_vo: self.site_vo_of(py, site),
                group: self.group_of(py, site, server),
            };
            self.last = Some(last);
        }
        let last = self.last.as_ref().expect("set above");
        let vo = vo.unwrap_or_else(|| last.site_vo.clone_ref(py));
        let (site_obj, server_obj, group) =
            (last.site_obj.clone_ref(py), last.server_obj.clone_ref(py), last.group.clone_ref(py));
        let n = match c.count {
            None => 1,
            Some(_) if !c.host.is_empty() => st.seen(c.host, c.path, c.count),
            Some(_) => {
                let server = server.to_owned(); // the header's server: a copy, as `seen` changes `st`
                st.seen(&server, c.path, c.count)
            }
        };
        for i in 0..n {
            // `_split`: each counter evenly, remainders to the first events
            let part = |x: u64| x / n + u64::from(i < x % n);
            let (hit, miss, bypass) = if n == 1 { (c.hit, c.miss, c.bypass) } else { (part(c.hit), part(c.miss), part(c.bypass)) };
            let served = if n == 1 { c.served } else { hit as u128 + miss as u128 + bypass as u128 };
            let origin = if n == 1 || c.origin < 0 { c.origin } else { part(c.origin as u64) as i64 };
            let mut nbytes = served;
            if nbytes > c.size as u128 {
                nbytes = c.size as u128;
                self.clamped += 1;
            }
            let nbytes = nbytes as u64;
            // `clamp_observed`: miss first, then bypass, then hit takes what is left
            let (hit, miss, bypass) = if served > nbytes as u128 {
                let miss = miss.min(nbytes);
                let bypass = bypass.min(nbytes - miss);
                (hit.min(nbytes - miss - bypass), miss, bypass)
            } else {
                (hit, miss, bypass)
            };
            let k = &mut self.cols;
            k.ts.push(c.ts as i64);
            k.site.push(site_obj.clone_ref(py));
            k.source.push(self.source.clone_ref(py));
            k.server.push(server_obj.clone_ref(py));
            k.client.push(self.empty.clone_ref(py));
            k.vo.push(vo.clone_ref(py));
            k.path.push(path.clone_ref(py));
            k.file_id.push(file_id);
            k.file_size.push(c.size);
            k.bytes_read.push(nbytes);
            k.op.push(0);
            k.tier.push(tier.clone_ref(py));
            k.cache_group.push(group.clone_ref(py));
            k.hit.push(hit as i64);
            k.miss.push(miss as i64);
            k.bypass.push(bypass as i64);
            k.verdict.push(c.verdict);
            k.origin_bytes.push(origin);
            k.duration.push(c.duration);
            k.origin.push(self.origin.clone_ref(py));
            k.seq.push(self.seq);
            self.seq += 1;
        }
        true
    }
}

#[pymethods]
impl GstreamColumns {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (source, origin, site, site_override, default_server, site_vo, tiers, groups, state))]
    fn new(
        py: Python<'_>,
        source: Py<PyAny>,
        origin: Py<PyAny>,
        site: String,
        site_override: bool,
        default_server: String,
        site_vo: FxHashMap<String, String>,
        tiers: Py<crate::python::PyPathTiers>,
        groups: (Vec<(String, String, String)>, String, String),
        state: Py<GstreamState>,
    ) -> PyResult<Self> {
        let (overrides, mode, region) = groups;
        if overrides.iter().any(|(server, site, _)| server.contains('[') || site.contains('[')) {
            return Err(pyo3::exceptions::PyValueError::new_err("cache-group globs with [...] are Python's"));
        }
        let overrides = overrides.into_iter().map(|(sv, st, g)| (sv.chars().collect(), st.chars().collect(), g)).collect();
        Ok(Self {
            source,
            origin,
            empty: PyString::new(py, "").into_any().unbind(),
            site,
            site_override,
            default_server,
            site_vo,
            tiers,
            group_map: Groups { overrides, mode, region },
            state,
            paths: FxHashMap::default(),
            strings: FxHashMap::default(),
            groups: FxHashMap::default(),
            last: None,
            cols: Columns::default(),
            seq: 0,
            clamped: 0,
        })
    }

    /// Take lines[start..] until one it declines: events go into the columns, skipped lines into
    /// `skips` as (index, reason), header state and access counts into the stream's GstreamState.
    /// Returns the declined line's index (len(lines) when none).
    fn scan<'py>(
        &mut self,
        py: Python<'py>,
        lines: &Bound<'py, PyList>,
        start: usize,
        skips: &Bound<'py, PyList>,
    ) -> PyResult<usize> {
        let n = lines.len();
        let state = self.state.clone_ref(py);
        let mut st = state.bind(py).borrow_mut();
        let mut i = start;
        while i < n {
            let item = lines.get_item(i)?;
            let Ok(s) = item.cast::<PyString>() else { break };
            let Ok(text) = s.to_str() else { break };
            let line = text.trim_end_matches(['\r', '\n']);
            match outcome(line) {
                None => break,
                Some(Outcome::ZeroBytes(path, h, cnt)) => {
                    let server = if !h.is_empty() {
                        h.to_owned()
                    } else if !st.host.is_empty() {
                        st.host.clone()
                    } else {
                        self.default_server.clone()
                    };
                    st.seen(&server, path, cnt);
                    skips.append((i, "cache access that served 0 bytes"))?
                }
                Some(Outcome::Header(h, site, ident)) => {
                    st.set_header(py, h, site);
                    let shown = if h.is_empty() { "?" } else { h };
                    let what = if ident { "XRootD server ident" } else { "g-stream packet header" };
                    skips.append((i, format!("{what} (server {shown})")))?;
                }
                Some(Outcome::Close(c)) => {
                    if !self.add(py, &c, &mut st) {
                        break;
                    }
                }
            }
            i += 1;
        }
        Ok(i)
    }

    /// Append an event made by the Python path (an AccessEvent), in input order.
    fn push(&mut self, py: Python<'_>, ev: &Bound<'_, PyAny>) -> PyResult<()> {
        let text = |name: &str| -> PyResult<Py<PyAny>> {
            let v = ev.getattr(name)?;
            Ok(if v.is_truthy()? { v.unbind() } else { self.empty.clone_ref(py) })
        };
        let flag = |name: &str| -> PyResult<i8> {
            let v = ev.getattr(name)?;
            if v.is_none() {
                Ok(-1)
            } else {
                v.extract::<i8>()
            }
        };
        let observed = |name: &str| -> PyResult<i64> {
            let v = ev.getattr(name)?;
            if v.is_none() {
                Ok(-1)
            } else {
                v.extract::<i64>()
            }
        };
        let op = match ev.getattr("op")?.extract::<String>()?.as_str() {
            "read" => 0u8,
            "write" => 1,
            "delete" => 2,
            other => return Err(pyo3::exceptions::PyValueError::new_err(format!("op {other:?} is not one of read, write, delete"))),
        };
        let row = (
            ev.getattr("ts")?.extract::<i64>()?,
            [text("site")?, text("source")?, text("server")?, text("client")?, text("vo")?, text("path")?],
            [ev.getattr("file_id")?.extract::<u64>()?, ev.getattr("file_size")?.extract::<u64>()?,
             ev.getattr("bytes_read")?.extract::<u64>()?],
            [text("tier")?, text("cache_group")?],
            [observed("observed_hit_bytes")?, observed("observed_miss_bytes")?, observed("observed_bypass_bytes")?],
            flag("observed_hit")?,
            observed("observed_origin_bytes")?,
            text("origin")?,
            ev.getattr("seq")?.extract::<u64>()?,
            observed("duration_us")?,
        );
        let (ts, [site, source, server, client, vo, path], [file_id, size, nbytes], [tier, group], [h, m, b], v, o, origin, seq, dur) =
            row;
        let k = &mut self.cols;
        k.ts.push(ts);
        k.site.push(site);
        k.source.push(source);
        k.server.push(server);
        k.client.push(client);
        k.vo.push(vo);
        k.path.push(path);
        k.file_id.push(file_id);
        k.file_size.push(size);
        k.bytes_read.push(nbytes);
        k.op.push(op);
        k.tier.push(tier);
        k.cache_group.push(group);
        k.hit.push(h);
        k.miss.push(m);
        k.bypass.push(b);
        k.verdict.push(v);
        k.origin_bytes.push(o);
        k.duration.push(dur);
        k.origin.push(origin);
        k.seq.push(seq);
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.cols.ts.len()
    }

    /// The columns so far (EventColumns' fields), emptied here.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let k = std::mem::take(&mut self.cols);
        let d = PyDict::new(py);
        d.set_item("ts", PyArray1::from_vec(py, k.ts))?;
        d.set_item("site", PyArray1::from_vec(py, k.site))?;
        d.set_item("source", PyArray1::from_vec(py, k.source))?;
        d.set_item("server", PyArray1::from_vec(py, k.server))?;
        d.set_item("client", PyArray1::from_vec(py, k.client))?;
        d.set_item("vo", PyArray1::from_vec(py, k.vo))?;
        d.set_item("path", PyArray1::from_vec(py, k.path))?;
        d.set_item("file_id", PyArray1::from_vec(py, k.file_id))?;
        d.set_item("file_size", PyArray1::from_vec(py, k.file_size))?;
        d.set_item("bytes_read", PyArray1::from_vec(py, k.bytes_read))?;
        d.set_item("op", PyArray1::from_vec(py, k.op))?;
        d.set_item("tier", PyArray1::from_vec(py, k.tier))?;
        d.set_item("cache_group", PyArray1::from_vec(py, k.cache_group))?;
        d.set_item("observed_hit_bytes", PyArray1::from_vec(py, k.hit))?;
        d.set_item("observed_miss_bytes", PyArray1::from_vec(py, k.miss))?;
        d.set_item("observed_bypass_bytes", PyArray1::from_vec(py, k.bypass))?;
        d.set_item("observed_hit", PyArray1::from_vec(py, k.verdict))?;
        d.set_item("observed_origin_bytes", PyArray1::from_vec(py, k.origin_bytes))?;
        d.set_item("origin", PyArray1::from_vec(py, k.origin))?;
        d.set_item("seq", PyArray1::from_vec(py, k.seq))?;
        d.set_item("duration_us", PyArray1::from_vec(py, k.duration))?;
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_close_and_declines_what_python_must_word() {
        let line = r#"{"event":"file_close","lfn":"/a/b","size":10,"b_hit":3,"b_miss":4,"attach_t":1704067232,"remotes":["x:1"],"n":{"a":[1,2]}}"#;
        let Some(Outcome::Close(c)) = outcome(line) else { panic!("not taken") };
        assert_eq!((c.ts, c.path, c.size, c.served), (1_704_067_232_000_000, "/a/b", 10, 7));
        for bad in [
            r#"{"event":"file_close","lfn":"/a","size":1.5,"b_hit":3,"attach_t":1}"#,
            r#"{"event":"file_close","lfn":"/a","size":1,"b_hit":3,"attach_t":-1}"#,
            r#"{"event":"file_close","lfn":"/a","lfn":"/b","size":1,"b_hit":3,"attach_t":1}"#,
            r#"{"event":"file_close","lfn":"/a\n","size":1,"b_hit":3,"attach_t":1}"#,
            r#"{"event":"file_close","lfn":"/a","size":01,"b_hit":3,"attach_t":1}"#,
            r#"{"event":"file_close","lfn":"/a","size":1,"b_hit":3,"attach_t":1} "#,
            r#"{"event":"open","lfn":"/a"}"#,
        ] {
            assert!(outcome(bad).is_none(), "{bad}");
        }
        let Some(Outcome::Header(h, s, false)) = outcome(r#"{"code":"g","src":{"site":"S","host":"h1","port":1}}"#) else {
            panic!()
        };
        assert_eq!((h, s), ("h1", "S"));
        let Some(Outcome::Header(h, _, true)) = outcome(r#"{"code":"=","src":{"host":"h2","pgm":"xrootd"}}"#) else {
            panic!("the server ident is a header")
        };
        assert_eq!(h, "h2");
    }

    #[test]
    fn the_verdict_is_whether_anything_came_from_the_origin() {
        let verdict = |tail: &str| match outcome(&format!(r#"{{"event":"file_close","lfn":"/a","size":9,"b_hit":9,"attach_t":5{tail}}}"#)) {
            Some(Outcome::Close(c)) => Some(c.verdict),
            _ => None,
        };
        assert_eq!(verdict(r#","remotes":[]"#), Some(1));
        assert_eq!(verdict(r#","remotes":["o:1094"]"#), Some(0));
        assert_eq!(verdict(r#","remotes":[],"b_todisk":0,"b_prefetch":0"#), Some(1));
        assert_eq!(verdict(r#","remotes":[],"b_todisk":4"#), Some(0));
        assert_eq!(verdict(r#","remotes":[],"b_miss":1"#), Some(0));
        assert_eq!(verdict(""), Some(-1));
        assert_eq!(verdict(r#","remotes":"x""#), Some(-1));
        assert_eq!(verdict(r#","b_todisk":"4""#), None); // Python converts or rejects it
    }

    #[test]
    fn the_origin_bytes_are_todisk_and_bypass() {
        let origin = |tail: &str| match outcome(&format!(r#"{{"event":"file_close","lfn":"/a","size":9,"b_hit":9,"attach_t":5{tail}}}"#)) {
            Some(Outcome::Close(c)) => Some(c.origin),
            _ => None,
        };
        assert_eq!(origin(r#","remotes":["o:1"]"#), Some(-1)); // 5.5: no b_todisk, not known
        assert_eq!(origin(r#","remotes":["o:1"],"b_todisk":1048576,"b_bypass":3"#), Some(1048579)); // prefetch: above bytes read
        assert_eq!(origin(r#","remotes":[],"b_todisk":0,"b_prefetch":0"#), Some(0));
        assert_eq!(origin(r#","b_todisk":9223372036854775807,"b_bypass":1"#), None); // beyond int64: Python rejects it
    }
}
