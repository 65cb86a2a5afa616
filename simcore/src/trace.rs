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
    /// Dense file keys (0, 1, 2, … in order of first appearance), when the reader was asked.
    pub key: Vec<u64>,
}

impl Columns {
    pub fn with_capacity(n: usize) -> Self {
        Columns {
            timestamp: Vec::with_capacity(n),
            id: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            bytes_read: Vec::with_capacity(n),
            tier: Vec::with_capacity(n),
            key: Vec::new(),
        }
    }
    /// One row (the dense keys are filled apart, by the reader).
    #[inline(always)]
    pub fn push(&mut self, timestamp: f64, id: u64, size: u64, bytes_read: u64, tier: u8) {
        self.timestamp.push(timestamp);
        self.id.push(id);
        self.size.push(size);
        self.bytes_read.push(bytes_read);
        self.tier.push(tier);
    }
    pub fn len(&self) -> usize {
        self.id.len()
    }
    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }
    pub fn clear(&mut self) {
        self.timestamp.clear();
        self.id.clear();
        self.size.clear();
        self.bytes_read.clear();
        self.tier.clear();
        self.key.clear();
    }
    pub fn append(&mut self, other: &mut Columns) {
        self.timestamp.append(&mut other.timestamp);
        self.id.append(&mut other.id);
        self.size.append(&mut other.size);
        self.bytes_read.append(&mut other.bytes_read);
        self.tier.append(&mut other.tier);
        self.key.append(&mut other.key);
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
        let n = data.len();
        // all-numeric rows (no tier or path column) are read straight off the buffer, eight
        // bytes at a time; a row the fast reader does not take (spaces, quotes, signs,
        // decimals, extra fields, a bad bytes_read...) goes through `line`, which also words
        // the errors
        let fast = self.c_tier.is_none() && self.names.len() <= FAST_COLS;
        let mut pos = 0;
        while pos < n {
            self.lineno += 1;
            if fast {
                if let Some(next) = self.numeric_row(data, pos, out) {
                    pos = next;
                    continue;
                }
            }
            let end = memchr::memchr(b'\n', &data[pos..]).map_or(n, |i| pos + i);
            self.line(&data[pos..end], out)?;
            pos = if end < n { end + 1 } else { n };
        }
        Ok(())
    }

    /// One all-numeric row starting at `pos`: exactly the header's number of fields, each 1 to
    /// 20 digits fitting u64, ended by `\n`, `\r\n` or the end of `data`. Returns where the
    /// next row starts, or None (nothing pushed) for the general path to decide.
    #[inline(always)]
    fn numeric_row(&self, data: &[u8], pos: usize, out: &mut Columns) -> Option<usize> {
        let cols = self.names.len();
        let mut v = [0u64; FAST_COLS];
        let mut p = pos;
        for (f, slot) in v.iter_mut().enumerate().take(cols) {
            let (value, q) = parse_digits(data, p)?;
            *slot = value;
            if f + 1 < cols {
                if data.get(q) != Some(&b',') {
                    return None;
                }
                p = q + 1;
            } else {
                p = match data.get(q) {
                    Some(b'\n') => q + 1,
                    None => q,
                    Some(b'\r') => match data.get(q + 1) {
                        Some(b'\n') => q + 2,
                        None => q + 1,
                        _ => return None,
                    },
                    _ => return None,
                };
            }
        }
        let size = v[self.c_size];
        let read = self.c_read.map_or(size, |c| v[c]);
        if read > size {
            return None;
        }
        out.push(v[self.c_ts] as f64, v[self.c_id], size, read, 0);
        Some(p)
    }

    #[inline]
    fn line(&mut self, raw: &[u8], out: &mut Columns) -> Result<(), String> {
        let lineno = self.lineno;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
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
        out.push(ts, id, size, read, tier);
        Ok(())
    }
}

const FAST_COLS: usize = 8;

/// Bytes of `w` (little-endian: byte 0 first) that are not ASCII digits: nonzero there, zero
/// at digits. Carries of the addition only move towards later bytes, past the first non-digit.
#[inline(always)]
fn non_digits(w: u64) -> u64 {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const THREES: u64 = 0x3030_3030_3030_3030;
    ((w & HIGH) ^ THREES) | ((w.wrapping_add(0x0606_0606_0606_0606) & HIGH) ^ THREES)
}

/// The value of 8 bytes of ASCII digits, byte 0 the most significant (0x00 bytes count as 0).
#[inline(always)]
fn eight_digits(w: u64) -> u64 {
    let w = w & 0x0F0F_0F0F_0F0F_0F0F;
    let w = (w.wrapping_mul(10) + (w >> 8)) & 0x00FF_00FF_00FF_00FF;
    let w = (w.wrapping_mul(100) + (w >> 16)) & 0x0000_FFFF_0000_FFFF;
    (w.wrapping_mul(10000) + (w >> 32)) & 0xFFFF_FFFF
}

const POW10: [u64; 9] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];

/// The digits at `data[p..]`: their value and where they end, or None for no digits, more
/// than 20 or a value past u64 (what `parse_u64` refuses too).
#[inline(always)]
fn parse_digits(data: &[u8], start: usize) -> Option<(u64, usize)> {
    let mut p = start;
    let mut v: u64 = 0;
    loop {
        if let Some(bytes) = data.get(p..p + 8) {
            let w = u64::from_le_bytes(bytes.try_into().unwrap());
            let nd = non_digits(w);
            let k = if nd == 0 { 8 } else { (nd.trailing_zeros() / 8) as usize };
            if k > 0 {
                let chunk = eight_digits(w << (8 * (8 - k)));
                v = v.checked_mul(POW10[k])?.checked_add(chunk)?;
                p += k;
            }
            if k < 8 || p - start > 20 {
                break;
            }
        } else {
            // the last bytes of the buffer, one at a time
            while let Some(&b) = data.get(p) {
                let d = b.wrapping_sub(b'0');
                if d > 9 || p - start > 20 {
                    break;
                }
                v = v.checked_mul(10)?.checked_add(d as u64)?;
                p += 1;
            }
            break;
        }
    }
    let digits = p - start;
    (digits > 0 && digits <= 20).then_some((v, p))
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

    /// Every row through the buffer reader (`parse`) and through the per-line general path
    /// alone: the same columns or the same error, wherever the row sits in the buffer (the
    /// last bytes of a buffer are read one at a time).
    #[test]
    fn buffer_reader_agrees_with_the_line_reader() {
        let rows = [
            "0,18446744073709551615,1",
            "1,18446744073709551616,1",
            "2,99999999999999999999,1",
            "3,00000000000000000001,5",
            "4,000000000000000000001,5",
            "5,12345678,87654321",
            "6,1234567,123456789",
            "7,0,0",
            "18446744073709551615,1,1",
            "18446744073709551616,1,1",
            "8,,1",
            "9,1,",
            "10,1,2,3",
            "11,1",
            "12, 1,2",
            "13,1,2 ",
            "14,-1,2",
            "15.5,1,2",
            "16,1e3,2",
            "17,1,2\r",
            "",
            "  ",
            "18,\"7\",9",
            "19,1:2,3",
            "20,1/2,3",
            "21,1\u{ff}2,3",
        ];
        for header in ["timestamp,obj_id,obj_size", "timestamp,obj_id,obj_size,bytes_read"] {
            for row in rows {
                let row = if header.ends_with("bytes_read") && !row.is_empty() { format!("{row},1") } else { row.to_string() };
                for tail in ["\n", "", "\n5,6,7\n"] {
                    let tail = if header.ends_with("bytes_read") { tail.replace("5,6,7", "5,6,7,7") } else { tail.to_string() };
                    let data = format!("{header}\n{row}{tail}");
                    let fast = parse_csv(data.as_bytes());
                    let mut p = CsvParser::new(header.as_bytes()).unwrap();
                    let mut cols = Columns::default();
                    let mut slow = Ok(());
                    for line in data.as_bytes().split(|&b| b == b'\n').skip(1) {
                        if line.is_empty() && slow.is_ok() {
                            continue;
                        }
                        p.lineno += 1;
                        slow = slow.and_then(|_| p.line(line, &mut cols));
                    }
                    match (fast, slow) {
                        (Ok(t), Ok(())) => {
                            assert_eq!(t.timestamp, cols.timestamp, "{data:?}");
                            assert_eq!(t.id, cols.id, "{data:?}");
                            assert_eq!(t.size, cols.size, "{data:?}");
                            assert_eq!(t.bytes_read, cols.bytes_read, "{data:?}");
                        }
                        (Err(a), Err(b)) => assert_eq!(a, b, "{data:?}"),
                        (a, b) => panic!("{data:?}: {a:?} vs {b:?}"),
                    }
                }
            }
        }
        // every digit count and value class, read eight bytes at a time
        let mut data = String::from("timestamp,obj_id,obj_size\n");
        let mut expect = Vec::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = x >> (i % 64);
            data.push_str(&format!("{i},{id},{}\n", i % 1000));
            expect.push(id);
        }
        assert_eq!(parse_csv(data.as_bytes()).unwrap().id, expect);
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
