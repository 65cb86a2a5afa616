//! The simulator's CSV trace: header `timestamp,obj_id,obj_size[,tier,path][,bytes_read]`
//! (columns found by name), one whole-object read per row unless bytes_read is given.
//! Errors name the line (1-based, the header is line 1) and the column.

use std::collections::HashMap;

#[derive(Default, Debug)]
pub struct Trace {
    pub timestamp: Vec<f64>,
    pub id: Vec<u64>,
    pub size: Vec<u64>,
    pub bytes_read: Vec<u64>,
    pub tier: Vec<u8>,
    /// tier code -> name, in order of first appearance
    pub tier_names: Vec<String>,
}

fn split_fields(line: &[u8], out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut i = 0;
    let n = line.len();
    loop {
        if i < n && line[i] == b'"' {
            let start = i + 1;
            let mut j = start;
            while j < n && line[j] != b'"' {
                j += 1;
            }
            out.push((start, j));
            i = (j + 1).min(n);
            while i < n && line[i] != b',' {
                i += 1;
            }
        } else {
            let start = i;
            while i < n && line[i] != b',' {
                i += 1;
            }
            out.push((start, i));
        }
        if i >= n {
            break;
        }
        i += 1; // skip the comma
        if i == n {
            out.push((n, n));
            break;
        }
    }
}

fn field<'a>(line: &'a [u8], span: (usize, usize)) -> &'a [u8] {
    let s = &line[span.0..span.1];
    let s = s.strip_prefix(b" ").unwrap_or(s);
    s.strip_suffix(b" ").unwrap_or(s)
}

#[inline]
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s.len() < 20 {
        // at most 19 digits cannot overflow: no checked arithmetic
        let mut v: u64 = 0;
        for &b in s {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + d as u64;
        }
        return Some(v);
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(v)
}

/// Columns of a batch of rows (or of a whole trace).
#[derive(Default, Debug)]
pub struct Columns {
    pub timestamp: Vec<f64>,
    pub id: Vec<u64>,
    pub size: Vec<u64>,
    pub bytes_read: Vec<u64>,
    pub tier: Vec<u8>,
}

impl Columns {
    pub fn with_capacity(n: usize) -> Self {
        Columns {
            timestamp: Vec::with_capacity(n),
            id: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            bytes_read: Vec::with_capacity(n),
            tier: Vec::with_capacity(n),
        }
    }
    pub fn len(&self) -> usize {
        self.id.len()
    }
    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }
    pub fn append(&mut self, other: &mut Columns) {
        self.timestamp.append(&mut other.timestamp);
        self.id.append(&mut other.id);
        self.size.append(&mut other.size);
        self.bytes_read.append(&mut other.bytes_read);
        self.tier.append(&mut other.tier);
    }
}

/// Parses the CSV trace a piece at a time (whole lines), keeping line numbers and tier codes
/// across pieces, so a reader can stream a trace of any length.
pub struct CsvParser {
    names: Vec<String>,
    c_ts: usize,
    c_id: usize,
    c_size: usize,
    c_tier: Option<usize>,
    c_read: Option<usize>,
    tier_codes: HashMap<Vec<u8>, u8>,
    /// tier code -> name, in order of first appearance
    pub tier_names: Vec<String>,
    /// 1-based number of the last line parsed (the header is line 1)
    pub lineno: usize,
    spans: Vec<(usize, usize)>,
}

impl CsvParser {
    /// From the header line (without its newline).
    pub fn new(header: &[u8]) -> Result<Self, String> {
        let header = String::from_utf8_lossy(header.strip_suffix(b"\r").unwrap_or(header)).to_string();
        let names: Vec<String> = header.split(',').map(|s| s.trim().to_ascii_lowercase()).collect();
        let col = |n: &str| names.iter().position(|c| c == n);
        let (Some(c_ts), Some(c_id), Some(c_size)) = (col("timestamp"), col("obj_id"), col("obj_size")) else {
            return Err(format!(
                "line 1: header {header:?} must name timestamp,obj_id,obj_size[,tier,path][,bytes_read]"
            ));
        };
        let (c_tier, c_read) = (col("tier"), col("bytes_read"));
        let tier_names = if c_tier.is_none() { vec!["UNKNOWN".to_string()] } else { Vec::new() };
        Ok(CsvParser {
            names,
            c_ts,
            c_id,
            c_size,
            c_tier,
            c_read,
            tier_codes: HashMap::new(),
            tier_names,
            lineno: 1,
            spans: Vec::with_capacity(8),
        })
    }

    /// Parse whole lines (`data` ends at a line end, or is the end of the trace) into `out`.
    pub fn parse(&mut self, data: &[u8], out: &mut Columns) -> Result<(), String> {
        let mut rest = data;
        while !rest.is_empty() {
            let (raw, next) = match memchr::memchr(b'\n', rest) {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            rest = next;
            self.lineno += 1;
            self.line(raw, out)?;
        }
        Ok(())
    }

    #[inline]
    fn line(&mut self, raw: &[u8], out: &mut Columns) -> Result<(), String> {
        let lineno = self.lineno;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        // all-numeric rows (no tier or path column): one pass over the bytes; anything unusual
        // (spaces, quotes, signs, decimals, 20 digits, a bad bytes_read) takes the general path
        if self.c_tier.is_none() && self.names.len() <= FAST_COLS {
            let mut v = [0u64; FAST_COLS];
            if all_digits(line, self.names.len(), &mut v) {
                let size = v[self.c_size];
                let read = self.c_read.map_or(size, |c| v[c]);
                if read <= size {
                    out.timestamp.push(v[self.c_ts] as f64);
                    out.id.push(v[self.c_id]);
                    out.size.push(size);
                    out.bytes_read.push(read);
                    out.tier.push(0);
                    return Ok(());
                }
            }
        }
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            return Ok(());
        }
        if memchr::memchr(b'"', line).is_none() {
            // no quoting: fields end at commas (the common case, found with memchr)
            self.spans.clear();
            let mut start = 0;
            for i in memchr::memchr_iter(b',', line) {
                self.spans.push((start, i));
                start = i + 1;
            }
            self.spans.push((start, line.len()));
        } else {
            split_fields(line, &mut self.spans);
        }
        let spans = &self.spans;
        let n_names = self.names.len();
        let get = |c: usize, name: &str| -> Result<&[u8], String> {
            spans.get(c).map(|&sp| field(line, sp)).ok_or_else(|| {
                format!("line {lineno}: missing column {name} (row has {} fields, header {})", spans.len(), n_names)
            })
        };
        let ts_s = get(self.c_ts, "timestamp")?;
        let ts = parse_ts(ts_s).ok_or_else(|| format!("line {lineno}: timestamp {:?} is not a number", String::from_utf8_lossy(ts_s)))?;
        let id_s = get(self.c_id, "obj_id")?;
        let id = parse_u64(id_s).ok_or_else(|| {
            format!("line {lineno}: obj_id {:?} is not an unsigned 64-bit integer", String::from_utf8_lossy(id_s))
        })?;
        let size_s = get(self.c_size, "obj_size")?;
        let size = parse_u64(size_s).ok_or_else(|| {
            format!("line {lineno}: obj_size {:?} is not an unsigned 64-bit integer", String::from_utf8_lossy(size_s))
        })?;
        let read = match self.c_read {
            Some(c) => {
                let s = get(c, "bytes_read")?;
                let r = parse_u64(s).ok_or_else(|| {
                    format!("line {lineno}: bytes_read {:?} is not an unsigned 64-bit integer", String::from_utf8_lossy(s))
                })?;
                if r > size {
                    return Err(format!("line {lineno}: bytes_read {r} exceeds obj_size {size}"));
                }
                r
            }
            None => size,
        };
        let tier = match self.c_tier {
            Some(c) => {
                let name = get(c, "tier")?;
                let name = if name.is_empty() { &b"UNKNOWN"[..] } else { name };
                match self.tier_codes.get(name) {
                    Some(&code) => code,
                    None => {
                        if self.tier_names.len() == 256 {
                            return Err(format!("line {lineno}: more than 256 distinct tiers"));
                        }
                        let code = self.tier_names.len() as u8;
                        self.tier_names.push(String::from_utf8_lossy(name).into_owned());
                        self.tier_codes.insert(name.to_vec(), code);
                        code
                    }
                }
            }
            None => 0,
        };
        out.timestamp.push(ts);
        out.id.push(id);
        out.size.push(size);
        out.bytes_read.push(read);
        out.tier.push(tier);
        Ok(())
    }
}

const FAST_COLS: usize = 8;

/// `line` is exactly `n` comma-separated fields of 1 to 19 ASCII digits; their values in `out`.
#[inline]
fn all_digits(line: &[u8], n: usize, out: &mut [u64; FAST_COLS]) -> bool {
    let (mut f, mut v, mut digits) = (0usize, 0u64, 0u32);
    for &b in line {
        if b == b',' {
            if digits == 0 || f + 1 >= n {
                return false;
            }
            out[f] = v;
            f += 1;
            v = 0;
            digits = 0;
        } else {
            let d = b.wrapping_sub(b'0');
            if d > 9 || digits == 19 {
                return false;
            }
            v = v * 10 + d as u64;
            digits += 1;
        }
    }
    if digits == 0 || f + 1 != n {
        return false;
    }
    out[f] = v;
    true
}

/// Timestamps are mostly plain integers: parse those without the float parser.
#[inline]
fn parse_ts(s: &[u8]) -> Option<f64> {
    if let Some(v) = parse_u64(s) {
        return Some(v as f64);
    }
    std::str::from_utf8(s).ok().and_then(|s| s.parse::<f64>().ok()).filter(|v| v.is_finite())
}

pub fn parse_csv(data: &[u8]) -> Result<Trace, String> {
    let (header, body) = match memchr::memchr(b'\n', data) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    if data.is_empty() {
        return Err("line 1: empty trace, expected a header".into());
    }
    let mut parser = CsvParser::new(header)?;
    let mut cols = Columns::with_capacity(data.len() / 60);
    parser.parse(body, &mut cols)?;
    Ok(Trace {
        timestamp: cols.timestamp,
        id: cols.id,
        size: cols.size,
        bytes_read: cols.bytes_read,
        tier: cols.tier,
        tier_names: parser.tier_names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_columns_by_name_and_quoted_paths() {
        let t = parse_csv(
            b"timestamp,obj_id,obj_size,tier,path,bytes_read\n1,18446744073709551615,100,AOD,\"/a,b\",40\n2,7,6000000000,HITS,/x,6000000000\n\n",
        )
        .unwrap();
        assert_eq!(t.id, vec![u64::MAX, 7]);
        assert_eq!(t.size, vec![100, 6_000_000_000]);
        assert_eq!(t.bytes_read, vec![40, 6_000_000_000]);
        assert_eq!(t.tier_names, vec!["AOD", "HITS"]);
    }

    #[test]
    fn numeric_fast_path_agrees_with_the_general_one() {
        // the same rows with and without something that forces the general path (a space)
        let fast = parse_csv(b"timestamp,obj_id,bytes_read,obj_size\n1,7,5,10\n2,18446744073709551615,3,3\n3,9,0,12\n").unwrap();
        let slow = parse_csv(b"timestamp,obj_id,bytes_read,obj_size\n1, 7,5,10\n2,18446744073709551615,3,3\n3,9, 0,12\n").unwrap();
        for t in [&fast, &slow] {
            assert_eq!(t.id, vec![7, u64::MAX, 9]);
            assert_eq!(t.size, vec![10, 3, 12]);
            assert_eq!(t.bytes_read, vec![5, 3, 0]);
            assert_eq!(t.timestamp, vec![1.0, 2.0, 3.0]);
        }
        let e = parse_csv(b"timestamp,obj_id,obj_size,bytes_read\n1,2,3,4\n").unwrap_err();
        assert!(e.starts_with("line 2: bytes_read 4 exceeds"), "{e}");
        let e = parse_csv(b"timestamp,obj_id,obj_size\n1,2\n").unwrap_err();
        assert!(e.starts_with("line 2: missing column obj_size"), "{e}");
        let e = parse_csv(b"timestamp,obj_id,obj_size\n1,2,3,4\n").unwrap();
        assert_eq!(e.size, vec![3]); // extra fields are ignored, as before
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse_csv(b"timestamp,obj_id,obj_size\n1,2,3\n4,x5,6\n").unwrap_err();
        assert_eq!(e, "line 3: obj_id \"x5\" is not an unsigned 64-bit integer");
        let e = parse_csv(b"timestamp,obj_id,obj_size,bytes_read\n1,2,3,4\n").unwrap_err();
        assert!(e.starts_with("line 2: bytes_read 4 exceeds"), "{e}");
        let e = parse_csv(b"ts,id\n").unwrap_err();
        assert!(e.starts_with("line 1: header"), "{e}");
    }
}
