//! dCache billing fast path in compiled code: `_fast` of `ingest/formats/dcache_billing.py`
//! (transfer and door lines of the default templates) over a block of lines, without the
//! interpreter's per-operation cost. Same lines accepted as its two regexes `_FAST_MOVER` and
//! `_FAST_DOOR` (matched here by hand: every part of them is deterministic, see `mover_fields`),
//! same events, same skip reasons, same pnfsid -> path memo writes, in line order. A line it
//! cannot decide exactly as `_fast` does (no match, negative or huge numbers, Unknown path
//! without pnfsid, a date the Python side rejects, undecodable text) is declined: `scan` stops
//! there, before any side effect of that line, and Python parses it, then calls `scan` again.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

#[pyclass(frozen)]
pub struct BillingFast {}

/// A cursor over a line's bytes; each step is one part of the regexes, which never backtrack
/// into a finished part: every run of a class stops at a byte the next literal needs and the
/// class excludes, and the storage part's two alternatives cannot both match (see `storage`).
struct Cur<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    fn lit(&mut self, l: &[u8]) -> Option<()> {
        if self.s[self.i..].starts_with(l) {
            self.i += l.len();
            return Some(());
        }
        None
    }
    fn run(&mut self, f: impl Fn(u8) -> bool) -> (usize, usize) {
        let a = self.i;
        while self.i < self.s.len() && f(self.s[self.i]) {
            self.i += 1;
        }
        (a, self.i)
    }
    fn run1(&mut self, f: impl Fn(u8) -> bool) -> Option<(usize, usize)> {
        let r = self.run(f);
        (r.1 > r.0).then_some(r)
    }
    /// `-?[0-9]+`
    fn int(&mut self) -> Option<(usize, usize)> {
        let a = self.i;
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let (d0, d1) = self.run(|b| b.is_ascii_digit());
        (d1 > d0).then_some((a, d1))
    }
    /// `[0-9]{2}\.[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}`
    fn date(&mut self) -> Option<(usize, usize)> {
        let d = self.s.get(self.i..self.i + 14)?;
        for (k, &b) in d.iter().enumerate() {
            let ok = match k {
                2 => b == b'.',
                5 => b == b' ',
                8 | 11 => b == b':',
                _ => b.is_ascii_digit(),
            };
            if !ok {
                return None;
            }
        }
        self.i += 14;
        Some((self.i - 14, self.i))
    }
    /// `(?:[!-?A-~]*@[!-~]*|<Unknown>) `: the first alternative needs an '@' that `<Unknown>`
    /// lacks and ends at the first space, so at most one of them matches.
    fn storage(&mut self) -> Option<()> {
        let start = self.i;
        self.run(|b| (b'!'..=b'?').contains(&b) || (b'A'..=b'~').contains(&b));
        if self.lit(b"@").is_some() {
            self.run(|b| (b'!'..=b'~').contains(&b));
            if self.lit(b" ").is_some() {
                return Some(());
            }
        }
        self.i = start;
        self.lit(b"<Unknown> ")
    }
    /// `\{(-?[0-9]+):"(.*)"\}` to the end: rc and message (`.*` greedy: up to the last `"}`).
    fn rc(&mut self) -> Option<((usize, usize), (usize, usize))> {
        self.lit(b"{")?;
        let rc = self.int()?;
        self.lit(b":\"")?;
        let rest = &self.s[self.i..];
        if !rest.ends_with(b"\"}") || rest[..rest.len() - 2].contains(&b'\n') {
            return None;
        }
        Some((rc, (self.i, self.s.len() - 2)))
    }
    /// `\[CELL:(CELL):([A-Za-z-]+)\] \[` after the date: the cell and the message type.
    fn head(&mut self) -> Option<((usize, usize), (usize, usize))> {
        self.lit(b" [")?;
        self.run1(cell)?;
        self.lit(b":")?;
        let name = self.run1(cell)?;
        self.lit(b":")?;
        let mtype = self.run1(|b| b.is_ascii_alphabetic() || b == b'-')?;
        self.lit(b"] [")?;
        Some((name, mtype))
    }
    /// `([0-9A-Fa-f]*),(-?[0-9]+)\] \[([^\]\n]*)\] STORAGE `: pnfsid, filesize, path.
    fn file(&mut self) -> Option<[(usize, usize); 3]> {
        let pnfsid = self.run(|b| b.is_ascii_hexdigit());
        self.lit(b",")?;
        let size = self.int()?;
        self.lit(b"] [")?;
        let path = self.run(|b| b != b']' && b != b'\n');
        self.lit(b"] ")?;
        self.storage()?;
        Some([pnfsid, size, path])
    }
}

/// `[!-9;-\\^-~]`: printable ASCII but space, ':' and ']'
fn cell(b: u8) -> bool {
    (b'!'..=b'~').contains(&b) && b != b':' && b != b']'
}

/// `_FAST_MOVER`'s groups but the type: date, cell, pnfsid, filesize, path, transferred,
/// created, protocol, initiator, rc, message, connectionTime.
fn mover_fields(line: &str) -> Option<[&str; 12]> {
    let mut c = Cur { s: line.as_bytes(), i: 0 };
    let date = c.date()?;
    let (cell, _) = c.head()?;
    let [pnfsid, size, path] = c.file()?;
    let moved = c.int()?;
    c.lit(b" ")?;
    let connection = c.int()?;
    c.lit(b" ")?;
    let created = if c.lit(b"true").is_some() {
        "true"
    } else {
        c.lit(b"false")?;
        "false"
    };
    c.lit(b" {")?;
    let protocol = c.run(|b| b != b'}');
    c.lit(b"} [")?;
    let initiator = c.run(|b| b != b']');
    c.lit(b"] ")?;
    let (rc, message) = c.rc()?;
    let g = |(a, b): (usize, usize)| line.get(a..b);
    Some([g(date)?, g(cell)?, g(pnfsid)?, g(size)?, g(path)?, g(moved)?, created, g(protocol)?, g(initiator)?,
          g(rc)?, g(message)?, g(connection)?])
}

/// `_FAST_DOOR`'s groups: date, type, clientChain, pnfsid, path, rc, message.
fn door_fields(line: &str) -> Option<[&str; 7]> {
    let mut c = Cur { s: line.as_bytes(), i: 0 };
    let date = c.date()?;
    let (_, mtype) = c.head()?;
    c.lit(b"\"")?;
    c.run(|b| b != b'"');
    c.lit(b"\":")?;
    c.int()?;
    c.lit(b":")?;
    c.int()?;
    c.lit(b":")?;
    let chain = c.run(|b| b != b']');
    c.lit(b"] [")?;
    let [pnfsid, _, path] = c.file()?;
    c.int()?;
    c.lit(b" ")?;
    c.int()?;
    c.lit(b" ")?;
    let (rc, message) = c.rc()?;
    let g = |(a, b): (usize, usize)| line.get(a..b);
    Some([g(date)?, g(mtype)?, g(chain)?, g(pnfsid)?, g(path)?, g(rc)?, g(message)?])
}

/// Python's `int(text)` for `-?[0-9]+`, or None when it leaves i64 (then Python decides).
fn int(text: &str) -> Option<i64> {
    text.parse::<i64>().ok()
}

/// `client_of_protocol`'s first branch (`Xrootd-5.0:host:port`); None: ask Python.
fn client_simple(protocol: &str) -> Option<&str> {
    let (head, rest) = protocol.split_once(':')?;
    if rest.bytes().filter(|&b| b == b':').count() == 1 && head.contains('-') {
        return Some(rest.split_once(':').map_or(rest, |(h, _)| h));
    }
    None
}

/// One `scan` call's state and Python callbacks, shared by the mover and door lines.
struct Ctx<'a, 'py> {
    memo: &'a Bound<'py, PyDict>,
    memo_limit: usize,
    dates: &'a Bound<'py, PyDict>,
    client_of: &'a Bound<'py, PyAny>,
    access: &'a Bound<'py, PyAny>,
    skip: &'a Bound<'py, PyAny>,
    door_request: &'a Bound<'py, PyAny>,
    zero_read: &'a Bound<'py, PyAny>,
    ts_mover: &'a Bound<'py, PyAny>,
    ts_door: &'a Bound<'py, PyAny>,
}

impl<'py> Ctx<'_, 'py> {
    fn remember(&self, pnfsid: &str, path: &str) -> PyResult<()> {
        if self.memo.len() >= self.memo_limit {
            self.memo.clear();
        }
        self.memo.set_item(pnfsid, path)
    }

    /// `_resolve_path` without its memo write: the path to use, or None for "" (no pnfsid).
    fn resolve(&self, py: Python<'py>, path: &str, pnfsid: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        if !path.is_empty() && path != "Unknown" {
            return Ok(Some(PyString::new(py, path).into_any()));
        }
        if pnfsid.is_empty() {
            return Ok(None);
        }
        if let Some(known) = self.memo.get_item(pnfsid)? {
            return Ok(Some(known));
        }
        Ok(Some(PyString::new(py, &format!("pnfsid:{pnfsid}")).into_any()))
    }

    /// The cached date, else `ts_fn(date)`; None when that raises (Python redoes the line).
    fn ts(&self, date: &str, ts_fn: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if let Some(us) = self.dates.get_item(date)? {
            if !us.is_none() {
                return Ok(Some(us));
            }
        }
        Ok(ts_fn.call1((date,)).ok())
    }
}

#[pymethods]
impl BillingFast {
    #[new]
    fn new() -> Self {
        Self {}
    }

    /// Results (Access / Reject objects) of lines[start..] appended to `out`, one per line,
    /// until a line it declines: returns that line's index (len(lines) when none).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (lines, start, out, memo, memo_limit, dates, ts_mover, ts_door, client_of, access, skip,
                        door_request, zero_read))]
    fn scan<'py>(
        &self,
        py: Python<'py>,
        lines: &Bound<'py, PyList>,
        start: usize,
        out: &Bound<'py, PyList>,
        memo: &Bound<'py, PyDict>,
        memo_limit: usize,
        dates: &Bound<'py, PyDict>,
        ts_mover: &Bound<'py, PyAny>,
        ts_door: &Bound<'py, PyAny>,
        client_of: &Bound<'py, PyAny>,
        access: &Bound<'py, PyAny>,
        skip: &Bound<'py, PyAny>,
        door_request: &Bound<'py, PyAny>,
        zero_read: &Bound<'py, PyAny>,
    ) -> PyResult<usize> {
        let ctx = Ctx { memo, memo_limit, dates, client_of, access, skip, door_request, zero_read, ts_mover, ts_door };
        let n = lines.len();
        for i in start..n {
            let item = lines.get_item(i)?;
            let Ok(s) = item.cast::<PyString>() else { return Ok(i) };
            let Ok(text) = s.to_str() else { return Ok(i) };
            let line = text.trim_end_matches(['\r', '\n']);
            let mover = if line.contains(":request] [\"") { None } else { mover_fields(line) };
            let result = if let Some(f) = mover {
                ctx.mover_line(py, f)?
            } else if let Some(f) = door_fields(line) {
                ctx.door_line(py, f)?
            } else {
                None
            };
            match result {
                Some(r) => out.append(r)?,
                None => return Ok(i),
            }
        }
        Ok(n)
    }
}

impl<'py> Ctx<'_, 'py> {
    /// A mover line's Access or Reject; None: Python decides.
    fn mover_line(&self, py: Python<'py>, f: [&str; 12]) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Ctx { client_of, access, skip, zero_read, .. } = *self;
        let [date, cell, pnfsid, filesize, path, transferred, created, protocol, initiator, rc, message, connection] = f;
        if rc != "0" {
            return skip.call1((format!("failed transfer (rc={rc}: {message})"),)).map(Some);
        }
        if initiator.starts_with("pool:") {
            return skip.call1((format!("pool-to-pool copy (initiator {initiator})"),)).map(Some);
        }
        let (Some(transferred), Some(filesize)) = (int(transferred), int(filesize)) else { return Ok(None) };
        if transferred < 0 || filesize < 0 {
            return Ok(None); // BadRecord: Python words it
        }
        let learn = !path.is_empty() && path != "Unknown" && !pnfsid.is_empty();
        let Some(path_obj) = self.resolve(py, path, pnfsid)? else { return Ok(None) };
        let Some(ts) = self.ts(date, self.ts_mover)? else { return Ok(None) };
        if learn {
            self.remember(pnfsid, path)?;
        }
        let server = cell.split_once('@').map_or(cell, |(s, _)| s);
        let client = match client_simple(protocol) {
            Some(c) => PyString::new(py, c).into_any(),
            None => client_of.call1((protocol,))?,
        };
        // `_duration_us`: the mover's connectionTime (ms), not known when negative
        let kw = pyo3::types::PyDict::new(py);
        if let Some(ms) = int(connection).filter(|&ms| ms >= 0 && ms <= i64::MAX / 1000) {
            kw.set_item("duration_us", ms * 1000)?;
        }
        if created == "true" {
            let size = if filesize >= transferred { filesize } else { transferred };
            return access.call((ts, path_obj, size, transferred, "write", server, client), Some(&kw)).map(Some);
        }
        if transferred == 0 {
            return Ok(Some(zero_read.clone()));
        }
        access.call((ts, path_obj, filesize, transferred, "read", server, client), Some(&kw)).map(Some)
    }

    /// A door line's Access or Reject; None: Python decides.
    fn door_line(&self, py: Python<'py>, f: [&str; 7]) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Ctx { access, skip, door_request, .. } = *self;
        let [date, mtype, chain, pnfsid, path, rc, message] = f;
        let learn = !pnfsid.is_empty() && !path.is_empty() && path != "Unknown";
        if mtype == "remove" {
            if rc != "0" {
                return skip.call1((format!("failed removal (rc={rc}: {message})"),)).map(Some);
            }
            let resolved = self.resolve(py, path, pnfsid)?;
            let unseen = match &resolved {
                None => true,
                Some(p) => p.cast::<PyString>().map_or(true, |s| s.to_str().map_or(true, |t| t.starts_with("pnfsid:"))),
            };
            if unseen {
                if learn {
                    self.remember(pnfsid, path)?;
                }
                let id = if pnfsid.is_empty() { "?" } else { pnfsid };
                return skip
                    .call1((format!("removal of a file whose path was never seen (pnfsid {id})"),))
                    .map(Some);
            }
            let Some(ts) = self.ts(date, self.ts_door)? else { return Ok(None) };
            if learn {
                self.remember(pnfsid, path)?;
            }
            let client = if chain != "unknown" { chain.split_once(',').map_or(chain, |(c, _)| c) } else { "" };
            return access.call1((ts, resolved, 0, 0, "delete", "", client)).map(Some);
        }
        if learn {
            self.remember(pnfsid, path)?;
        }
        if mtype == "request" {
            return Ok(Some(door_request.clone()));
        }
        skip.call1((format!("door {mtype} (the pool's transfer record carries the bytes)"),)).map(Some)
    }
}
