//! The Python module `lshbench._lshbench`: a thin binding over the `lshbench` library (built without its CLI
//! features). Each function converts its arguments once, releases the GIL for the whole computation, runs on a
//! rayon pool of the requested size, and hands back numpy arrays or Arrow buffers without a copy per element.
//! The Python package `lshbench` (python/lshbench/__init__.py) wraps these functions with keyword defaults,
//! docstrings and pyarrow Tables.
//!
//! Texts arrive as Arrow string columns (read in place from their offset and data buffers: no Python `str` per
//! row) or as a list of `str` (copied once into Rust strings). Errors carry the library's own messages, which
//! name the CLI's flags, as `ValueError`; a Rust panic surfaces as `pyo3_runtime.PanicException` (the wheel is
//! built with `panic = "unwind"`, see the `wheel` profile in the root Cargo.toml).

use lshbench_core::arch::Isa;
use lshbench_core::corpus::FieldValue;
use lshbench_core::dedup::state::{State, StateParams};
use lshbench_core::dedup::survivor::{self, Keep, RankInputs, Short};
use lshbench_core::dedup::{self, Corpus, Verify};
use lshbench_core::kernel::{self, Kernel, KernelParams};
use lshbench_core::lsh::choice;
use lshbench_core::lsh::cluster::{self, Edge, GroupMode};
use lshbench_core::lsh::index::LshIndex;
use lshbench_core::lsh::scurve::{Banding, ScurveOptions};
use lshbench_core::lsh::tune::{self as tuning, Targets, TuneOptions, TuneOutcome, TuneRow};
use lshbench_core::sets;
use lshbench_core::shingle::{Normalization, ShingleKind, Shingler};
use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use pyo3_arrow::PyTable;
use pyo3_arrow::input::AnyArray;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Float64Array, LargeStringArray, RecordBatch, StringArray, StringViewArray,
};
use arrow_schema::DataType;

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

// ---------------------------------------------------------------------------------------------------------
// Texts: Arrow columns in place, or owned strings from a Python list.

/// The texts of one call. Arrow chunks are kept alive (their buffers are Rust-owned after the C data import),
/// so `&str` views into them can cross the GIL release.
enum Texts {
    Arrow(Vec<ArrayRef>),
    Owned(Vec<String>),
}

impl Texts {
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Texts> {
        if obj.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "texts must be a sequence of str or an Arrow string array, not a single str",
            ));
        }
        if obj.hasattr("__arrow_c_array__")? || obj.hasattr("__arrow_c_stream__")? {
            let any: AnyArray = obj.extract()?;
            let chunked = any.into_chunked_array()?;
            let (chunks, _field) = chunked.into_inner();
            for c in &chunks {
                match c.data_type() {
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {}
                    other => {
                        return Err(PyTypeError::new_err(format!(
                            "texts: an Arrow array of {other}; expected string, large_string or string_view"
                        )));
                    }
                }
            }
            return Ok(Texts::Arrow(chunks));
        }
        let mut out = Vec::new();
        for (i, item) in obj.try_iter()?.enumerate() {
            let item = item?;
            let s = item.cast::<PyString>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "texts[{i}]: expected str, got {}",
                    item.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })?;
            out.push(s.to_cow()?.into_owned());
        }
        Ok(Texts::Owned(out))
    }

    /// A view of every text; a null Arrow value is refused with its row number.
    fn views(&self) -> PyResult<Vec<&str>> {
        match self {
            Texts::Owned(v) => Ok(v.iter().map(String::as_str).collect()),
            Texts::Arrow(chunks) => {
                let total: usize = chunks.iter().map(|c| c.len()).sum();
                let mut out = Vec::with_capacity(total);
                let mut row = 0usize;
                for c in chunks {
                    if c.null_count() > 0 {
                        let i = (0..c.len()).find(|&i| c.is_null(i)).unwrap_or(0);
                        return Err(PyValueError::new_err(format!(
                            "texts[{}] is null: every document needs a text",
                            row + i
                        )));
                    }
                    let any = c.as_any();
                    if let Some(a) = any.downcast_ref::<StringArray>() {
                        out.extend(a.iter().map(|s| s.unwrap_or("")));
                    } else if let Some(a) = any.downcast_ref::<LargeStringArray>() {
                        out.extend(a.iter().map(|s| s.unwrap_or("")));
                    } else if let Some(a) = any.downcast_ref::<StringViewArray>() {
                        out.extend(a.iter().map(|s| s.unwrap_or("")));
                    }
                    row += c.len();
                }
                Ok(out)
            }
        }
    }
}

/// Ids: given (one per text, `str` or anything `str()` accepts), else the 0-based position as the CLI does.
fn ids_from_py(ids: Option<&Bound<'_, PyAny>>, n: usize, first: usize) -> PyResult<Vec<String>> {
    let Some(ids) = ids.filter(|x| !x.is_none()) else {
        return Ok((first..first + n).map(|i| i.to_string()).collect());
    };
    let out = strings_from_py(ids)?;
    if out.len() != n {
        return Err(PyValueError::new_err(format!(
            "ids: {} ids for {n} texts",
            out.len()
        )));
    }
    Ok(out)
}

/// Each item of a Python iterable, Arrow array or Series, as its `str`.
fn strings_from_py(items: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let items = if items.hasattr("to_pylist")? {
        items.call_method0("to_pylist")?
    } else {
        items.clone()
    };
    let mut out = Vec::new();
    for item in items.try_iter()? {
        out.push(item?.str()?.to_cow()?.into_owned());
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------------
// Shingler and kernel from keyword arguments, with the CLI's checks and messages.

#[derive(Clone)]
struct SignSpec {
    kernel: String,
    num_perm: usize,
    seed: u64,
    shingle: ShingleKind,
    normalization: Normalization,
    isa: Option<Isa>,
}

impl SignSpec {
    #[allow(clippy::too_many_arguments)]
    fn new(
        kernel: &str,
        num_perm: usize,
        seed: u64,
        shingle: &str,
        lowercase: bool,
        collapse_whitespace: bool,
        strip_punctuation: bool,
        isa: Option<&str>,
    ) -> PyResult<SignSpec> {
        let shingle: ShingleKind = shingle.parse().map_err(value_error)?;
        let isa = match isa {
            None | Some("auto") => None,
            Some(name) => Some(Isa::parse(name).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "isa `{name}`: expected auto, scalar, portable, avx2 or avx512"
                ))
            })?),
        };
        Ok(SignSpec {
            kernel: kernel.to_string(),
            num_perm,
            seed,
            shingle,
            normalization: Normalization {
                lowercase,
                collapse_whitespace,
                strip_punctuation,
            },
            isa,
        })
    }

    fn build(&self) -> PyResult<(Shingler, Box<dyn Kernel>)> {
        let kernel = kernel::build(
            &self.kernel,
            &KernelParams {
                num_perm: self.num_perm,
                seed: self.seed,
                isa: self.isa,
            },
        )
        .map_err(value_error)?;
        let shingler = Shingler::new(self.shingle, self.normalization, self.seed)
            .with_isa(self.isa)
            .map_err(value_error)?;
        Ok((shingler, kernel))
    }
}

/// The pool of `threads` workers (every logical CPU when `None`) that calls run on. One pool is kept and
/// reused from call to call (a Spark task calls once per Arrow batch): a call asking for another size replaces
/// it, and the old one's threads end when its last call returns.
fn pool(threads: Option<usize>) -> PyResult<Arc<rayon::ThreadPool>> {
    static POOL: std::sync::Mutex<Option<(usize, Arc<rayon::ThreadPool>)>> =
        std::sync::Mutex::new(None);
    let size = threads.unwrap_or_else(lshbench_core::machine::logical_cpus);
    let mut kept = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((n, pool)) = kept.as_ref()
        && *n == size
    {
        return Ok(pool.clone());
    }
    let pool = Arc::new(lshbench_core::exec::thread_pool(Some(size)).map_err(value_error)?);
    *kept = Some((size, pool.clone()));
    Ok(pool)
}

/// Signs every text on the current rayon pool, in input order: (n x k slots, empty flags).
fn sign_all(texts: &[&str], shingler: &Shingler, kernel: &dyn Kernel) -> (Vec<u32>, Vec<bool>) {
    lshbench_core::pipeline::sign_texts(texts, shingler, kernel)
}

fn matrix<'py>(py: Python<'py>, data: Vec<u32>, k: usize) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let n = data.len() / k.max(1);
    PyArray1::from_vec(py, data).reshape([n, k])
}

/// sketch(texts, kernel, num_perm, seed, shingle, lowercase, collapse_whitespace, strip_punctuation, isa,
/// threads) -> uint32 array (n, num_perm).
#[pyfunction]
#[pyo3(signature = (texts, kernel, num_perm, seed, shingle, lowercase, collapse_whitespace, strip_punctuation, isa, threads))]
#[allow(clippy::too_many_arguments)]
fn sketch<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    kernel: &str,
    num_perm: usize,
    seed: u64,
    shingle: &str,
    lowercase: bool,
    collapse_whitespace: bool,
    strip_punctuation: bool,
    isa: Option<&str>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let spec = SignSpec::new(
        kernel,
        num_perm,
        seed,
        shingle,
        lowercase,
        collapse_whitespace,
        strip_punctuation,
        isa,
    )?;
    let (shingler, kernel) = spec.build()?;
    let pool = pool(threads)?;
    let texts = Texts::from_py(texts)?;
    let sigs = py.detach(|| -> PyResult<Vec<u32>> {
        let views = texts.views()?;
        Ok(pool
            .install(|| sign_all(&views, &shingler, kernel.as_ref()))
            .0)
    })?;
    matrix(py, sigs, num_perm)
}

/// band_keys(signatures, bands, rows, seed) -> uint64 array (n, bands): the keys `dedup` bands by.
#[pyfunction]
fn band_keys<'py>(
    py: Python<'py>,
    signatures: PyReadonlyArray2<'py, u32>,
    bands: usize,
    rows: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyArray2<u64>>> {
    let shape = signatures.shape();
    let (n, k) = (shape[0], shape[1]);
    let banding = Banding::new(bands, rows, k).map_err(value_error)?;
    let sigs = signatures
        .as_slice()
        .map(|s| s.to_vec())
        .or_else(|_| Ok::<_, PyErr>(signatures.as_array().iter().copied().collect::<Vec<u32>>()))?;
    let hasher = choice::band_hasher(banding, seed);
    let keys = py.detach(|| {
        let mut keys = vec![0u64; n * bands];
        if bands > 0 && k > 0 {
            keys.par_chunks_mut(bands)
                .zip(sigs.par_chunks(k))
                .for_each(|(out, sig)| {
                    for (b, o) in out.iter_mut().enumerate() {
                        *o = hasher.key(b, sig);
                    }
                });
        }
        keys
    });
    PyArray1::from_vec(py, keys).reshape([n, bands])
}

/// A contiguous copy of a 2-d uint32 array (no copy when it is already C-contiguous... as a slice).
fn rows_of(sigs: &PyReadonlyArray2<'_, u32>) -> (Vec<u32>, usize, usize) {
    let shape = sigs.shape();
    let data = match sigs.as_slice() {
        Ok(s) => s.to_vec(),
        Err(_) => sigs.as_array().iter().copied().collect(),
    };
    (data, shape[0], shape[1])
}

fn estimator(kernel: &str, num_perm: usize, seed: u64) -> PyResult<Box<dyn Kernel>> {
    kernel::build(
        kernel,
        &KernelParams {
            num_perm,
            seed,
            isa: Some(Isa::Scalar),
        },
    )
    .map_err(value_error)
}

/// estimate(sig_a, sig_b, kernel, seed) -> float: the kernel's Jaccard estimate of two signatures.
#[pyfunction]
fn estimate(
    sig_a: PyReadonlyArray1<'_, u32>,
    sig_b: PyReadonlyArray1<'_, u32>,
    kernel: &str,
    seed: u64,
) -> PyResult<f64> {
    let (a, b) = (sig_a.as_array(), sig_b.as_array());
    if a.len() != b.len() {
        return Err(PyValueError::new_err(format!(
            "signatures of different lengths: {} and {}",
            a.len(),
            b.len()
        )));
    }
    let (a, b): (Vec<u32>, Vec<u32>) = (a.iter().copied().collect(), b.iter().copied().collect());
    Ok(estimator(kernel, a.len(), seed)?.estimate(&a, &b))
}

fn pairs_of(pairs: &PyReadonlyArray2<'_, i64>, n: usize) -> PyResult<Vec<(usize, usize)>> {
    let arr = pairs.as_array();
    if arr.ncols() != 2 {
        return Err(PyValueError::new_err(format!(
            "pairs must have shape (m, 2), not {:?}",
            arr.shape()
        )));
    }
    let mut out = Vec::with_capacity(arr.nrows());
    for (row, p) in arr.rows().into_iter().enumerate() {
        let check = |x: i64| -> PyResult<usize> {
            if x < 0 || x as usize >= n {
                Err(PyValueError::new_err(format!(
                    "pairs[{row}]: index {x} is outside 0..{n}"
                )))
            } else {
                Ok(x as usize)
            }
        };
        out.push((check(p[0])?, check(p[1])?));
    }
    Ok(out)
}

/// estimate_pairs(signatures, pairs, kernel, seed, threads) -> float64 array (m,).
#[pyfunction]
fn estimate_pairs<'py>(
    py: Python<'py>,
    signatures: PyReadonlyArray2<'py, u32>,
    pairs: PyReadonlyArray2<'py, i64>,
    kernel: &str,
    seed: u64,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (sigs, n, k) = rows_of(&signatures);
    let pairs = pairs_of(&pairs, n)?;
    let est = estimator(kernel, k.max(1), seed)?;
    let pool = pool(threads)?;
    let out = py.detach(|| {
        pool.install(|| {
            pairs
                .par_iter()
                .map(|&(a, b)| est.estimate(&sigs[a * k..(a + 1) * k], &sigs[b * k..(b + 1) * k]))
                .collect::<Vec<f64>>()
        })
    });
    Ok(PyArray1::from_vec(py, out))
}

/// The shingler of the exact-similarity functions (no kernel), from keyword arguments with the CLI's checks.
fn shingler_of(
    shingle: &str,
    lowercase: bool,
    collapse_whitespace: bool,
    strip_punctuation: bool,
    seed: u64,
) -> PyResult<Shingler> {
    let spec = SignSpec::new(
        "scalar",
        1,
        seed,
        shingle,
        lowercase,
        collapse_whitespace,
        strip_punctuation,
        None,
    )?;
    Ok(Shingler::new(spec.shingle, spec.normalization, seed))
}

/// jaccard(text_a, text_b, shingle, lowercase, collapse_whitespace, strip_punctuation, seed) -> float: exact.
#[pyfunction]
fn jaccard(
    text_a: &str,
    text_b: &str,
    shingle: &str,
    lowercase: bool,
    collapse_whitespace: bool,
    strip_punctuation: bool,
    seed: u64,
) -> PyResult<f64> {
    let shingler = shingler_of(
        shingle,
        lowercase,
        collapse_whitespace,
        strip_punctuation,
        seed,
    )?;
    Ok(sets::jaccard(
        &sets::verification_set(&shingler, text_a),
        &sets::verification_set(&shingler, text_b),
    ))
}

/// jaccard_pairs(texts, pairs, shingle, ..., seed, threads) -> float64 array (m,): exact Jaccard per pair.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn jaccard_pairs<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    pairs: PyReadonlyArray2<'py, i64>,
    shingle: &str,
    lowercase: bool,
    collapse_whitespace: bool,
    strip_punctuation: bool,
    seed: u64,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let shingler = shingler_of(
        shingle,
        lowercase,
        collapse_whitespace,
        strip_punctuation,
        seed,
    )?;
    let texts = Texts::from_py(texts)?;
    let views = texts.views()?;
    let pairs = pairs_of(&pairs, views.len())?;
    let pool = pool(threads)?;
    let out = py.detach(|| {
        pool.install(|| {
            pairs
                .par_iter()
                .map(|&(a, b)| {
                    sets::jaccard(
                        &sets::verification_set(&shingler, views[a]),
                        &sets::verification_set(&shingler, views[b]),
                    )
                })
                .collect::<Vec<f64>>()
        })
    });
    Ok(PyArray1::from_vec(py, out))
}

/// scurve(bands, rows, s) -> float: P(candidate | similarity s) = 1 - (1 - s^r)^b.
#[pyfunction]
fn scurve(bands: usize, rows: usize, s: f64) -> PyResult<f64> {
    let opts = ScurveOptions {
        bands,
        rows,
        num_perm: None,
        step: 0.05,
        crossings: vec![],
    };
    let banding = opts.banding().map_err(value_error)?;
    if !(0.0..=1.0).contains(&s) {
        return Err(PyValueError::new_err(format!(
            "s = {s} is not a similarity in [0, 1]"
        )));
    }
    Ok(banding.probability(s))
}

fn row_dict<'py>(py: Python<'py>, r: &TuneRow) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("bands", r.banding.bands)?;
    d.set_item("rows", r.banding.rows)?;
    d.set_item("rule_of_thumb", r.rule_of_thumb)?;
    d.set_item("steepest", r.steepest)?;
    d.set_item("p_fp", r.p_lo)?;
    d.set_item("p_recall", r.p_hi)?;
    Ok(d)
}

/// tune(num_perm, fn_sim, fn_prob, fp_sim, fp_prob) -> dict: the CLI's choice and its table.
#[pyfunction]
fn tune<'py>(
    py: Python<'py>,
    num_perm: usize,
    fn_sim: f64,
    fn_prob: f64,
    fp_sim: f64,
    fp_prob: f64,
) -> PyResult<Bound<'py, PyDict>> {
    for (what, x) in [
        ("fn", fn_sim),
        ("fn", fn_prob),
        ("fp", fp_sim),
        ("fp", fp_prob),
    ] {
        if !(0.0..=1.0).contains(&x) {
            return Err(PyValueError::new_err(format!(
                "{what}=({}, {}): both numbers must lie in [0, 1]",
                if what == "fn" { fn_sim } else { fp_sim },
                if what == "fn" { fn_prob } else { fp_prob },
            )));
        }
    }
    let targets = Targets {
        s_hi: fn_sim,
        max_fn: fn_prob,
        s_lo: fp_sim,
        max_fp: fp_prob,
    };
    let opts = TuneOptions {
        num_perm,
        targets,
        top: 15,
        datasketch: None,
    };
    opts.validate().map_err(value_error)?;
    let out = PyDict::new(py);
    let table = PyList::empty(py);
    match tuning::tune(num_perm, &targets) {
        TuneOutcome::Feasible(rows) => {
            out.set_item("feasible", true)?;
            out.set_item("meets_recall", true)?;
            out.set_item("choice", row_dict(py, &rows[0])?)?;
            for r in &rows {
                table.append(row_dict(py, r)?)?;
            }
        }
        TuneOutcome::Infeasible {
            front,
            compromise,
            compromise_meets_recall,
        } => {
            out.set_item("feasible", false)?;
            out.set_item("meets_recall", compromise_meets_recall)?;
            out.set_item("choice", row_dict(py, &compromise)?)?;
            for r in &front {
                table.append(row_dict(py, r)?)?;
            }
        }
    }
    out.set_item("table", table)?;
    out.set_item("report", opts.report().map_err(value_error)?)?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------------
// Dedup.

fn parse_verify(s: &str) -> PyResult<Verify> {
    match s {
        "exact" => Ok(Verify::Exact),
        "estimate" => Ok(Verify::Estimate),
        "none" => Ok(Verify::None),
        _ => Err(PyValueError::new_err(format!(
            "verify `{s}`: expected exact, estimate or none"
        ))),
    }
}

fn parse_groups(s: &str) -> PyResult<GroupMode> {
    match s {
        "components" => Ok(GroupMode::Components),
        "center" => Ok(GroupMode::Center),
        _ => Err(PyValueError::new_err(format!(
            "groups `{s}`: expected components or center"
        ))),
    }
}

fn table(py: Python<'_>, batch: RecordBatch) -> PyResult<Py<PyAny>> {
    let schema = batch.schema();
    let t = PyTable::try_new(vec![batch], schema)?;
    Ok(t.into_pyarrow(py)?.unbind())
}

fn parse_keep(s: &str) -> PyResult<Keep> {
    s.parse().map_err(value_error)
}

fn parse_short(s: &str) -> PyResult<Short> {
    match s {
        "exact" => Ok(Short::Exact),
        "keep" => Ok(Short::Keep),
        "drop" => Ok(Short::Drop),
        _ => Err(PyValueError::new_err(format!(
            "short `{s}`: expected exact, keep or drop"
        ))),
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// The survivor values of a column policy, one per text, as the CLI reads a field: a number, a text, or missing
/// (null, None, NaN). An Arrow array must be float64, a string type or null (the wrapper casts numeric and
/// temporal arrays to float64); a sequence holds `int`, `float`, `str` or `None`. Booleans are refused, as the
/// CLI refuses them in JSONL.
fn rank_values_from_py(obj: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<FieldValue>> {
    let number = |x: f64| {
        if x.is_nan() {
            FieldValue::Missing
        } else {
            FieldValue::Number(x)
        }
    };
    let mut out = Vec::with_capacity(n);
    if obj.hasattr("__arrow_c_array__")? || obj.hasattr("__arrow_c_stream__")? {
        let any: AnyArray = obj.extract()?;
        let (chunks, _field) = any.into_chunked_array()?.into_inner();
        for c in &chunks {
            let any = c.as_any();
            let text =
                |s: Option<&str>| s.map_or(FieldValue::Missing, |s| FieldValue::Text(s.into()));
            if let Some(a) = any.downcast_ref::<Float64Array>() {
                out.extend(a.iter().map(|x| x.map_or(FieldValue::Missing, number)));
            } else if let Some(a) = any.downcast_ref::<StringArray>() {
                out.extend(a.iter().map(text));
            } else if let Some(a) = any.downcast_ref::<LargeStringArray>() {
                out.extend(a.iter().map(text));
            } else if let Some(a) = any.downcast_ref::<StringViewArray>() {
                out.extend(a.iter().map(text));
            } else if c.data_type() == &DataType::Null {
                out.extend(std::iter::repeat_n(FieldValue::Missing, c.len()));
            } else {
                return Err(PyTypeError::new_err(format!(
                    "keep_values: an Arrow array of {}; expected numbers, dates, timestamps or strings",
                    c.data_type()
                )));
            }
        }
    } else {
        for (i, item) in obj.try_iter()?.enumerate() {
            let item = item?;
            out.push(if item.is_none() {
                FieldValue::Missing
            } else if item.is_instance_of::<pyo3::types::PyBool>() {
                return Err(PyTypeError::new_err(format!(
                    "keep_values[{i}]: a bool; a survivor value must be a number, a str or None"
                )));
            } else if let Ok(s) = item.cast::<PyString>() {
                FieldValue::Text(s.to_cow()?.into_owned())
            } else if let Ok(x) = item.extract::<f64>() {
                number(x)
            } else {
                return Err(PyTypeError::new_err(format!(
                    "keep_values[{i}]: a {}; a survivor value must be a number, a str or None",
                    type_name(&item)
                )));
            });
        }
    }
    if out.len() != n {
        return Err(PyValueError::new_err(format!(
            "keep_values: {} values for {n} texts",
            out.len()
        )));
    }
    Ok(out)
}

/// dedup(texts, ids, threshold, bands, rows, verify, groups, kernel, num_perm, seed, shingle, lowercase,
/// collapse_whitespace, strip_punctuation, bucket_cap, max_candidates, pair_budget, isa, threads, keep,
/// keep_values, short) -> (pairs, clusters, removed, kept): the first three pyarrow Tables with the CLI's
/// columns (`--pairs`, `--clusters`, `--removed`), `kept` a numpy bool array (true: the document survives).
/// `keep` is a `--keep` policy; a column policy ranks by `keep_values` (one per text).
#[pyfunction]
#[pyo3(signature = (texts, ids, threshold, bands, rows, verify, groups, kernel, num_perm, seed, shingle, lowercase, collapse_whitespace, strip_punctuation, bucket_cap, max_candidates, pair_budget, isa, threads, keep="center", keep_values=None, short="exact"))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn dedup_texts<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    ids: Option<&Bound<'py, PyAny>>,
    threshold: Option<f64>,
    bands: Option<usize>,
    rows: Option<usize>,
    verify: &str,
    groups: &str,
    kernel: &str,
    num_perm: usize,
    seed: u64,
    shingle: &str,
    lowercase: bool,
    collapse_whitespace: bool,
    strip_punctuation: bool,
    bucket_cap: usize,
    max_candidates: u64,
    pair_budget: usize,
    isa: Option<&str>,
    threads: Option<usize>,
    keep: &str,
    keep_values: Option<&Bound<'py, PyAny>>,
    short: &str,
) -> PyResult<(Py<PyAny>, Py<PyAny>, Py<PyAny>, Bound<'py, PyArray1<bool>>)> {
    let spec = SignSpec::new(
        kernel,
        num_perm,
        seed,
        shingle,
        lowercase,
        collapse_whitespace,
        strip_punctuation,
        isa,
    )?;
    let verify = parse_verify(verify)?;
    let keep = parse_keep(keep)?;
    let short = parse_short(short)?;
    let keep_values = keep_values.filter(|v| !v.is_none());
    match (keep.field(), keep_values) {
        (Some(_), None) => {
            return Err(PyValueError::new_err(format!(
                "keep `{keep}` ranks by a column: pass its values as keep_values (one per text)"
            )));
        }
        (None, Some(_)) => {
            return Err(PyValueError::new_err(format!(
                "keep_values are only read by a column policy (max or min), not by keep `{keep}`"
            )));
        }
        _ => {}
    }
    let options = dedup::DedupOptions {
        bands,
        rows,
        threshold,
        verify,
        groups: parse_groups(groups)?,
        bucket_cap,
        max_candidates,
        pair_budget,
        seed,
        keep: keep.clone(),
        short,
        ..dedup::DedupOptions::default()
    };
    // The binding signs full-width slots (it takes no `bits`), so the S-curve is tuned in J itself.
    let config = options.config(num_perm, 32).map_err(value_error)?;
    let (shingler, kernel) = spec.build()?;
    let pool = pool(threads)?;
    let texts = Texts::from_py(texts)?;
    let n = match &texts {
        Texts::Owned(v) => v.len(),
        Texts::Arrow(c) => c.iter().map(|a| a.len()).sum(),
    };
    let ids = ids_from_py(ids, n, 0)?;
    let values = match keep_values {
        Some(v) => rank_values_from_py(v, n)?,
        None => Vec::new(),
    };
    let outcome = py.detach(|| -> PyResult<dedup::DedupOutcome> {
        let views = texts.views()?;
        pool.install(|| {
            let (signatures, mut empty) = sign_all(&views, &shingler, kernel.as_ref());
            // As the CLI: short documents out of banding (marked empty) under --short keep|drop.
            let short_docs = dedup::short_documents(views.par_iter().copied(), &shingler, short);
            for &i in &short_docs {
                empty[i] = true;
            }
            let inputs = RankInputs {
                lengths: if keep.needs_lengths() {
                    views.iter().map(|t| dedup::text_length(t)).collect()
                } else {
                    Vec::new()
                },
                values,
            };
            let rank = survivor::ranking(&keep, 0, n, &inputs, &ids).map_err(value_error)?;
            let mut corpus = Corpus {
                ids,
                empty,
                signatures,
                texts: if verify == Verify::Exact {
                    views.iter().map(|s| s.to_string()).collect()
                } else {
                    vec![String::new(); views.len()]
                },
                rank,
                short_docs: short_docs.into_iter().map(|i| i as u32).collect(),
                short,
                keep,
                ..Corpus::default()
            };
            dedup::dedup_signed(&mut corpus, kernel.as_ref(), &shingler, &config, false)
                .map_err(value_error)
        })
    })?;
    // The CLI's Parquet tables, column for column and type for type.
    let pairs = table(py, dedup::tables::pairs_batch(&outcome))?;
    let clusters = table(py, dedup::tables::clusters_batch(&outcome))?;
    let removed = table(py, dedup::tables::removed_batch(&outcome))?;
    let kept: Vec<bool> = outcome.removed().into_iter().map(|r| !r).collect();
    Ok((pairs, clusters, removed, PyArray1::from_vec(py, kept)))
}

/// group_ranked(n, a, b, similarity, groups, rank) -> int64 array (n,): the grouping `dedup` makes of `n`
/// documents `0..n` from the verified edges `(a[i], b[i], similarity[i])` (in the CLI's order: sorted by a, then
/// b), as each document's centre (-1: in no group). `rank` (one per document, lower preferred, ties by
/// index) is the survivor ranking; without it the centre is the most connected member. The Spark job runs it
/// on one connected component at a time, so that its groups are the CLI's.
#[pyfunction]
#[pyo3(signature = (n, a, b, similarity, groups, rank=None))]
fn group_ranked<'py>(
    py: Python<'py>,
    n: usize,
    a: PyReadonlyArray1<'py, i64>,
    b: PyReadonlyArray1<'py, i64>,
    similarity: PyReadonlyArray1<'py, f64>,
    groups: &str,
    rank: Option<PyReadonlyArray1<'py, i64>>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let mode = parse_groups(groups)?;
    let (a, b, similarity) = (a.as_array(), b.as_array(), similarity.as_array());
    if a.len() != b.len() || a.len() != similarity.len() {
        return Err(PyValueError::new_err(format!(
            "a, b and similarity must have one entry per edge: lengths {}, {} and {}",
            a.len(),
            b.len(),
            similarity.len()
        )));
    }
    if n > u32::MAX as usize {
        return Err(PyValueError::new_err(format!(
            "n = {n} documents: at most {} are supported",
            u32::MAX
        )));
    }
    let node = |i: usize, x: i64| -> PyResult<u32> {
        if x < 0 || x as usize >= n {
            Err(PyValueError::new_err(format!(
                "edge {i}: document {x} is outside 0..{n}"
            )))
        } else {
            Ok(x as u32)
        }
    };
    let edges = a
        .iter()
        .zip(b.iter())
        .zip(similarity.iter())
        .enumerate()
        .map(|(i, ((&x, &y), &s))| {
            Ok(Edge {
                a: node(i, x)?,
                b: node(i, y)?,
                similarity: s,
            })
        })
        .collect::<PyResult<Vec<Edge>>>()?;
    let rank: Option<Vec<u32>> = match rank {
        None => None,
        Some(r) => {
            let r = r.as_array();
            if r.len() != n {
                return Err(PyValueError::new_err(format!(
                    "rank: {} entries for {n} documents",
                    r.len()
                )));
            }
            Some(
                r.iter()
                    .enumerate()
                    .map(|(i, &x)| {
                        u32::try_from(x).map_err(|_| {
                            PyValueError::new_err(format!("rank[{i}] = {x} is outside 0..2**32"))
                        })
                    })
                    .collect::<PyResult<_>>()?,
            )
        }
    };
    let centre = py.detach(|| {
        let mut centre = vec![-1i64; n];
        for g in cluster::group_ranked(n, &edges, mode, rank.as_deref()) {
            for m in g.members {
                centre[m as usize] = g.center as i64;
            }
        }
        centre
    });
    Ok(PyArray1::from_vec(py, centre))
}

/// short_documents(texts, shingle, lowercase, collapse_whitespace, strip_punctuation, seed, threads) -> bool
/// array (n,): whether each text is shorter than one shingle (what `--short keep|drop` takes out of banding).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn short_documents<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    shingle: &str,
    lowercase: bool,
    collapse_whitespace: bool,
    strip_punctuation: bool,
    seed: u64,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<bool>>> {
    let shingler = shingler_of(
        shingle,
        lowercase,
        collapse_whitespace,
        strip_punctuation,
        seed,
    )?;
    let pool = pool(threads)?;
    let texts = Texts::from_py(texts)?;
    let mask = py.detach(|| -> PyResult<Vec<bool>> {
        let views = texts.views()?;
        let mut mask = vec![false; views.len()];
        // Short::Keep and Short::Drop select the same documents: those shorter than one shingle.
        let short = pool
            .install(|| dedup::short_documents(views.par_iter().copied(), &shingler, Short::Keep));
        for i in short {
            mask[i] = true;
        }
        Ok(mask)
    })?;
    Ok(PyArray1::from_vec(py, mask))
}

// ---------------------------------------------------------------------------------------------------------
// The streaming index.

/// An LSH index over signatures of texts, with ids; saves and loads the CLI's dedup state format.
#[pyclass(module = "lshbench._lshbench", name = "LSHIndex")]
struct PyLshIndex {
    spec: SignSpec,
    shingler: Shingler,
    kernel: Box<dyn Kernel>,
    index: LshIndex,
    /// Every document added, by position (removed ones included, marked in `removed`).
    ids: Vec<String>,
    empty: Vec<bool>,
    signatures: Vec<u32>,
    removed: Vec<bool>,
    /// The live positions of each id.
    positions: HashMap<String, Vec<u32>>,
    threads: Option<usize>,
}

impl PyLshIndex {
    fn sign(&self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<(Vec<u32>, Vec<bool>)> {
        let pool = pool(self.threads)?;
        let texts = Texts::from_py(texts)?;
        let (shingler, kernel) = (&self.shingler, self.kernel.as_ref());
        py.detach(|| {
            let views = texts.views()?;
            Ok(pool.install(|| sign_all(&views, shingler, kernel)))
        })
    }

    fn state_params(&self) -> StateParams {
        StateParams::new(self.kernel.as_ref(), &self.shingler, self.spec.seed)
    }

    /// Adds documents (signatures and flags) under their ids; empty ones are kept but never indexed.
    /// With `query`, first returns for each the ids of earlier documents sharing a band.
    fn add(
        &mut self,
        ids: Vec<String>,
        sigs: &[u32],
        empty: &[bool],
        query: bool,
    ) -> Vec<Vec<String>> {
        let k = self.spec.num_perm;
        let mut found = Vec::new();
        for (j, id) in ids.into_iter().enumerate() {
            let sig = &sigs[j * k..(j + 1) * k];
            let pos = self.ids.len() as u32;
            if query {
                let hits = if empty[j] {
                    Vec::new()
                } else {
                    self.index.query(sig)
                };
                found.push(hits.iter().map(|&h| self.ids[h as usize].clone()).collect());
            }
            if !empty[j] {
                self.index.insert(pos, sig);
            }
            self.positions.entry(id.clone()).or_default().push(pos);
            self.ids.push(id);
            self.empty.push(empty[j]);
            self.removed.push(false);
            self.signatures.extend_from_slice(sig);
        }
        found
    }

    /// The live positions, in insertion order.
    fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.ids.len()).filter(|&p| !self.removed[p])
    }

    /// The live documents' ids, empty flags and signatures, in insertion order.
    fn live_parts(&self) -> (Vec<String>, Vec<bool>, Vec<u32>) {
        let k = self.spec.num_perm;
        let (mut ids, mut empty, mut sigs) = (Vec::new(), Vec::new(), Vec::new());
        for p in self.live() {
            ids.push(self.ids[p].clone());
            empty.push(self.empty[p]);
            sigs.extend_from_slice(&self.signatures[p * k..(p + 1) * k]);
        }
        (ids, empty, sigs)
    }
}

#[pymethods]
impl PyLshIndex {
    #[new]
    #[pyo3(signature = (bands, rows, kernel, num_perm, seed, shingle, lowercase, collapse_whitespace, strip_punctuation, isa, threads))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        bands: usize,
        rows: usize,
        kernel: &str,
        num_perm: Option<usize>,
        seed: u64,
        shingle: &str,
        lowercase: bool,
        collapse_whitespace: bool,
        strip_punctuation: bool,
        isa: Option<&str>,
        threads: Option<usize>,
    ) -> PyResult<Self> {
        let num_perm = num_perm.unwrap_or(bands.saturating_mul(rows));
        let banding = Banding::new(bands, rows, num_perm).map_err(value_error)?;
        let spec = SignSpec::new(
            kernel,
            num_perm,
            seed,
            shingle,
            lowercase,
            collapse_whitespace,
            strip_punctuation,
            isa,
        )?;
        let (shingler, kernel) = spec.build()?;
        pool(threads)?;
        Ok(PyLshIndex {
            spec,
            shingler,
            kernel,
            index: LshIndex::new(banding, choice::band_seed(seed)),
            ids: Vec::new(),
            empty: Vec::new(),
            signatures: Vec::new(),
            removed: Vec::new(),
            positions: HashMap::new(),
            threads,
        })
    }

    /// Documents held (empty ones included, removed ones not).
    fn __len__(&self) -> usize {
        self.positions.values().map(Vec::len).sum()
    }

    /// The ids held, in insertion order.
    #[getter]
    fn ids(&self) -> Vec<String> {
        self.live().map(|p| self.ids[p].clone()).collect()
    }

    /// Removes every document held under each of `ids`; returns how many were removed. Raises KeyError, and
    /// removes nothing, when an id is not held.
    fn remove(&mut self, ids: &Bound<'_, PyAny>) -> PyResult<usize> {
        let ids = strings_from_py(ids)?;
        if let Some(missing) = ids.iter().find(|id| !self.positions.contains_key(*id)) {
            return Err(pyo3::exceptions::PyKeyError::new_err(format!(
                "no document with id {missing:?} is held"
            )));
        }
        let k = self.spec.num_perm;
        let mut count = 0;
        for id in ids {
            for pos in self.positions.remove(&id).unwrap_or_default() {
                let p = pos as usize;
                if !self.empty[p] {
                    let sig = &self.signatures[p * k..(p + 1) * k];
                    assert!(self.index.remove(pos, sig), "a held document is banded");
                }
                self.removed[p] = true;
                count += 1;
            }
        }
        Ok(count)
    }

    /// (bands, rows).
    #[getter]
    fn banding(&self) -> (usize, usize) {
        let b = self.index.banding();
        (b.bands, b.rows)
    }

    /// The parameters of the signatures (as in a state file's header).
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.state_params();
        let d = PyDict::new(py);
        d.set_item("kernel", p.kernel)?;
        d.set_item("num_perm", p.num_perm)?;
        d.set_item("seed", p.seed)?;
        d.set_item("shingle", p.shingle)?;
        d.set_item("lowercase", p.lowercase)?;
        d.set_item("collapse_whitespace", p.collapse_whitespace)?;
        d.set_item("strip_punctuation", p.strip_punctuation)?;
        Ok(d)
    }

    /// The signatures held, (len, num_perm) uint32.
    fn signatures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<u32>>> {
        matrix(py, self.live_parts().2, self.spec.num_perm)
    }

    #[pyo3(signature = (texts, ids=None))]
    fn insert(
        &mut self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (sigs, empty) = self.sign(py, texts)?;
        let ids = ids_from_py(ids, empty.len(), self.ids.len())?;
        self.add(ids, &sigs, &empty, false);
        Ok(())
    }

    fn query(&mut self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<String>>> {
        let (sigs, empty) = self.sign(py, texts)?;
        let k = self.spec.num_perm;
        Ok((0..empty.len())
            .map(|j| {
                if empty[j] {
                    return Vec::new();
                }
                self.index
                    .query(&sigs[j * k..(j + 1) * k])
                    .iter()
                    .map(|&h| self.ids[h as usize].clone())
                    .collect()
            })
            .collect())
    }

    #[pyo3(signature = (texts, ids=None))]
    fn query_then_insert(
        &mut self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Vec<String>>> {
        let (sigs, empty) = self.sign(py, texts)?;
        let ids = ids_from_py(ids, empty.len(), self.ids.len())?;
        Ok(self.add(ids, &sigs, &empty, true))
    }

    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let params = self.state_params();
        let (ids, empty, signatures) = self.live_parts();
        py.detach(|| {
            lshbench_core::dedup::state::save_parts(&path, &params, &ids, &empty, &signatures)
        })
        .map_err(value_error)
    }

    #[staticmethod]
    #[pyo3(signature = (path, bands, rows, isa, threads))]
    fn load(
        py: Python<'_>,
        path: PathBuf,
        bands: usize,
        rows: usize,
        isa: Option<&str>,
        threads: Option<usize>,
    ) -> PyResult<Self> {
        let state = py.detach(|| State::load(&path)).map_err(value_error)?;
        let p = &state.params;
        let mut index = PyLshIndex::new(
            bands,
            rows,
            &p.kernel,
            Some(p.num_perm),
            p.seed,
            &p.shingle,
            p.lowercase,
            p.collapse_whitespace,
            p.strip_punctuation,
            isa,
            threads,
        )?;
        index.add(state.ids, &state.signatures, &state.empty, false);
        Ok(index)
    }
}

/// The names of the registered kernels.
#[pyfunction]
fn kernels() -> Vec<&'static str> {
    kernel::names()
}

/// The instruction sets this CPU runs, narrowest first.
#[pyfunction]
fn isas() -> Vec<&'static str> {
    Isa::ALL
        .iter()
        .filter(|i| i.supported())
        .map(|i| i.name())
        .collect()
}

/// Raises a Rust panic (for the test that a panic becomes a Python exception, not an abort).
#[pyfunction]
fn _panic_for_test() {
    panic!("lshbench: a deliberate panic for the test suite");
}

#[pymodule]
fn _lshbench(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sketch, m)?)?;
    m.add_function(wrap_pyfunction!(band_keys, m)?)?;
    m.add_function(wrap_pyfunction!(estimate, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(jaccard, m)?)?;
    m.add_function(wrap_pyfunction!(jaccard_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(scurve, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(dedup_texts, m)?)?;
    m.add_function(wrap_pyfunction!(group_ranked, m)?)?;
    m.add_function(wrap_pyfunction!(short_documents, m)?)?;
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    m.add_function(wrap_pyfunction!(isas, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add_class::<PyLshIndex>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The defaults every front end shares (lshbench_core::defaults): the Python signatures take theirs from here.
    let defaults = pyo3::types::PyDict::new(m.py());
    for (name, value) in lshbench_core::defaults::TABLE {
        match value {
            lshbench_core::defaults::Value::Text(t) => defaults.set_item(name, t)?,
            lshbench_core::defaults::Value::Count(n) => defaults.set_item(name, n)?,
        }
    }
    m.add("DEFAULTS", defaults)?;
    Ok(())
}
