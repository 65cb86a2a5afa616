//! Trace files read in the engine: plain, zstd or gzip (found by magic bytes, whatever the
//! file is called), CSV or libCacheSim's oracleGeneral binary records, streamed as batches of
//! columns. A reader thread decompresses and parses while the caller simulates.
//!
//! A truncated or damaged compressed file is an error naming the file and the byte offset
//! reached in it, never a shorter trace.

use crate::trace::{Columns, CsvParser};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

/// Rows per batch handed from the reader thread to the simulation (unless told otherwise).
pub const BATCH_ROWS: usize = 1 << 16;
/// Batches in flight between the two threads (bounds memory: ~2.5 MB per batch of CSV columns).
const IN_FLIGHT: usize = 4;
/// A CSV line longer than this is refused: no trace has one, and an input without line ends
/// (a binary file, `/dev/zero`) would otherwise grow a line until memory runs out.
pub const MAX_LINE: usize = 16 << 20;
/// The error of a read stopped by its caller (`Stream::next_msg`): Ctrl-C in Python.
pub const CANCELLED: &str = "interrupted";
/// One oracleGeneral record: u32 timestamp, u64 obj_id, u32 obj_size, i64 next_access_vtime.
pub const ORACLE_RECORD: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Csv,
    OracleGeneral,
}

impl Format {
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "csv" => Ok(Format::Csv),
            "oracle-general" | "oraclegeneral" => Ok(Format::OracleGeneral),
            _ => Err(format!("unknown trace format {name:?}; known: csv, oracle-general")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Codec {
    Plain,
    Zstd,
    Gzip,
}

impl Codec {
    fn name(self) -> &'static str {
        match self {
            Codec::Plain => "plain",
            Codec::Zstd => "zstd",
            Codec::Gzip => "gzip",
        }
    }
}

/// Counts the bytes taken from the underlying file (where a decoder stopped).
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// An opened trace: the decompressed byte stream and where it stands in the file.
pub struct Source {
    pub name: String,
    codec: Codec,
    stream: Box<dyn Read + Send>,
    offset: Arc<AtomicU64>,
}

impl Source {
    /// `-` is standard input.
    pub fn open(path: &str) -> Result<Self, String> {
        let raw: Box<dyn Read + Send> = if path == "-" {
            Box::new(io::stdin())
        } else {
            Box::new(File::open(path).map_err(|e| format!("cannot read trace {path}: {}", io_reason(&e)))?)
        };
        let offset = Arc::new(AtomicU64::new(0));
        let mut buffered = BufReader::with_capacity(1 << 20, Counting { inner: raw, count: offset.clone() });
        let magic = {
            use std::io::BufRead;
            let head = buffered.fill_buf().map_err(|e| format!("cannot read trace {path}: {}", io_reason(&e)))?;
            head.get(..4).map(|m| m.to_vec()).unwrap_or_default()
        };
        let (codec, stream): (Codec, Box<dyn Read + Send>) = if magic == [0x28, 0xb5, 0x2f, 0xfd] {
            let d = zstd::stream::read::Decoder::with_buffer(buffered).map_err(|e| format!("{path}: {e}"))?;
            (Codec::Zstd, Box::new(d))
        } else if magic.starts_with(&[0x1f, 0x8b]) {
            (Codec::Gzip, Box::new(flate2::bufread::MultiGzDecoder::new(buffered)))
        } else {
            (Codec::Plain, Box::new(buffered))
        };
        Ok(Source { name: path.to_string(), codec, stream, offset })
    }

    /// Read up to buf.len() bytes; fills the buffer unless the stream ends.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        let mut n = 0;
        while n < buf.len() {
            match self.stream.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.damaged(&e)),
            }
        }
        Ok(n)
    }

    fn damaged(&self, e: &io::Error) -> String {
        let at = self.offset.load(Ordering::Relaxed);
        match self.codec {
            Codec::Plain => format!("{}: read error at byte {at}: {}", self.name, io_reason(e)),
            c => format!("{}: truncated or damaged {} data (at byte {at} of the file): {}", self.name, c.name(), io_reason(e)),
        }
    }
}

fn io_reason(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// What the reader thread sends: a batch, or the end (tier names), or an error.
pub enum Msg {
    Batch(Columns),
    End { tier_names: Vec<String>, rows: u64 },
    Error(String),
}

/// Dense file keys: the n-th distinct file id met gets key n.
#[derive(Default)]
struct Keys(rustc_hash::FxHashMap<u64, u64>);

impl Keys {
    fn number(&mut self, b: &mut Columns) {
        b.key.clear();
        b.key.reserve(b.id.len());
        for &id in &b.id {
            let next = self.0.len() as u64;
            b.key.push(*self.0.entry(id).or_insert(next));
        }
    }
}

/// Streams a trace as batches of columns from a thread of its own. Dropped before the end (the
/// consumer stopped early), its reader ends at its next send, the receiver being gone; it is
/// not waited for, as it may wait on standard input for ever.
pub struct Stream {
    pub rx: Receiver<Msg>,
    /// Rows per batch at most.
    pub rows: usize,
    /// Bytes taken from the file so far (compressed bytes for a compressed file).
    pub consumed: Arc<AtomicU64>,
    /// Batches the consumer is done with go back to the reader (no fresh pages per batch).
    spent: SyncSender<Columns>,
}

impl Stream {
    /// `rows` per batch: more amortises a bank of many caches switching between its tables,
    /// fewer keeps memory down (about 33 bytes per row, IN_FLIGHT + 2 batches at most).
    /// With `keys`, each batch also carries dense file keys (`Columns::key`), numbered here on
    /// the reader's thread so the caches' thread only indexes arrays (a map of 16–24 bytes per
    /// distinct file lives on this thread for the whole trace).
    pub fn start(path: &str, format: Format, rows: usize, keys: bool) -> Result<Self, String> {
        let source = Source::open(path)?;
        let consumed = source.offset.clone();
        let rows = rows.max(1);
        let (tx, rx) = sync_channel::<Msg>(IN_FLIGHT);
        let (spent, reuse) = sync_channel::<Columns>(2);
        std::thread::Builder::new()
            .name("trace-reader".into())
            .spawn(move || {
                let numbering = std::cell::RefCell::new(Keys::default());
                let send = |mut m: Msg| {
                    if let (true, Msg::Batch(b)) = (keys, &mut m) {
                        numbering.borrow_mut().number(b);
                    }
                    tx.send(m).is_ok()
                };
                let fresh = |cap: usize| match reuse.try_recv() {
                    Ok(mut c) => {
                        c.clear();
                        c
                    }
                    Err(_) => Columns::with_capacity(cap),
                };
                let result = match format {
                    Format::Csv => read_csv(source, rows, &send, &fresh),
                    Format::OracleGeneral => read_oracle(source, rows, &send, &fresh),
                };
                match result {
                    Ok((tier_names, rows)) => {
                        send(Msg::End { tier_names, rows });
                    }
                    Err(e) => {
                        send(Msg::Error(e));
                    }
                }
            })
            .map_err(|e| format!("cannot start the reader thread: {e}"))?;
        Ok(Stream { rx, rows, consumed, spent })
    }

    /// Hand a batch back once simulated (optional: dropping it is fine too).
    pub fn recycle(&self, batch: Columns) {
        let _ = self.spent.try_send(batch);
    }

    /// Where other threads hand batches back (`recycle` from a thread of their own).
    pub fn recycler(&self) -> SyncSender<Columns> {
        self.spent.clone()
    }

    /// The reader's next message; `CANCELLED` once `cancelled` is set, which is looked at while
    /// waiting for the reader too (it may wait on standard input for ever).
    pub fn next_msg(&self, cancelled: &AtomicBool) -> Result<Msg, String> {
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            if cancelled.load(Ordering::Relaxed) {
                return Err(CANCELLED.into());
            }
            match self.rx.recv_timeout(std::time::Duration::from_millis(50)) {
                Ok(m) => return Ok(m),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Err("the reader stopped unexpectedly".into()),
            }
        }
    }
}


/// A piece of the decompressed stream: `buf[..len]`.
struct Chunk {
    buf: Vec<u8>,
    len: usize,
}

impl Chunk {
    fn data(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Decompressed chunks of about `size` bytes from a thread of its own (decompression overlaps
/// parsing); an empty chunk is the end. With `whole_lines`, every chunk but the last ends at a
/// line end (the rest of a line starts the next chunk), so the parser never copies. Buffers
/// come back through the returned sender and are refilled (no fresh pages per chunk).
fn chunks(mut src: Source, size: usize, whole_lines: bool) -> (Receiver<Result<Chunk, String>>, SyncSender<Vec<u8>>) {
    let (tx, rx) = sync_channel(IN_FLIGHT);
    let (back, returned) = sync_channel::<Vec<u8>>(IN_FLIGHT + 2);
    let spawned = std::thread::Builder::new().name("trace-decompress".into()).spawn(move || {
        let mut tail: Vec<u8> = Vec::new();
        loop {
            let mut buf = returned.try_recv().unwrap_or_default();
            let t = tail.len();
            if buf.len() < t + size {
                buf.resize(t + size, 0);
            }
            buf[..t].copy_from_slice(&tail);
            tail.clear();
            let n = match src.fill(&mut buf[t..t + size]) {
                Ok(n) => n,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let end = t + n;
            let last = n < size; // `fill` stops short only at the end of the stream
            let cut = if whole_lines && !last { memchr::memrchr(b'\n', &buf[..end]).map_or(0, |i| i + 1) } else { end };
            if end - cut > MAX_LINE {
                let at = src.offset.load(Ordering::Relaxed);
                let _ = tx.send(Err(format!(
                    "{}: a line longer than {} MiB (at byte {at} of the file): not a CSV trace",
                    src.name,
                    MAX_LINE >> 20
                )));
                return;
            }
            tail.extend_from_slice(&buf[cut..end]);
            if cut > 0 && tx.send(Ok(Chunk { buf, len: cut })).is_err() {
                return;
            }
            if last {
                let _ = tx.send(Ok(Chunk { buf: Vec::new(), len: 0 }));
                return;
            }
        }
    });
    if let Err(e) = spawned {
        let (tx, rx) = sync_channel(1);
        let _ = tx.send(Err(format!("cannot start the decompression thread: {e}")));
        return (rx, back);
    }
    (rx, back)
}

/// Chunks of decompressed CSV (whole lines), parsed into batches of `rows`.
fn read_csv(
    src: Source,
    rows_per_batch: usize,
    send: &dyn Fn(Msg) -> bool,
    fresh: &dyn Fn(usize) -> Columns,
) -> Result<(Vec<String>, u64), String> {
    const CHUNK: usize = 1 << 20;
    let name = src.name.clone();
    let (input, back) = chunks(src, CHUNK, true);
    let mut parser: Option<CsvParser> = None;
    let cap = rows_per_batch + CHUNK / 16;
    let mut batch = fresh(cap);
    let mut rows = 0u64;
    let err = |e: String| format!("{name}: {e}");
    loop {
        let chunk = input.recv().map_err(|_| format!("{name}: the decompression thread stopped"))??;
        let end = chunk.len == 0;
        let mut lines = chunk.data();
        if parser.is_none() && !end {
            let (header, body) = match memchr::memchr(b'\n', lines) {
                Some(i) => (&lines[..i], &lines[i + 1..]),
                None => (lines, &lines[lines.len()..]),
            };
            parser = Some(CsvParser::new(header).map_err(err)?);
            lines = body;
        }
        if let Some(p) = parser.as_mut() {
            p.parse(lines, &mut batch).map_err(err)?;
        }
        let _ = back.try_send(chunk.buf);
        if batch.len() >= rows_per_batch || (end && !batch.is_empty()) {
            rows += batch.len() as u64;
            let full = std::mem::replace(&mut batch, fresh(cap));
            if !send(Msg::Batch(full)) {
                return Ok((Vec::new(), rows)); // the consumer stopped
            }
        }
        if end {
            break;
        }
    }
    let Some(parser) = parser else {
        return Err(err("line 1: empty trace, expected a header".into()));
    };
    Ok((parser.tier_names, rows))
}

/// libCacheSim's oracleGeneral: little-endian 24-byte records, optionally compressed.
fn read_oracle(
    src: Source,
    rows_per_batch: usize,
    send: &dyn Fn(Msg) -> bool,
    fresh: &dyn Fn(usize) -> Columns,
) -> Result<(Vec<String>, u64), String> {
    let name = src.name.clone();
    let full = rows_per_batch * ORACLE_RECORD;
    // every chunk is whole (`fill`) but the last, so records never straddle two
    let (input, back) = chunks(src, full, false);
    let mut rows = 0u64;
    loop {
        let chunk = input.recv().map_err(|_| format!("{name}: the decompression thread stopped"))??;
        let n = chunk.len;
        if n % ORACLE_RECORD != 0 {
            let whole = rows + (n / ORACLE_RECORD) as u64;
            return Err(format!(
                "{}: truncated oracleGeneral record {} (the trace ends {} bytes into a {ORACLE_RECORD}-byte record, at byte {} of the data)",
                name,
                whole + 1,
                n % ORACLE_RECORD,
                whole * ORACLE_RECORD as u64 + (n % ORACLE_RECORD) as u64
            ));
        }
        if n == 0 {
            break;
        }
        let k = n / ORACLE_RECORD;
        let mut cols = fresh(k);
        for r in chunk.data().chunks_exact(ORACLE_RECORD) {
            let ts = u32::from_le_bytes(r[0..4].try_into().unwrap());
            let id = u64::from_le_bytes(r[4..12].try_into().unwrap());
            let size = u32::from_le_bytes(r[12..16].try_into().unwrap()) as u64;
            cols.push(ts as f64, id, size, size, 0);
        }
        let _ = back.try_send(chunk.buf);
        rows += k as u64;
        if !send(Msg::Batch(cols)) {
            break;
        }
    }
    Ok((vec!["UNKNOWN".to_string()], rows))
}

/// The whole trace in memory (for what needs it: curves, belady, `%` sizes of standard input).
pub fn read_all(path: &str, format: Format) -> Result<(Columns, Vec<String>), String> {
    read_all_until(path, format, &AtomicBool::new(false))
}

/// `read_all`, failing with `CANCELLED` once `cancelled` is set (Ctrl-C in Python).
pub fn read_all_until(path: &str, format: Format, cancelled: &AtomicBool) -> Result<(Columns, Vec<String>), String> {
    let stream = Stream::start(path, format, BATCH_ROWS, false)?;
    let mut all = Columns::default();
    loop {
        match stream.next_msg(cancelled).map_err(|e| named(path, e))? {
            Msg::Batch(mut b) => all.append(&mut b),
            Msg::End { tier_names, .. } => return Ok((all, tier_names)),
            Msg::Error(e) => return Err(e),
        }
    }
}

/// An error of a read of `path`, naming it once (the reader's own errors name it already; an
/// interruption is about no file).
pub(crate) fn named(path: &str, e: String) -> String {
    if e.starts_with(path) || e == CANCELLED {
        e
    } else {
        format!("{path}: {e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn csv(n: usize) -> Vec<u8> {
        let mut s = b"timestamp,obj_id,obj_size,tier\n".to_vec();
        for i in 0..n {
            writeln!(s, "{i},{},{},{}", i % 977, 1000 + i % 13, ["AOD", "HITS"][i % 2]).unwrap();
        }
        s
    }

    /// `data` compressed with zstd and with gzip.
    fn zstd_and_gzip(data: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let z = zstd::encode_all(data, 3).unwrap();
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        g.write_all(data).unwrap();
        (z, g.finish().unwrap())
    }

    fn tmp(name: &str, data: &[u8]) -> String {
        let p = std::env::temp_dir().join(format!("simcore-reader-{}-{name}", std::process::id()));
        std::fs::write(&p, data).unwrap();
        p.to_string_lossy().into_owned()
    }

    #[test]
    fn plain_zstd_gzip_read_the_same() {
        let data = csv(200_000);
        let (z, g) = zstd_and_gzip(&data);
        let expect = crate::trace::parse_csv(&data).unwrap();
        for (name, bytes) in [("p.csv", &data), ("z.csv.zst", &z), ("g.csv.gz", &g)] {
            let path = tmp(name, bytes);
            let (cols, tiers) = read_all(&path, Format::Csv).unwrap();
            assert_eq!(cols.id, expect.id, "{name}");
            assert_eq!(cols.size, expect.size, "{name}");
            assert_eq!(cols.tier, expect.tier, "{name}");
            assert_eq!(tiers, expect.tier_names, "{name}");
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn truncated_or_damaged_compressed_traces_are_errors() {
        let data = csv(100_000);
        let (z, g) = zstd_and_gzip(&data);
        for (name, bytes) in [("t.csv.zst", &z), ("t.csv.gz", &g)] {
            let cut = &bytes[..bytes.len() * 2 / 3];
            let path = tmp(name, cut);
            let e = read_all(&path, Format::Csv).unwrap_err();
            assert!(e.starts_with(&format!("{path}: truncated or damaged")), "{e}");
            assert!(e.contains(&format!("at byte {} of the file", cut.len())), "{e}");
            std::fs::remove_file(&path).unwrap();
        }
        // a flipped byte in the middle: caught by the decoder (gzip's CRC, zstd's structure)
        // or by the CSV parser on the garbage, never a quiet success
        for (name, bytes) in [("bad.csv.zst", &z), ("bad.csv.gz", &g)] {
            let mut bad = bytes.clone();
            let mid = bad.len() / 2;
            bad[mid] ^= 0x55;
            let path = tmp(name, &bad);
            let e = read_all(&path, Format::Csv).unwrap_err();
            assert!(e.starts_with(&format!("{path}: ")), "{e}");
            std::fs::remove_file(&path).unwrap();
        }
    }

    #[test]
    fn oracle_general_records_and_a_truncated_one() {
        let mut data = Vec::new();
        for (ts, id, size) in [(1u32, 7u64, 100u32), (2, u64::MAX, 4_000_000_000), (3, 7, 100)] {
            data.extend_from_slice(&ts.to_le_bytes());
            data.extend_from_slice(&id.to_le_bytes());
            data.extend_from_slice(&size.to_le_bytes());
            data.extend_from_slice(&(-1i64).to_le_bytes());
        }
        let path = tmp("o.oracleGeneral.zst", &zstd::encode_all(&data[..], 1).unwrap());
        let (cols, _) = read_all(&path, Format::OracleGeneral).unwrap();
        assert_eq!(cols.id, vec![7, u64::MAX, 7]);
        assert_eq!(cols.size, vec![100, 4_000_000_000, 100]);
        std::fs::remove_file(&path).unwrap();
        let path = tmp("o.oracleGeneral", &data[..60]);
        let e = read_all(&path, Format::OracleGeneral).unwrap_err();
        assert!(e.contains("truncated oracleGeneral record 3"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }
}
