//! The Kafka event message (`cachescope/core/messages.py`: `{"cache_group": G, "columns":
//! {field: [values], …}}`) decoded straight into the event columns, without a Python object per
//! value: the text columns' repeated values share one str object per message.
//!
//! It takes only the messages whose outcome it can decide exactly as `decode_batch`'s msgspec
//! path does: no backslash anywhere, every field once with a list of one length, integers
//! within their column's range, text where text is due, an op name, null only in the observed
//! counters and flags (a flag 0 or 1), unknown keys holding valid JSON (msgspec skips them).
//! Anything else gives None and the Python decoder's answer stands (its error message
//! included). tests/python/unit/core/test_messages.py compares both on encoded, mutated and Hypothesis
//! messages.

use crate::json::{Json, Val};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use rustc_hash::FxHashMap;

/// AccessEvent's fields in order (cachescope.events.FIELD_NAMES; a test checks they agree).
pub const FIELDS: [&str; 21] = [
    "ts",
    "site",
    "source",
    "server",
    "client",
    "vo",
    "path",
    "file_id",
    "file_size",
    "bytes_read",
    "op",
    "tier",
    "cache_group",
    "observed_hit_bytes",
    "observed_miss_bytes",
    "observed_bypass_bytes",
    "observed_hit",
    "observed_origin_bytes",
    "origin",
    "seq",
    "duration_us",
];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Ts,
    Text,
    U64,
    Op,
    Observed,
    /// a nullable 0/1 (the contract's flag kind): int8, -1 for null
    Flag,
}

fn kind(field: usize) -> Kind {
    match FIELDS[field] {
        "ts" => Kind::Ts,
        "file_id" | "file_size" | "bytes_read" | "seq" => Kind::U64,
        "op" => Kind::Op,
        // a nullable u64 is held as the observed counters are (int64, -1 for null)
        "observed_hit_bytes" | "observed_miss_bytes" | "observed_bypass_bytes" | "observed_origin_bytes" | "duration_us" => {
            Kind::Observed
        }
        "observed_hit" => Kind::Flag,
        _ => Kind::Text,
    }
}

/// One decoded column.
enum Column<'a> {
    Text(Vec<&'a str>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    U8(Vec<u8>),
    I8(Vec<i8>),
}

impl Column<'_> {
    fn len(&self) -> usize {
        match self {
            Column::Text(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::U64(v) => v.len(),
            Column::U8(v) => v.len(),
            Column::I8(v) => v.len(),
        }
    }
}

/// The columns array of `field` at the reader's position, or None (declined).
fn column<'a>(j: &mut Json<'a>, field: usize) -> Option<Column<'a>> {
    let k = kind(field);
    let mut col = match k {
        Kind::Text => Column::Text(Vec::new()),
        Kind::Ts | Kind::Observed => Column::I64(Vec::new()),
        Kind::U64 => Column::U64(Vec::new()),
        Kind::Op => Column::U8(Vec::new()),
        Kind::Flag => Column::I8(Vec::new()),
    };
    j.array(2, |v| {
        match (&mut col, k, v) {
            (Column::Text(c), _, Val::Str(s)) => c.push(s),
            (Column::I64(c), Kind::Ts, Val::Int(x)) if x <= i64::MAX as u64 => c.push(x as i64),
            (Column::I64(c), Kind::Observed, Val::Int(x)) if x <= i64::MAX as u64 => c.push(x as i64),
            (Column::I64(c), Kind::Observed, Val::Null) => c.push(-1), // NO_OBSERVATION
            (Column::I8(c), Kind::Flag, Val::Int(x)) if x <= 1 => c.push(x as i8),
            (Column::I8(c), Kind::Flag, Val::Null) => c.push(-1), // NO_OBSERVATION
            (Column::U64(c), _, Val::Int(x)) => c.push(x),
            (Column::U8(c), _, Val::Str(s)) => c.push(match s {
                "read" => 0,
                "write" => 1,
                "delete" => 2,
                _ => return None,
            }),
            _ => return None,
        }
        Some(())
    })?;
    Some(col)
}

/// The message's cache group and columns, or None when Python must decide.
fn decode(text: &str) -> Option<(&str, Vec<Column<'_>>)> {
    if memchr::memchr(b'\\', text.as_bytes()).is_some() {
        return None;
    }
    let mut j = Json { text, s: text.as_bytes(), i: 0 };
    let mut group: Option<&str> = None;
    let mut columns: Vec<Option<Column>> = (0..FIELDS.len()).map(|_| None).collect();
    let mut seen_columns = false;
    j.ws();
    j.members(|j, key| match key {
        "cache_group" => match j.value(1)? {
            Val::Str(g) if group.replace(g).is_none() => Some(()),
            _ => None,
        },
        "columns" if !seen_columns => {
            seen_columns = true;
            j.members(|j, name| match FIELDS.iter().position(|f| *f == name) {
                Some(f) if columns[f].is_none() => {
                    columns[f] = Some(column(j, f)?);
                    Some(())
                }
                Some(_) => None,               // a field twice: msgspec's to judge
                None => j.value(2).map(|_| ()), // an unknown key: skipped, as msgspec does
            })
        }
        "columns" => None,
        _ => j.value(1).map(|_| ()),
    })?;
    j.ws();
    if j.i != j.s.len() {
        return None;
    }
    let columns: Vec<Column> = columns.into_iter().collect::<Option<_>>()?;
    let n = columns[0].len();
    if columns.iter().any(|c| c.len() != n) {
        return None;
    }
    Some((group?, columns))
}

/// `(cache_group, {field: numpy column})` of a message, or None: then `decode_batch`'s Python
/// path decides (and names what is wrong).
#[pyfunction]
pub fn decode_message<'py>(py: Python<'py>, message: &Bound<'py, PyAny>) -> PyResult<Option<(String, Bound<'py, PyDict>)>> {
    let text: &str = if let Ok(b) = message.cast::<PyBytes>() {
        match std::str::from_utf8(b.as_bytes()) {
            Ok(t) => t,
            Err(_) => return Ok(None),
        }
    } else if let Ok(s) = message.cast::<PyString>() {
        match s.to_str() {
            Ok(t) => t,
            Err(_) => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    let Some((group, columns)) = decode(text) else { return Ok(None) };
    let d = PyDict::new(py);
    let mut strings: FxHashMap<&str, Py<PyAny>> = FxHashMap::default();
    for (f, col) in columns.into_iter().enumerate() {
        let name = FIELDS[f];
        match col {
            Column::Text(values) => {
                let objs: Vec<Py<PyAny>> = values
                    .into_iter()
                    .map(|s| {
                        strings.entry(s).or_insert_with(|| PyString::new(py, s).into_any().unbind()).clone_ref(py)
                    })
                    .collect();
                d.set_item(name, PyArray1::from_vec(py, objs))?;
            }
            Column::I64(v) => d.set_item(name, PyArray1::from_vec(py, v))?,
            Column::U64(v) => d.set_item(name, PyArray1::from_vec(py, v))?,
            Column::U8(v) => d.set_item(name, PyArray1::from_vec(py, v))?,
            Column::I8(v) => d.set_item(name, PyArray1::from_vec(py, v))?,
        }
    }
    Ok(Some((group.to_string(), d)))
}
