//! PyO3 bindings: `cachescope._simcore`. Arrays in, arrays out; the GIL is released while
//! the engine runs so Flink's other threads keep going.

use crate::bank::{self, Events};
use crate::mrc::LruMrc;
use crate::policy::POLICY_NAMES;
use crate::shadow::CacheSpec;
use crate::stats::FIELDS;
use crate::util::hash;
use numpy::ndarray::Array1;
use numpy::{IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use std::collections::BTreeMap;
use std::sync::Arc;

fn err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

type Col<'py, T> = PyReadonlyArray1<'py, T>;

/// The five columns every batch has, (file_id, file_size, bytes_read, tier, op), taken as one
/// tuple (`cachescope.simulation._columns` makes it) so that each feed method lists only what
/// it adds.
#[derive(FromPyObject)]
struct Batch<'py>(Col<'py, u64>, Col<'py, u64>, Col<'py, u64>, Col<'py, u8>, Col<'py, u8>);

/// A numpy column borrowed, if given.
fn opt<'a, T: numpy::Element>(c: &'a Option<Col<'_, T>>) -> PyResult<Option<&'a [T]>> {
    Ok(c.as_ref().map(|a| a.as_slice()).transpose()?)
}

impl Batch<'_> {
    /// The batch as the engine reads it (numpy arrays borrowed, no copy).
    fn events<'a>(
        &'a self,
        next_access: Option<&'a [u64]>,
        window: Option<&'a [u32]>,
        ts: Option<&'a [u32]>,
        duration_us: Option<&'a [u64]>,
    ) -> PyResult<Events<'a>> {
        Ok(Events {
            id: self.0.as_slice()?,
            size: self.1.as_slice()?,
            bytes_read: self.2.as_slice()?,
            tier: self.3.as_slice()?,
            op: self.4.as_slice()?,
            next_access,
            window,
            ts,
            key: None,
            duration_us,
        })
    }
}

/// Flat counters as a numpy array of `shape`.
fn shaped<'py>(py: Python<'py>, flat: Vec<u64>, shape: [usize; 4]) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, flat).reshape(shape)?.into_any())
}

/// A trace's columns as the dict `cachescope.simulation.Trace` is built from.
fn trace_dict<'py>(py: Python<'py>, t: crate::trace::Columns, tier_names: Vec<String>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("timestamp", PyArray1::from_vec(py, t.timestamp))?;
    d.set_item("file_id", PyArray1::from_vec(py, t.id))?;
    d.set_item("file_size", PyArray1::from_vec(py, t.size))?;
    d.set_item("bytes_read", PyArray1::from_vec(py, t.bytes_read))?;
    d.set_item("tier", PyArray1::from_vec(py, t.tier))?;
    d.set_item("tier_names", tier_names)?;
    Ok(d)
}

#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct SpecIn {
    policy: String,
    capacity: u64,
    params: BTreeMap<String, f64>,
    sample_rate: f64,
    partitions: u32,
}

impl SpecIn {
    fn into_spec(self) -> CacheSpec {
        CacheSpec {
            policy: self.policy,
            capacity: self.capacity,
            params: self.params,
            sample_rate: self.sample_rate,
            partitions: self.partitions,
        }
    }
}

/// A bank of shadow caches fed by one stream of events, a batch at a time.
#[pyclass(name = "Bank", module = "cachescope._simcore")]
struct PyBank {
    inner: bank::Bank,
}

#[pymethods]
impl PyBank {
    /// `partitions`: each spec split into that many caches, one per partition of the
    /// `partition` column every batch then carries (`Bank::routed`); `salt`: file ids salted
    /// (`Bank::salted`; 0: as given); `threads`: a batch's caches run on that many threads
    /// (`Bank::with_threads`; 0: every core).
    #[new]
    #[pyo3(signature = (specs, n_tiers, partitions=None, salt=0, threads=0))]
    fn new(specs: Vec<SpecIn>, n_tiers: usize, partitions: Option<u32>, salt: u64, threads: usize) -> PyResult<Self> {
        let specs = specs.into_iter().map(SpecIn::into_spec).collect();
        let bank = match partitions {
            None => bank::Bank::new(specs, n_tiers),
            Some(p) => bank::Bank::routed(specs, n_tiers, p),
        }
        .map_err(err)?
        .with_threads(threads);
        Ok(PyBank { inner: if salt != 0 { bank.salted(salt) } else { bank } })
    }

    /// Feed one batch (`cols`: the `Batch` tuple); returns counters shaped (windows, caches,
    /// tiers, fields), and with `by_partition` (a routed bank) also those of each partition
    /// summed over the windows, (partitions, caches, tiers, fields). `ts` (event time, seconds)
    /// makes the caches count residence ages; `partition`: each event's (a routed bank);
    /// `duration_us`: each access's duration (µs, 0 = not known: xcache's fetch times).
    #[pyo3(signature = (cols, next_access=None, window=None, ts=None, partition=None, by_partition=false, duration_us=None))]
    #[allow(clippy::too_many_arguments)]
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        cols: Batch<'py>,
        next_access: Option<Col<'py, u64>>,
        window: Option<Col<'py, u32>>,
        ts: Option<Col<'py, u32>>,
        partition: Option<Col<'py, u32>>,
        by_partition: bool,
        duration_us: Option<Col<'py, u64>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ev = cols.events(opt(&next_access)?, opt(&window)?, opt(&ts)?, opt(&duration_us)?)?;
        let part = opt(&partition)?;
        let inner = &mut self.inner;
        let (w, out, parts) = py.detach(|| inner.feed_by_partition(&ev, part)).map_err(err)?;
        let (n_specs, n_tiers) = (self.inner.n_specs(), self.inner.n_tiers);
        let counters = shaped(py, out, [w, n_specs, n_tiers, FIELDS.len()])?;
        if !by_partition {
            return Ok(counters);
        }
        let parts = shaped(py, parts, [self.inner.routes as usize, n_specs, n_tiers, FIELDS.len()])?;
        Ok((counters, parts).into_pyobject(py)?.into_any())
    }

    /// Feed one batch (each event's window number within it); returns only the cells it touched:
    /// dict(window u32, cache u32, tier u8, values u64 (cells, fields)) (`windowed.rs`).
    /// `tiers_used`: every tier code fed so far is below it (None: n_tiers). `parallel`: the
    /// caches may run on all cores (see `windowed::feed_cells`).
    #[pyo3(signature = (cols, window, next_access=None, tiers_used=None, ts=None, parallel=true, duration_us=None))]
    #[allow(clippy::too_many_arguments)]
    fn feed_cells<'py>(
        &mut self,
        py: Python<'py>,
        cols: Batch<'py>,
        window: Col<'py, u32>,
        next_access: Option<Col<'py, u64>>,
        tiers_used: Option<usize>,
        ts: Option<Col<'py, u32>>,
        parallel: bool,
        duration_us: Option<Col<'py, u64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let ev = cols.events(opt(&next_access)?, Some(window.as_slice()?), opt(&ts)?, opt(&duration_us)?)?;
        let inner = &mut self.inner;
        let cells = py.detach(|| crate::windowed::feed_cells(inner, &ev, tiers_used, parallel)).map_err(err)?;
        let n = cells.window.len();
        let d = PyDict::new(py);
        d.set_item("window", PyArray1::from_vec(py, cells.window))?;
        d.set_item("cache", PyArray1::from_vec(py, cells.cache))?;
        d.set_item("tier", PyArray1::from_vec(py, cells.tier))?;
        d.set_item("values", PyArray1::from_vec(py, cells.values).reshape([n, FIELDS.len()])?)?;
        Ok(d)
    }

    /// Feed one batch into the cumulative totals only (no per-window counters out). `clock`:
    /// event times (seconds) for the caches that run on them (xcache's purges), without
    /// residence ages.
    #[pyo3(signature = (cols, next_access=None, clock=None, duration_us=None))]
    fn feed_totals<'py>(
        &mut self,
        py: Python<'py>,
        cols: Batch<'py>,
        next_access: Option<Col<'py, u64>>,
        clock: Option<Col<'py, u32>>,
        duration_us: Option<Col<'py, u64>>,
    ) -> PyResult<()> {
        let ev = cols.events(opt(&next_access)?, None, None, opt(&duration_us)?)?;
        let clock = opt(&clock)?;
        let inner = &mut self.inner;
        py.detach(|| inner.feed_totals_at(&ev, clock)).map_err(err)
    }

    /// Whether a cache runs on event time (give `clock` to `feed_totals`).
    #[getter]
    fn needs_clock(&self) -> bool {
        self.inner.needs_clock()
    }

    /// Warm start of cache `cache` (an xcache, before its first read): the files a real cache
    /// holds, with their cached bytes and last access (seconds).
    fn seed<'py>(
        &mut self,
        cache: usize,
        file_id: PyReadonlyArray1<'py, u64>,
        cached: PyReadonlyArray1<'py, u64>,
        last_access: PyReadonlyArray1<'py, u32>,
    ) -> PyResult<()> {
        let (id, cached, last) = (file_id.as_slice()?, cached.as_slice()?, last_access.as_slice()?);
        if cached.len() != id.len() || last.len() != id.len() {
            return Err(err("seed: file_id, cached and last_access must have the same length".to_string()));
        }
        let files: Vec<(u64, u64, u32)> = (0..id.len()).map(|i| (id[i], cached[i], last[i])).collect();
        self.inner.seed(cache, &files).map_err(err)
    }

    /// The purge log of cache `cache` (an xcache): per partition, its last purges as dicts.
    fn purge_log<'py>(&mut self, py: Python<'py>, cache: usize) -> PyResult<Vec<Vec<Bound<'py, PyDict>>>> {
        let parts = self.inner.purge_log(cache).map_err(err)?;
        parts
            .into_iter()
            .map(|log| {
                log.into_iter()
                    .map(|r| {
                        let d = PyDict::new(py);
                        d.set_item("time", r.time)?;
                        d.set_item("disk_usage", r.disk_usage)?;
                        d.set_item("bytes_to_remove", r.bytes_to_remove)?;
                        d.set_item("removed_files", r.removed_files)?;
                        d.set_item("removed_bytes", r.removed_bytes)?;
                        d.set_item("protected_files", r.protected_files)?;
                        d.set_item("protected_bytes", r.protected_bytes)?;
                        d.set_item("cold", r.cold)?;
                        Ok(d)
                    })
                    .collect()
            })
            .collect()
    }

    /// Cumulative counters, exact (Python ints: byte sums may exceed u64), flat in the order
    /// (caches, tiers, fields); `cachescope.simulation.ShadowBank.totals` shapes them.
    fn totals(&self) -> Vec<u128> {
        self.inner.totals()
    }

    /// Bytes and files resident in each cache now.
    fn occupancy(&self) -> Vec<(u64, usize)> {
        self.inner.shadows.iter().map(|s| (s.used_bytes(), s.resident_files())).collect()
    }

    /// Sampling rate actually applied per cache.
    fn sample_rates(&self) -> Vec<f64> {
        self.inner.shadows.iter().map(|s| s.effective_rate()).collect()
    }

    fn contains(&self, cache: usize, file_id: u64) -> PyResult<bool> {
        let s = self.inner.shadows.get(cache).ok_or_else(|| err(format!("no cache {cache}")))?;
        Ok(s.contains(file_id))
    }

    #[getter]
    fn n_tiers(&self) -> usize {
        self.inner.n_tiers
    }
    #[getter]
    fn events_seen(&self) -> u64 {
        self.inner.events_seen
    }
    #[getter]
    fn needs_future(&self) -> bool {
        self.inner.needs_future()
    }

    fn specs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .shadows
            .iter()
            .map(|s| {
                let d = PyDict::new(py);
                d.set_item("policy", &s.spec.policy)?;
                d.set_item("capacity", s.spec.capacity)?;
                d.set_item("params", s.spec.params.clone())?;
                d.set_item("sample_rate", s.spec.sample_rate)?;
                d.set_item("partitions", s.spec.partitions)?;
                Ok(d)
            })
            .collect()
    }

    /// Versioned binary snapshot of every cache's state and counters (not of a bank routed by
    /// partitions or salted: offline replays, never resumed).
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        if self.inner.routes != 0 || self.inner.salt != 0 {
            return Err(err("a bank routed by partitions or with salted ids has no snapshot".into()));
        }
        let bytes = py.detach(|| self.inner.snapshot());
        Ok(PyBytes::new(py, &bytes))
    }

    #[staticmethod]
    fn restore(data: &[u8]) -> PyResult<Self> {
        Ok(PyBank { inner: bank::Bank::restore(data).map_err(err)? })
    }
}

/// Exact (or SHARDS-sampled) LRU miss-ratio curve over a grid of capacities, in one pass.
#[pyclass(name = "LruMrc", module = "cachescope._simcore")]
struct PyMrc {
    inner: LruMrc,
}

#[pymethods]
impl PyMrc {
    #[new]
    #[pyo3(signature = (grid, n_tiers, sample_rate=1.0, max_objects=0))]
    fn new(grid: Vec<u64>, n_tiers: usize, sample_rate: f64, max_objects: usize) -> PyResult<Self> {
        Ok(PyMrc { inner: LruMrc::new(&grid, n_tiers, sample_rate, max_objects).map_err(err)? })
    }

    /// Feed a batch; returns this batch's curve counters per window:
    /// (hits (windows, K, tiers, 2) [hits, bytes_hit], requested (windows, tiers, 2)).
    #[pyo3(signature = (cols, window=None))]
    fn feed<'py>(&mut self, py: Python<'py>, cols: Batch<'py>, window: Option<Col<'py, u32>>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let n_tiers = self.inner.curve_tiers();
        let ev = cols.events(None, opt(&window)?, None, None)?;
        ev.validate(n_tiers).map_err(err)?;
        if ev.op.contains(&bank::OP_BYPASS) {
            return Err(err("the curve takes ops 0 (read), 1 (write) and 2 (delete): a curve has no admission".into()));
        }
        let inner = &mut self.inner;
        let accs = py.detach(|| inner.feed(ev.id, ev.size, ev.bytes_read, ev.tier, ev.op, ev.window));
        let (w, k) = (accs.len(), self.inner.grid().len());
        let hits: Vec<f64> = accs.iter().flat_map(|a| a.hits(n_tiers)).collect();
        let requested: Vec<f64> = accs.iter().flat_map(|a| a.requested().to_vec()).collect();
        Ok((
            PyArray1::from_vec(py, hits).reshape([w, k, n_tiers, 2])?.into_any(),
            PyArray1::from_vec(py, requested).reshape([w, n_tiers, 2])?.into_any(),
        ))
    }

    #[getter]
    fn grid(&self) -> Vec<u64> {
        self.inner.grid().to_vec()
    }

    #[getter]
    fn sample_rate(&self) -> f64 {
        self.inner.sample_rate()
    }

    /// dict(grid=(K,), hits=(K, tiers, 2) [hits, bytes_hit], requested=(tiers, 2), sample_rate, tracked_files)
    fn curve<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.inner.curve();
        let k = c.grid.len();
        let t = c.requested.len() / 2;
        let d = PyDict::new(py);
        d.set_item("grid", Array1::from_vec(c.grid).into_pyarray(py))?;
        d.set_item("hits", PyArray1::from_vec(py, c.hits).reshape([k, t, 2])?)?;
        d.set_item("requested", PyArray1::from_vec(py, c.requested).reshape([t, 2])?)?;
        d.set_item("sample_rate", c.sample_rate)?;
        d.set_item("tracked_files", c.tracked_files)?;
        Ok(d)
    }

    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = postcard::to_stdvec(&self.inner).map_err(|e| err(e.to_string()))?;
        Ok(PyBytes::new(py, &bytes))
    }

    #[staticmethod]
    fn restore(data: &[u8]) -> PyResult<Self> {
        Ok(PyMrc { inner: postcard::from_bytes(data).map_err(|e| err(format!("corrupt curve snapshot: {e}")))? })
    }
}

/// Next-access times for belady: of the whole stream, or (`op`, `partition`) of the streams a
/// bank's caches see (`future::next_access_in_streams`).
#[pyfunction]
#[pyo3(signature = (file_id, op=None, partition=None))]
fn next_access_times<'py>(
    py: Python<'py>,
    file_id: Col<'py, u64>,
    op: Option<Col<'py, u8>>,
    partition: Option<Col<'py, u32>>,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let (ids, op, part) = (file_id.as_slice()?, opt(&op)?, opt(&partition)?);
    let out = py.detach(|| crate::future::next_access_in_streams(ids, op, part)).map_err(err)?;
    Ok(PyArray1::from_vec(py, out))
}

/// Partition `index`'s part of `capacity` split `parts` ways, as the engine splits it.
#[pyfunction]
fn capacity_share(capacity: u64, parts: u64, index: u64) -> PyResult<u64> {
    if index >= parts {
        return Err(err(format!("partition {index} of {parts}")));
    }
    Ok(crate::shadow::share(capacity, parts, index))
}

/// Partition of each file among `parts` hash partitions (the same function the bank uses).
#[pyfunction]
fn partition_of<'py>(py: Python<'py>, file_id: PyReadonlyArray1<'py, u64>, parts: u32) -> PyResult<Bound<'py, PyArray1<u32>>> {
    if parts == 0 {
        return Err(err("parts must be at least 1".into()));
    }
    let out: Vec<u32> = file_id.as_slice()?.iter().map(|&id| hash::partition_of(id, parts)).collect();
    Ok(PyArray1::from_vec(py, out))
}

/// Parse the simulator's CSV trace (already decompressed bytes).
#[pyfunction]
fn read_csv_trace<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let t = py.detach(|| crate::trace::parse_csv(data)).map_err(err)?;
    let cols = crate::trace::Columns { timestamp: t.timestamp, id: t.id, size: t.size, bytes_read: t.bytes_read, tier: t.tier, key: Vec::new() };
    trace_dict(py, cols, t.tier_names)
}

/// Read a trace file (plain, zstd or gzip; csv or oracle-general) into columns; `-` is stdin.
#[pyfunction]
#[pyo3(signature = (path, format="csv", progress=None))]
fn read_trace<'py>(py: Python<'py>, path: &str, format: &str, progress: Option<PyRef<'py, PyProgress>>) -> PyResult<Bound<'py, PyDict>> {
    let fmt = crate::reader::Format::parse(format).map_err(err)?;
    let progress = PyProgress::shared(progress);
    let (t, tier_names) = py.detach(|| crate::reader::read_all_until(path, fmt, progress.cancelled())).map_err(err)?;
    trace_dict(py, t, tier_names)
}

/// How far a running `simulate_file` is (read from another Python thread: a progress bar).
#[pyclass(name = "Progress", module = "cachescope._simcore", frozen)]
#[derive(Default)]
struct PyProgress {
    inner: Arc<crate::run::Progress>,
}

impl PyProgress {
    /// What a run reports into: the caller's, or one nobody reads.
    fn shared(p: Option<PyRef<'_, PyProgress>>) -> Arc<crate::run::Progress> {
        p.map_or_else(Default::default, |p| p.inner.clone())
    }
}

#[pymethods]
impl PyProgress {
    #[new]
    fn new() -> Self {
        Self::default()
    }
    /// Share of the run done, 0 to 1.
    fn fraction(&self) -> f64 {
        self.inner.fraction()
    }
    /// Stop the run at its next batch; it then fails with ValueError("interrupted").
    fn cancel(&self) {
        self.inner.cancel()
    }
}

/// Stream a trace file through every cache in one pass (reader thread + this one); returns
/// dict(requests, tier_names, totals) with totals exact ints, flat (caches, tiers, fields).
/// `progress` (a `Progress`) is updated as it runs. `seeds`: [(cache index, [(file_id, cached
/// bytes, last access seconds)])], warm starts of xcaches.
#[pyfunction]
#[pyo3(signature = (path, specs, format="csv", progress=None, seeds=None))]
#[allow(clippy::type_complexity)]
fn simulate_file<'py>(
    py: Python<'py>,
    path: &str,
    specs: Vec<SpecIn>,
    format: &str,
    progress: Option<PyRef<'py, PyProgress>>,
    seeds: Option<Vec<(usize, Vec<(u64, u64, u32)>)>>,
) -> PyResult<Bound<'py, PyDict>> {
    let fmt = crate::reader::Format::parse(format).map_err(err)?;
    let specs: Vec<CacheSpec> = specs.into_iter().map(SpecIn::into_spec).collect();
    let progress = PyProgress::shared(progress);
    let seeds = seeds.unwrap_or_default();
    let run = py.detach(|| crate::run::simulate_file_seeded(path, fmt, specs, &seeds, &progress)).map_err(err)?;
    let d = PyDict::new(py);
    d.set_item("requests", run.rows)?;
    d.set_item("tier_names", run.tier_names)?;
    d.set_item("totals", run.totals)?;
    Ok(d)
}

/// (working set in bytes, rows) of a trace file, in one streamed pass (`run::working_set`).
#[pyfunction]
#[pyo3(signature = (path, format="csv", progress=None))]
fn working_set(py: Python<'_>, path: &str, format: &str, progress: Option<PyRef<'_, PyProgress>>) -> PyResult<(u128, u64)> {
    let fmt = crate::reader::Format::parse(format).map_err(err)?;
    let progress = PyProgress::shared(progress);
    py.detach(|| crate::run::working_set(path, fmt, &progress)).map_err(err)
}

/// Codes and the distinct values, as `pandas.factorize` gives them.
type Factorized<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyList>);

/// Rows of `values` (n, fields) summed by `key` (n,): (index of each distinct key's first row, in
/// ascending key order; the sums, wrapping as numpy's uint64 adds).
#[pyfunction]
fn sum_by_key<'py>(
    py: Python<'py>,
    key: PyReadonlyArray1<'py, i64>,
    values: numpy::PyReadonlyArray2<'py, u64>,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, numpy::PyArray2<u64>>)> {
    let (n, width) = (values.shape()[0], values.shape()[1]);
    let key = key.as_slice().map_err(|e| PyValueError::new_err(format!("key: {e}")))?;
    if key.len() != n {
        return Err(PyValueError::new_err(format!("key has {} values, values has {n} rows", key.len())));
    }
    let flat = values.as_slice().map_err(|e| PyValueError::new_err(format!("values: {e}")))?;
    let (first, sums) = py.detach(|| crate::windowed::sum_by_key(key, flat, width));
    let m = first.len();
    let sums = numpy::ndarray::Array2::from_shape_vec((m, width), sums).expect("m rows of width");
    Ok((first.into_pyarray(py), sums.into_pyarray(py)))
}

/// `blocks` (2-D uint64 arrays of one width, C-contiguous) stacked as one (width, rows) array:
/// each counter one contiguous column for the store, transposed in one pass.
#[pyfunction]
fn stacked_columns<'py>(
    py: Python<'py>,
    blocks: Vec<numpy::PyReadonlyArray2<'py, u64>>,
) -> PyResult<Bound<'py, numpy::PyArray2<u64>>> {
    let Some(width) = blocks.first().map(|b| b.shape()[1]) else {
        return Err(PyValueError::new_err("stacked_columns needs at least one block"));
    };
    let mut flat = Vec::with_capacity(blocks.len());
    for (i, b) in blocks.iter().enumerate() {
        if b.shape()[1] != width {
            return Err(PyValueError::new_err(format!("block {i} has {} columns, block 0 has {width}", b.shape()[1])));
        }
        flat.push(b.as_slice().map_err(|e| PyValueError::new_err(format!("block {i}: {e}")))?);
    }
    let n: usize = blocks.iter().map(|b| b.shape()[0]).sum();
    let out = py.detach(|| crate::windowed::stacked_columns(&flat, width));
    let out = numpy::ndarray::Array2::from_shape_vec((width, n), out).expect("width columns of n rows");
    Ok(out.into_pyarray(py))
}

/// `pandas.factorize` of an object array whose elements are all exact `str`: codes (int64) in
/// order of first appearance and the first object of each value; None when an element is
/// anything else (pandas then decides). Equal objects are found by address before their text:
/// the store's low-cardinality columns repeat a few shared objects.
#[pyfunction]
fn factorize_str<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, Py<PyAny>>,
) -> PyResult<Option<Factorized<'py>>> {
    let Ok(items) = values.as_slice() else { return Ok(None) };
    let uniques = PyList::empty(py);
    let mut by_ptr: rustc_hash::FxHashMap<usize, i64> = Default::default();
    let mut by_text: rustc_hash::FxHashMap<&str, i64> = Default::default();
    let mut codes = Vec::with_capacity(items.len());
    let (mut last_ptr, mut last_code) = (0usize, 0i64);
    for obj in items {
        let ptr = obj.as_ptr() as usize;
        if ptr == last_ptr {
            codes.push(last_code);
            continue;
        }
        let code = match by_ptr.get(&ptr) {
            Some(&c) => c,
            None => {
                let b = obj.bind(py);
                if !b.is_exact_instance_of::<PyString>() {
                    return Ok(None);
                }
                let Ok(text) = b.cast::<PyString>().expect("checked").to_str() else { return Ok(None) };
                let c = match by_text.get(text) {
                    Some(&c) => c,
                    None => {
                        let c = uniques.len() as i64;
                        uniques.append(b)?;
                        by_text.insert(text, c);
                        c
                    }
                };
                if by_ptr.len() < 4096 {
                    by_ptr.insert(ptr, c); // distinct objects of one text: by text alone
                }
                c
            }
        };
        (last_ptr, last_code) = (ptr, code);
        codes.push(code);
    }
    Ok(Some((PyArray1::from_vec(py, codes), uniques)))
}

/// The data-tier classifier's per-path work compiled (`crate::tiers`): called with a raw path
/// (and a record's VO hint), it gives `(normalised path, file_id, tier, VO)`; whatever it leaves
/// to Python (see `tiers`) goes to `fallback(path, hint)`, which gives the same tuple.
#[pyclass(name = "PathTiers", module = "cachescope._simcore", frozen)]
pub(crate) struct PyPathTiers {
    pub(crate) inner: crate::tiers::PathTiers,
    fallback: Py<PyAny>,
}

#[pymethods]
impl PyPathTiers {
    #[new]
    fn new(spec: &str, fallback: Py<PyAny>) -> PyResult<Self> {
        let vos: Vec<crate::tiers::VoSpec> = serde_json::from_str(spec).map_err(|e| err(format!("tier rules: {e}")))?;
        Ok(Self { inner: crate::tiers::PathTiers::new(vos).map_err(err)?, fallback })
    }

    /// (a method, not `__call__`: PyO3 passes a method's arguments without building a tuple)
    #[pyo3(signature = (path, hint=None))]
    fn resolve<'py>(&self, py: Python<'py>, path: &Bound<'py, PyAny>, hint: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        // a str with lone surrogates has no &str: Python's
        if let Some(text) = path.cast::<PyString>().ok().and_then(|s| s.to_str().ok()) {
            if let Some((norm, tier, vo)) = self.inner.path_tier(text, hint) {
                let id = xxhash_rust::xxh3::xxh3_64(norm.as_bytes());
                return Ok((norm, id, tier, vo).into_pyobject(py)?.into_any());
            }
        }
        self.fallback.bind(py).call1((path, hint))
    }
}

#[pymodule]
fn _simcore(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBank>()?;
    m.add_class::<PyMrc>()?;
    m.add_class::<crate::billing::BillingFast>()?;
    m.add_class::<crate::gstream::GstreamColumns>()?;
    m.add_class::<crate::gstream::GstreamState>()?;
    m.add_class::<PyPathTiers>()?;
    m.add_class::<PyProgress>()?;
    m.add_function(wrap_pyfunction!(crate::messages::decode_message, m)?)?;
    m.add("MESSAGE_FIELDS", crate::messages::FIELDS.to_vec())?;
    m.add_function(wrap_pyfunction!(next_access_times, m)?)?;
    m.add_function(wrap_pyfunction!(capacity_share, m)?)?;
    m.add_function(wrap_pyfunction!(partition_of, m)?)?;
    m.add_function(wrap_pyfunction!(read_csv_trace, m)?)?;
    m.add_function(wrap_pyfunction!(read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_file, m)?)?;
    m.add_function(wrap_pyfunction!(working_set, m)?)?;
    m.add_function(wrap_pyfunction!(sum_by_key, m)?)?;
    m.add_function(wrap_pyfunction!(stacked_columns, m)?)?;
    m.add_function(wrap_pyfunction!(factorize_str, m)?)?;
    m.add("POLICIES", POLICY_NAMES.to_vec())?;
    m.add("FIELDS", FIELDS.to_vec())?;
    m.add("SNAPSHOT_VERSION", bank::SNAPSHOT_VERSION)?;
    m.add("SOURCE_DIGEST", env!("SIMCORE_SOURCE_DIGEST"))?;
    m.add("OP_READ", bank::OP_READ)?;
    m.add("OP_WRITE", bank::OP_WRITE)?;
    m.add("OP_DELETE", bank::OP_DELETE)?;
    m.add("OP_BYPASS", bank::OP_BYPASS)?;
    Ok(())
}
