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

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
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

pub fn parse_csv(data: &[u8]) -> Result<Trace, String> {
    let mut lines = data.split(|&b| b == b'\n');
    let header = lines.next().ok_or("line 1: empty trace, expected a header")?;
    let header = String::from_utf8_lossy(header.strip_suffix(b"\r").unwrap_or(header)).to_string();
    let names: Vec<String> = header.split(',').map(|s| s.trim().to_ascii_lowercase()).collect();
    let col = |n: &str| names.iter().position(|c| c == n);
    let (Some(c_ts), Some(c_id), Some(c_size)) = (col("timestamp"), col("obj_id"), col("obj_size")) else {
        return Err(format!(
            "line 1: header {header:?} must name timestamp,obj_id,obj_size[,tier,path][,bytes_read]"
        ));
    };
    let c_tier = col("tier");
    let c_read = col("bytes_read");
    let mut t = Trace::default();
    let mut tier_codes: HashMap<Vec<u8>, u8> = HashMap::new();
    if c_tier.is_none() {
        t.tier_names.push("UNKNOWN".into());
    }
    let mut spans = Vec::with_capacity(8);
    let estimate = data.len() / 60;
    t.timestamp.reserve(estimate);
    t.id.reserve(estimate);
    t.size.reserve(estimate);
    t.bytes_read.reserve(estimate);
    t.tier.reserve(estimate);
    for (i, raw) in lines.enumerate() {
        let lineno = i + 2;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        split_fields(line, &mut spans);
        let get = |c: usize, name: &str| -> Result<&[u8], String> {
            spans.get(c).map(|&sp| field(line, sp)).ok_or_else(|| {
                format!("line {lineno}: missing column {name} (row has {} fields, header {})", spans.len(), names.len())
            })
        };
        let ts_s = get(c_ts, "timestamp")?;
        let ts = std::str::from_utf8(ts_s).ok().and_then(|s| s.parse::<f64>().ok()).filter(|v| v.is_finite()).ok_or_else(
            || format!("line {lineno}: timestamp {:?} is not a number", String::from_utf8_lossy(ts_s)),
        )?;
        let id_s = get(c_id, "obj_id")?;
        let id = parse_u64(id_s).ok_or_else(|| {
            format!("line {lineno}: obj_id {:?} is not an unsigned 64-bit integer", String::from_utf8_lossy(id_s))
        })?;
        let size_s = get(c_size, "obj_size")?;
        let size = parse_u64(size_s).ok_or_else(|| {
            format!("line {lineno}: obj_size {:?} is not an unsigned 64-bit integer", String::from_utf8_lossy(size_s))
        })?;
        let read = match c_read {
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
        let tier = match c_tier {
            Some(c) => {
                let name = get(c, "tier")?;
                let name = if name.is_empty() { &b"UNKNOWN"[..] } else { name };
                match tier_codes.get(name) {
                    Some(&code) => code,
                    None => {
                        if t.tier_names.len() == 256 {
                            return Err(format!("line {lineno}: more than 256 distinct tiers"));
                        }
                        let code = t.tier_names.len() as u8;
                        t.tier_names.push(String::from_utf8_lossy(name).into_owned());
                        tier_codes.insert(name.to_vec(), code);
                        code
                    }
                }
            }
            None => 0,
        };
        t.timestamp.push(ts);
        t.id.push(id);
        t.size.push(size);
        t.bytes_read.push(read);
        t.tier.push(tier);
    }
    Ok(t)
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
    fn errors_name_line_and_column() {
        let e = parse_csv(b"timestamp,obj_id,obj_size\n1,2,3\n4,x5,6\n").unwrap_err();
        assert_eq!(e, "line 3: obj_id \"x5\" is not an unsigned 64-bit integer");
        let e = parse_csv(b"timestamp,obj_id,obj_size,bytes_read\n1,2,3,4\n").unwrap_err();
        assert!(e.starts_with("line 2: bytes_read 4 exceeds"), "{e}");
        let e = parse_csv(b"ts,id\n").unwrap_err();
        assert!(e.starts_with("line 1: header"), "{e}");
    }
}
