//! Experiment configs: one TOML format for every experiment.
//!
//! A config file is either a suite (`include = ["theory.toml", ...]`, paths relative to the file) or one
//! experiment (`kind = "accuracy"`, ...). Every experiment has `kind`, an optional `name` (default: the file
//! stem; results go to `OUT/<name>/`), a `seed` and an optional `[quick]` table whose keys replace the
//! top-level keys of the same name under `--quick`. Sweeps are lists of `[[sweep]]` tables, each a cartesian
//! product of its lists. Unknown keys are errors that name the key, so a typo never silently runs the default.

use crate::error::ExperimentError;
use lshbench_core::exec::MAX_THREADS;
use lshbench_core::kernel::MAX_NUM_PERM;
use lshbench_core::lsh::scurve::Banding;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use std::path::{Path, PathBuf};

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

fn default_seed() -> u64 {
    42
}

/// The keys every experiment config has, flattened into each kind's config.
#[derive(Clone, Debug, Deserialize)]
pub struct Header {
    /// The experiment kind, one of [`KINDS`].
    pub kind: String,
    /// Results go to `OUT/<name>/`; default: the file stem.
    pub name: Option<String>,
    /// The experiment seed; every cell's seed derives from it and the cell's parameters.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// A line for people reading the file.
    pub description: Option<String>,
    /// Keys that replace the top-level keys of the same name under `--quick`.
    pub quick: Option<toml::Table>,
}

/// A dataset: a corpus file by path, or a generator with its parameters.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatasetSpec {
    /// A short name used in result paths and tables.
    pub name: String,
    /// A corpus file (JSONL, CSV, TSV, text; `.gz` is fine), relative to the working directory.
    pub path: Option<PathBuf>,
    /// A generator instead of a file: `synth` (the planted-cluster generator behind `lshbench gen`).
    pub generator: Option<String>,
    /// Generator: number of documents.
    pub docs: Option<usize>,
    /// Generator: seed.
    pub seed: Option<u64>,
    /// Use only the first `limit` documents.
    pub limit: Option<usize>,
}

impl DatasetSpec {
    fn validate(&self, key: &str) -> Result<(), String> {
        match (&self.path, &self.generator) {
            (Some(_), None) => Ok(()),
            (None, Some(g)) if g == "synth" => {
                if self.docs.unwrap_or(0) == 0 {
                    Err(format!("{key}.docs: a generated dataset needs docs >= 1"))
                } else if self.docs.unwrap_or(0) > MAX_DOCS {
                    Err(format!(
                        "{key}.docs: {} is above the limit {MAX_DOCS}",
                        self.docs.unwrap_or(0)
                    ))
                } else {
                    Ok(())
                }
            }
            (None, Some(g)) => Err(format!(
                "{key}.generator: unknown generator `{g}` (available: synth)"
            )),
            _ => Err(format!("{key}: give exactly one of `path` or `generator`")),
        }
    }
}

/// Parses a banding written "BxR", e.g. "42x3", with both at least 1.
pub fn parse_banding(s: &str) -> Option<Banding> {
    let (b, r) = s.split_once('x')?;
    let bands: usize = b.trim().parse().ok()?;
    let rows: usize = r.trim().parse().ok()?;
    Banding::new(bands, rows, usize::MAX).ok()
}

fn parse_bandings(list: &[String], key: &str) -> Result<Vec<Banding>, String> {
    list.iter()
        .enumerate()
        .map(|(i, s)| {
            parse_banding(s).ok_or_else(|| {
                format!("{key}[{i}]: `{s}` is not BANDSxROWS with both at least 1, e.g. \"42x3\"")
            })
        })
        .collect()
}

fn check_kernels(list: &[String], key: &str) -> Result<(), String> {
    if list.is_empty() {
        return Err(format!("{key}: list at least one kernel"));
    }
    let names = lshbench_core::kernel::names();
    for (i, k) in list.iter().enumerate() {
        if !names.contains(&k.as_str()) {
            return Err(format!(
                "{key}[{i}]: unknown kernel `{k}`; available: {}",
                names.join(", ")
            ));
        }
    }
    Ok(())
}

/// The most cells one sweep or study may ask for (the product of its lists' lengths).
pub const MAX_CELLS: u64 = 100_000;
/// The most trials (pairs, repetitions) per cell.
pub const MAX_TRIALS: usize = 10_000_000;
/// The largest union size |A u B| of a synthetic pair.
pub const MAX_UNION: usize = 10_000_000;
/// The most documents a generated dataset may ask for.
pub const MAX_DOCS: usize = 100_000_000;
/// The most timed repetitions per throughput cell.
pub const MAX_REPEATS: usize = 1_000;

/// Refuses a sweep whose cartesian product (`lens`, the lengths of its lists) exceeds [`MAX_CELLS`].
fn check_cells(lens: &[usize], key: &str) -> Result<(), String> {
    let cells = lens
        .iter()
        .fold(1u64, |acc, &n| acc.saturating_mul(n as u64));
    if cells > MAX_CELLS {
        return Err(format!(
            "{key}: the sweep asks for {cells} cells (the product of its lists' lengths); the limit is {MAX_CELLS}"
        ));
    }
    Ok(())
}

/// Refuses a list entry above `max`, naming `key[j]`.
fn check_at_most(list: &[usize], key: &str, max: usize) -> Result<(), String> {
    match list.iter().position(|&v| v > max) {
        Some(j) => Err(format!("{key}[{j}]: {} is above the limit {max}", list[j])),
        None => Ok(()),
    }
}

/// Refuses a single value above `max`, naming `key`.
fn check_one_at_most(value: usize, key: &str, max: usize) -> Result<(), String> {
    if value > max {
        return Err(format!("{key}: {value} is above the limit {max}"));
    }
    Ok(())
}

fn check_nonempty<T>(list: &[T], key: &str) -> Result<(), String> {
    if list.is_empty() {
        Err(format!("{key}: the list is empty"))
    } else {
        Ok(())
    }
}

fn check_unit_open(list: &[f64], key: &str) -> Result<(), String> {
    for (i, &j) in list.iter().enumerate() {
        if !(j > 0.0 && j < 1.0) {
            return Err(format!("{key}[{i}]: {j} is not in (0, 1)"));
        }
    }
    Ok(())
}

fn check_shingles(list: &[String], key: &str) -> Result<(), String> {
    check_nonempty(list, key)?;
    for (i, s) in list.iter().enumerate() {
        s.parse::<lshbench_core::shingle::ShingleKind>()
            .map_err(|e| format!("{key}[{i}]: {e}"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// theory

/// The textbook tables; no randomness, no sweep.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TheoryConfig {
    /// The keys every experiment has.
    #[serde(flatten)]
    pub header: Header,
    /// k for the tuning tables (the seeds use 128).
    #[serde(default = "default_theory_k")]
    pub num_perm: usize,
    /// Thresholds for datasketch's rule next to lshbench tune's.
    #[serde(default = "default_theory_t")]
    pub thresholds: Vec<f64>,
}
fn default_theory_k() -> usize {
    128
}
fn default_theory_t() -> Vec<f64> {
    vec![0.5, 0.8, 0.9]
}

// ---------------------------------------------------------------------------------------------------------
// accuracy

/// One cartesian product of accuracy cells.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccuracySweep {
    /// Registry names of the kernels.
    pub kernels: Vec<String>,
    /// k values.
    pub num_perm: Vec<usize>,
    /// Union sizes |A u B|.
    pub union: Vec<usize>,
    /// Target Jaccard values; each becomes the nearest achievable |A n B| / |A u B| for the union size.
    pub jaccard: Vec<f64>,
    /// `random` (fresh 64-bit elements every trial) and/or `consecutive` (runs of consecutive integers, with a
    /// fresh kernel seed every trial).
    pub elements: Vec<String>,
    /// Trials per cell (Ertl uses 10^4).
    pub trials: usize,
    /// Slot widths (b-bit slots, [`lshbench_core::kernel::bbit`]); default `[32]`, the full slots. A cell with b < 32
    /// runs the kernel as `NAME/bB` with the corrected estimator.
    #[serde(default = "default_bits")]
    pub bits: Vec<u32>,
}
fn default_bits() -> Vec<u32> {
    vec![32]
}

fn check_bit_list(list: &[u32], key: &str) -> Result<(), String> {
    check_nonempty(list, key)?;
    for (i, &b) in list.iter().enumerate() {
        lshbench_core::kernel::bbit::check_bits(b).map_err(|e| format!("{key}[{i}]: {e}"))?;
    }
    Ok(())
}

/// Estimator accuracy by Ertl's protocol.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccuracyConfig {
    /// The keys every experiment has.
    #[serde(flatten)]
    pub header: Header,
    /// The sweeps, run in order.
    pub sweep: Vec<AccuracySweep>,
}

// ---------------------------------------------------------------------------------------------------------
// scurve

/// One cartesian product of S-curve cells.
#[derive(Clone, Debug)]
pub struct ScurveSweep {
    /// Registry names of the kernels.
    pub kernels: Vec<String>,
    /// (b, r) settings, written "BxR"; each runs with k = b * r.
    pub bands_rows: Vec<Banding>,
    /// Union sizes |A u B| of the synthetic pairs.
    pub union: Vec<usize>,
    /// Jaccard grid (bin centres); each pair has exactly the nearest achievable J.
    pub jaccard: Vec<f64>,
    /// Independent pairs per (J, cell).
    pub trials: usize,
    /// Slot widths (b-bit slots, [`lshbench_core::kernel::bbit`]); default `[32]`. A cell with b < 32 bands the
    /// kernel's b-bit slots (rows named `NAME/bB`) against the S-curve at the slot agreement
    /// P = C + (1 - C) J.
    pub bits: Vec<u32>,
}

/// [`ScurveSweep`] as written, the bandings still text.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScurveSweepText {
    kernels: Vec<String>,
    bands_rows: Vec<String>,
    union: Vec<usize>,
    jaccard: Vec<f64>,
    trials: usize,
    #[serde(default = "default_bits")]
    bits: Vec<u32>,
}

/// `sweep = [...]` of an S-curve config, its "BxR" strings parsed (errors name `sweep[i].bands_rows[j]`).
fn scurve_sweeps<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ScurveSweep>, D::Error> {
    Vec::<ScurveSweepText>::deserialize(d)?
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            Ok(ScurveSweep {
                bands_rows: parse_bandings(&s.bands_rows, &format!("sweep[{i}].bands_rows"))
                    .map_err(serde::de::Error::custom)?,
                kernels: s.kernels,
                union: s.union,
                jaccard: s.jaccard,
                trials: s.trials,
                bits: s.bits,
            })
        })
        .collect()
}

/// The probability that one band agrees, on small sets where densification bends it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandAgreementSweep {
    /// Registry names of the kernels.
    pub kernels: Vec<String>,
    /// Union sizes |A u B|.
    pub union: Vec<usize>,
    /// Jaccard values (each becomes the nearest achievable one).
    pub jaccard: Vec<f64>,
    /// Rows per band.
    pub rows: Vec<usize>,
    /// k values; each runs k / r bands.
    pub num_perm: Vec<usize>,
    /// Pairs per cell.
    pub trials: usize,
}

/// Empirical S-curves against P(J) = 1 - (1 - J^r)^b.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScurveConfig {
    /// The keys every experiment has.
    #[serde(flatten)]
    pub header: Header,
    /// The sweeps, run in order.
    #[serde(deserialize_with = "scurve_sweeps")]
    pub sweep: Vec<ScurveSweep>,
    /// Band-agreement sweeps on small sets.
    #[serde(default)]
    pub band_agreement: Vec<BandAgreementSweep>,
    /// Family-wise false-alarm rate of the S-curve check over all checked cells (Bonferroni).
    #[serde(default = "default_family_alpha")]
    pub family_alpha: f64,
}
fn default_family_alpha() -> f64 {
    1e-3
}

// ---------------------------------------------------------------------------------------------------------
// recall

/// One recall study: a corpus, its shingles, the kernels and the bandings measured on it.
#[derive(Clone, Debug)]
pub struct RecallStudy {
    /// A short name for the study (result paths, tables).
    pub name: String,
    /// The corpus.
    pub dataset: DatasetSpec,
    /// The shingle spec, e.g. `char:5`.
    pub shingle: String,
    /// Lowercase the text before shingling.
    pub lowercase: bool,
    /// Registry names of the kernels.
    pub kernels: Vec<String>,
    /// k, the signature length.
    pub num_perm: usize,
    /// (b, r) settings, written "BxR", with b * r <= num_perm (banding uses the first b * r slots).
    pub bands_rows: Vec<Banding>,
    /// Similarity thresholds t of the ground truth (pairs with exact J >= t).
    pub thresholds: Vec<f64>,
    /// Slot widths (b-bit slots, [`lshbench_core::kernel::bbit`]); default `[32]`. A width b < 32 runs every kernel as
    /// `NAME/bB`, banded with `dedup --bits`'s default banding for each threshold (tuned at the slot agreement
    /// P = C + (1 - C) J) instead of `bands_rows`, and checked against the S-curve at P.
    pub bits: Vec<u32>,
}

/// [`RecallStudy`] as written, the bandings still text.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecallStudyText {
    name: String,
    dataset: DatasetSpec,
    shingle: String,
    #[serde(default)]
    lowercase: bool,
    kernels: Vec<String>,
    num_perm: usize,
    bands_rows: Vec<String>,
    thresholds: Vec<f64>,
    #[serde(default = "default_bits")]
    bits: Vec<u32>,
}

/// `study = [...]` of a recall config, its "BxR" strings parsed (errors name `study[i].bands_rows[j]`).
fn recall_studies<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<RecallStudy>, D::Error> {
    Vec::<RecallStudyText>::deserialize(d)?
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            Ok(RecallStudy {
                bands_rows: parse_bandings(&s.bands_rows, &format!("study[{i}].bands_rows"))
                    .map_err(serde::de::Error::custom)?,
                name: s.name,
                dataset: s.dataset,
                shingle: s.shingle,
                lowercase: s.lowercase,
                kernels: s.kernels,
                num_perm: s.num_perm,
                thresholds: s.thresholds,
                bits: s.bits,
            })
        })
        .collect()
}

/// Recall and precision of banding against exact ground truth.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallConfig {
    /// The keys every experiment has.
    #[serde(flatten)]
    pub header: Header,
    /// The studies, run in order.
    #[serde(deserialize_with = "recall_studies")]
    pub study: Vec<RecallStudy>,
    /// Family-wise false-alarm rate of the recall check over all rows (Bonferroni).
    #[serde(default = "default_family_alpha")]
    pub family_alpha: f64,
}

// ---------------------------------------------------------------------------------------------------------
// throughput

/// Throughput of every kernel by k and shingle kind.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThroughputConfig {
    /// The keys every experiment has.
    #[serde(flatten)]
    pub header: Header,
    /// The corpora.
    pub datasets: Vec<DatasetSpec>,
    /// Registry names of the kernels.
    pub kernels: Vec<String>,
    /// k values.
    pub num_perm: Vec<usize>,
    /// Shingle specs, e.g. `char:5`.
    pub shingles: Vec<String>,
    /// Thread counts; 0 means all threads (`--threads`, else every logical CPU).
    pub threads: Vec<usize>,
    /// Timed repetitions per cell; the median is reported.
    #[serde(default = "default_repeats")]
    pub repeats: usize,
    /// Slot widths (b-bit slots, [`lshbench_core::kernel::bbit`]); default `[32]`. A width b < 32 times every kernel
    /// as `NAME/bB`: signing, cutting the slots to b bits and packing them into u64 words.
    #[serde(default = "default_bits")]
    pub bits: Vec<u32>,
}
fn default_repeats() -> usize {
    3
}

// ---------------------------------------------------------------------------------------------------------
// bbit

/// b-bit slots: accuracy and LSH recall against bytes per document ([`super::bbit`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BbitConfig {
    /// The keys every experiment has.
    #[serde(flatten)]
    pub header: Header,
    /// Registry name of the kernel whose slots are cut (its family must be classic MinHash for the variance
    /// and S-curve predictions to be checked).
    #[serde(default = "default_bbit_kernel")]
    pub kernel: String,
    /// Slot widths b.
    pub bits: Vec<u32>,
    /// Storage budgets in bytes per document; each width b runs k = 8 bytes / b slots (budgets that do not
    /// give a whole k of at least 1 are skipped for that b).
    pub bytes_per_doc: Vec<usize>,
    /// Union size |A u B| of the accuracy pairs (random elements).
    pub union: usize,
    /// Target J of the accuracy cells.
    pub jaccard: Vec<f64>,
    /// Trials per accuracy cell.
    pub trials: usize,
    /// The LSH threshold the recall study's banding is tuned for (lshbench tune's rule at full width).
    pub threshold: f64,
    /// J of the recall study's planted pairs (above the threshold: recall; below: the candidate rate).
    pub recall_jaccard: Vec<f64>,
    /// Union size of the recall study's pairs.
    pub recall_union: usize,
    /// Pairs per (b, k, J) recall cell.
    pub recall_trials: usize,
}
fn default_bbit_kernel() -> String {
    "simd".into()
}

impl Validate for BbitConfig {
    fn validate(&self) -> Result<(), String> {
        check_kernels(std::slice::from_ref(&self.kernel), "kernel")?;
        check_bit_list(&self.bits, "bits")?;
        check_nonempty(&self.bytes_per_doc, "bytes_per_doc")?;
        if let Some(j) = self.bytes_per_doc.iter().position(|&k| k == 0) {
            return Err(format!("bytes_per_doc[{j}]: must be at least 1"));
        }
        if self.union < 2 || self.recall_union < 2 {
            return Err("union, recall_union: a union needs at least 2 elements".into());
        }
        check_nonempty(&self.jaccard, "jaccard")?;
        check_unit_open(&self.jaccard, "jaccard")?;
        check_nonempty(&self.recall_jaccard, "recall_jaccard")?;
        check_unit_open(&self.recall_jaccard, "recall_jaccard")?;
        check_unit_open(&[self.threshold], "threshold")?;
        if self.trials < 2 || self.recall_trials < 2 {
            return Err("trials, recall_trials: need at least 2 trials".into());
        }
        // k = 8 * bytes / b slots: bounded by MAX_NUM_PERM at b = 1.
        check_at_most(&self.bytes_per_doc, "bytes_per_doc", MAX_NUM_PERM / 8)?;
        check_one_at_most(self.union, "union", MAX_UNION)?;
        check_one_at_most(self.recall_union, "recall_union", MAX_UNION)?;
        check_one_at_most(self.trials, "trials", MAX_TRIALS)?;
        check_one_at_most(self.recall_trials, "recall_trials", MAX_TRIALS)?;
        check_cells(
            &[
                self.bits.len(),
                self.bytes_per_doc.len(),
                self.jaccard.len() + self.recall_jaccard.len(),
            ],
            "bbit",
        )
    }
}

// ---------------------------------------------------------------------------------------------------------
// ablation

/// The hash-family ablation and the Pareto figure ([`super::ablation`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AblationConfig {
    /// The keys every experiment has.
    #[serde(flatten)]
    pub header: Header,
    /// Registry names of the kernels (the registry's kernels and the `oph-opt/HASH` families).
    pub kernels: Vec<String>,
    /// Kernels whose theory checks are results rather than checks (deliberately weak hash families).
    #[serde(default)]
    pub may_fail: Vec<String>,
    /// k.
    pub num_perm: usize,
    /// Union sizes |A u B|.
    pub union: Vec<usize>,
    /// Target J values.
    pub jaccard: Vec<f64>,
    /// `random`, `consecutive` and/or `shingles` (real shingle ids of `dataset`).
    pub elements: Vec<String>,
    /// Trials per cell.
    pub trials: usize,
    /// The corpus whose shingle ids are the `shingles` elements and the speed workload.
    pub dataset: DatasetSpec,
    /// The shingle kind, e.g. `char:5`.
    #[serde(default = "default_ablation_shingle")]
    pub shingle: String,
    /// Timed rounds of the speed measurement.
    #[serde(default = "default_ablation_repeats")]
    pub repeats: usize,
    /// The S-curve fit: (b, r) settings written "BxR", each with b * r <= `num_perm` (empty: no banding
    /// measurement).
    #[serde(default = "default_ablation_bands_rows")]
    pub bands_rows: Vec<String>,
    /// The S-curve fit: the planted J of its pairs.
    #[serde(default = "default_ablation_banding_jaccard")]
    pub banding_jaccard: Vec<f64>,
    /// The S-curve fit: the union size of its pairs (large enough that no one-permutation bin is expected
    /// empty at `num_perm`, so the theory applies to every family).
    #[serde(default = "default_ablation_banding_union")]
    pub banding_union: usize,
    /// The S-curve fit: pairs per (kernel, elements, J) cell, a fresh kernel seed each.
    #[serde(default = "default_ablation_banding_trials")]
    pub banding_trials: usize,
    /// Family-wise false-alarm rate of the S-curve test (exact binomial per point, Bonferroni over the points).
    #[serde(default = "default_ablation_alpha")]
    pub family_alpha: f64,
}
fn default_ablation_bands_rows() -> Vec<String> {
    vec!["32x4".into(), "16x8".into()]
}
fn default_ablation_banding_jaccard() -> Vec<f64> {
    vec![0.3, 0.5, 0.7, 0.8]
}
fn default_ablation_banding_union() -> usize {
    2000
}
fn default_ablation_banding_trials() -> usize {
    2000
}
fn default_ablation_alpha() -> f64 {
    1e-3
}

impl AblationConfig {
    /// The parsed `bands_rows` (checked by `validate`).
    pub fn bandings(&self) -> Result<Vec<Banding>, String> {
        parse_bandings(&self.bands_rows, "bands_rows")
    }
}
fn default_ablation_shingle() -> String {
    "char:5".into()
}
fn default_ablation_repeats() -> usize {
    5
}

impl Validate for AblationConfig {
    fn validate(&self) -> Result<(), String> {
        check_kernels(&self.kernels, "kernels")?;
        for (i, k) in self.may_fail.iter().enumerate() {
            if !self.kernels.contains(k) {
                return Err(format!("may_fail[{i}]: `{k}` is not in `kernels`"));
            }
        }
        if self.num_perm == 0 {
            return Err("num_perm: must be at least 1".into());
        }
        check_nonempty(&self.union, "union")?;
        if let Some(j) = self.union.iter().position(|&u| u < 2) {
            return Err(format!("union[{j}]: a union needs at least 2 elements"));
        }
        check_nonempty(&self.jaccard, "jaccard")?;
        check_unit_open(&self.jaccard, "jaccard")?;
        check_nonempty(&self.elements, "elements")?;
        for (j, e) in self.elements.iter().enumerate() {
            if !["random", "consecutive", "shingles"].contains(&e.as_str()) {
                return Err(format!(
                    "elements[{j}]: `{e}` is not `random`, `consecutive` or `shingles`"
                ));
            }
        }
        if self.trials < 2 {
            return Err("trials: need at least 2 trials".into());
        }
        check_one_at_most(self.num_perm, "num_perm", MAX_NUM_PERM)?;
        check_at_most(&self.union, "union", MAX_UNION)?;
        check_one_at_most(self.trials, "trials", MAX_TRIALS)?;
        check_one_at_most(self.repeats, "repeats", MAX_REPEATS)?;
        check_cells(
            &[
                self.kernels.len(),
                self.union.len(),
                self.jaccard.len(),
                self.elements.len(),
            ],
            "ablation",
        )?;
        for (i, b) in self.bandings()?.iter().enumerate() {
            if b.hashes() > self.num_perm {
                return Err(format!(
                    "bands_rows[{i}]: {b} needs {} slots, more than num_perm = {}",
                    b.hashes(),
                    self.num_perm
                ));
            }
        }
        if !self.bands_rows.is_empty() {
            check_nonempty(&self.banding_jaccard, "banding_jaccard")?;
            check_unit_open(&self.banding_jaccard, "banding_jaccard")?;
            if self.banding_union < 2 {
                return Err("banding_union: a union needs at least 2 elements".into());
            }
            check_one_at_most(self.banding_union, "banding_union", MAX_UNION)?;
            if self.banding_trials < 2 {
                return Err("banding_trials: need at least 2 trials".into());
            }
            check_one_at_most(self.banding_trials, "banding_trials", MAX_TRIALS)?;
            check_cells(
                &[
                    self.kernels.len(),
                    self.banding_jaccard.len(),
                    self.elements.len(),
                ],
                "ablation banding",
            )?;
        }
        if !(self.family_alpha > 0.0 && self.family_alpha < 1.0) {
            return Err(format!(
                "family_alpha: {} is not in (0, 1)",
                self.family_alpha
            ));
        }
        self.dataset.validate("dataset")?;
        check_shingles(std::slice::from_ref(&self.shingle), "shingle")
    }
}

// ---------------------------------------------------------------------------------------------------------
// faults

/// Fault injection: the accuracy and S-curve self-checks run on correct kernels and on deliberately broken
/// ones ([`super::broken::FAULTS`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsConfig {
    /// The keys every experiment has.
    #[serde(flatten)]
    pub header: Header,
    /// The faults to inject, by name (default: every one).
    #[serde(default = "all_faults")]
    pub faults: Vec<String>,
    /// Accuracy sweeps: their kernels are the correct subjects; every fault runs every sweep.
    pub accuracy: Vec<AccuracySweep>,
    /// S-curve sweeps, likewise.
    #[serde(deserialize_with = "scurve_sweeps")]
    pub scurve: Vec<ScurveSweep>,
    /// Family-wise false-alarm rate of the S-curve check (Bonferroni), per subject.
    #[serde(default = "default_family_alpha")]
    pub family_alpha: f64,
}
fn all_faults() -> Vec<String> {
    super::broken::FAULTS
        .iter()
        .map(|f| f.spec.name.to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------------------

/// One experiment, parsed and validated.
#[derive(Clone, Debug)]
pub enum Spec {
    /// `kind = "theory"`.
    Theory(TheoryConfig),
    /// `kind = "accuracy"`.
    Accuracy(AccuracyConfig),
    /// `kind = "scurve"`.
    Scurve(ScurveConfig),
    /// `kind = "recall"`.
    Recall(RecallConfig),
    /// `kind = "throughput"`.
    Throughput(ThroughputConfig),
    /// `kind = "faults"`.
    Faults(FaultsConfig),
    /// `kind = "bbit"`.
    Bbit(BbitConfig),
    /// `kind = "ablation"`.
    Ablation(AblationConfig),
}

impl Spec {
    /// The keys every experiment has.
    pub fn header(&self) -> &Header {
        match self {
            Spec::Theory(c) => &c.header,
            Spec::Accuracy(c) => &c.header,
            Spec::Scurve(c) => &c.header,
            Spec::Recall(c) => &c.header,
            Spec::Throughput(c) => &c.header,
            Spec::Faults(c) => &c.header,
            Spec::Bbit(c) => &c.header,
            Spec::Ablation(c) => &c.header,
        }
    }
}

/// One experiment as loaded from a file.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// Results go to `OUT/<name>/` (or `OUT/quick/<name>/`).
    pub name: String,
    /// The file it came from.
    pub source: PathBuf,
    /// The experiment seed.
    pub seed: u64,
    /// The parsed config.
    pub spec: Spec,
}

/// The experiment kinds, as written in `kind`.
pub const KINDS: &[&str] = &[
    "theory",
    "accuracy",
    "scurve",
    "recall",
    "throughput",
    "faults",
    "bbit",
    "ablation",
];

/// Loads a config file (a suite or one experiment), with the `[quick]` overrides applied when `quick`.
pub fn load(path: &Path, quick: bool) -> Result<Vec<Loaded>> {
    let mut out = Vec::new();
    load_into(path, quick, 0, &mut out)?;
    let mut names: Vec<&str> = out.iter().map(|l| l.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(ExperimentError::config(
            path,
            format!(
                "two experiments are named `{}`; give one a different `name`",
                w[0]
            ),
        ));
    }
    Ok(out)
}

fn load_into(path: &Path, quick: bool, depth: usize, out: &mut Vec<Loaded>) -> Result<()> {
    let bad = |message: String| ExperimentError::config(path, message);
    if depth > 8 {
        return Err(bad("includes nest deeper than 8 (a cycle?)".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|cause| ExperimentError::ReadConfig {
        file: path.to_path_buf(),
        cause,
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|cause| ExperimentError::Toml {
        file: path.to_path_buf(),
        in_quick: false,
        cause,
    })?;
    if let Some(include) = table.get("include") {
        if let Some(extra) = table
            .keys()
            .find(|k| *k != "include" && *k != "description")
        {
            return Err(bad(format!(
                "key `{extra}`: a suite file holds only `include` (and `description`)"
            )));
        }
        let list = include
            .as_array()
            .ok_or_else(|| bad("key `include`: expected a list of config paths".into()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for (i, item) in list.iter().enumerate() {
            let rel = item
                .as_str()
                .ok_or_else(|| bad(format!("key `include[{i}]`: expected a path string")))?;
            load_into(&dir.join(rel), quick, depth + 1, out)?;
        }
        return Ok(());
    }
    let kind = table
        .get("kind")
        .ok_or_else(|| {
            bad(format!(
                "missing key `kind` (one of {}) or `include`",
                KINDS.join(", ")
            ))
        })?
        .as_str()
        .ok_or_else(|| bad("key `kind`: expected a string".into()))?
        .to_string();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| kind.clone());
    fn parse<T: DeserializeOwned + Validate>(
        path: &Path,
        text: &str,
        quick: bool,
        variant: fn(T) -> Spec,
    ) -> Result<Spec> {
        let cfg: T = parse_with_quick(path, text, quick)?;
        cfg.validate()
            .map_err(|message| ExperimentError::config(path, message))?;
        Ok(variant(cfg))
    }
    let spec = match kind.as_str() {
        "theory" => parse(path, &text, quick, Spec::Theory)?,
        "accuracy" => parse(path, &text, quick, Spec::Accuracy)?,
        "scurve" => parse(path, &text, quick, Spec::Scurve)?,
        "recall" => parse(path, &text, quick, Spec::Recall)?,
        "throughput" => parse(path, &text, quick, Spec::Throughput)?,
        "faults" => parse(path, &text, quick, Spec::Faults)?,
        "bbit" => parse(path, &text, quick, Spec::Bbit)?,
        "ablation" => parse(path, &text, quick, Spec::Ablation)?,
        other => {
            return Err(bad(format!(
                "key `kind`: unknown experiment kind `{other}` (one of {})",
                KINDS.join(", ")
            )));
        }
    };
    let header = spec.header();
    let name = header.name.clone().unwrap_or(stem);
    if name.is_empty() || name.contains(['/', '\\']) || name == "quick" {
        return Err(bad(format!(
            "key `name`: `{name}` cannot name a results folder"
        )));
    }
    out.push(Loaded {
        name,
        source: path.to_path_buf(),
        seed: header.seed,
        spec,
    });
    Ok(())
}

/// Parses `text` as `T`; then, if there is a `[quick]` table, overlays its keys on the top level and parses
/// again (always, so a broken `[quick]` is caught by a full run too). Returns the overlaid config when `quick`.
fn parse_with_quick<T: DeserializeOwned>(path: &Path, text: &str, quick: bool) -> Result<T> {
    let toml_error = |in_quick: bool| move |cause| toml_error(path, in_quick, cause);
    // From the text first: toml's errors then carry the line and column, and name the key. The header alone
    // first, as each config flattens it in and toml loses the place of a flattened key's error.
    toml::from_str::<Header>(text).map_err(toml_error(false))?;
    let base: T = toml::from_str(text).map_err(toml_error(false))?;
    let mut table: toml::Table = toml::from_str(text).map_err(toml_error(false))?;
    let Some(overrides) = table.remove("quick") else {
        return Ok(base);
    };
    let overrides = match overrides {
        toml::Value::Table(t) => t,
        _ => {
            return Err(ExperimentError::config(
                path,
                "key `quick`: expected a table",
            ));
        }
    };
    for (k, v) in overrides {
        if k == "kind" || k == "quick" {
            return Err(ExperimentError::config(
                path,
                format!("key `quick.{k}` cannot be overridden"),
            ));
        }
        table.insert(k, v);
    }
    let overlaid: T = table.try_into().map_err(toml_error(true))?;
    Ok(if quick { overlaid } else { base })
}

/// toml's error about `path`, except an unknown top-level key: toml cannot place it (the header is
/// flattened into each config), so the error names the key plainly.
fn toml_error(path: &Path, in_quick: bool, cause: toml::de::Error) -> ExperimentError {
    let unknown = cause
        .message()
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.strip_suffix('`'))
        .filter(|key| !key.contains('`'));
    match unknown {
        Some(key) => ExperimentError::config(
            path,
            format!(
                "{}key `{key}`: not a key of this kind of experiment",
                if in_quick { "in [quick]: " } else { "" }
            ),
        ),
        None => ExperimentError::Toml {
            file: path.to_path_buf(),
            in_quick,
            cause,
        },
    }
}

/// Validation past the types, with errors naming the key.
trait Validate {
    fn validate(&self) -> Result<(), String>;
}

impl Validate for TheoryConfig {
    fn validate(&self) -> Result<(), String> {
        if self.num_perm == 0 {
            return Err("num_perm: must be at least 1".into());
        }
        check_one_at_most(self.num_perm, "num_perm", MAX_NUM_PERM)?;
        check_unit_open(&self.thresholds, "thresholds")
    }
}

impl Validate for AccuracyConfig {
    fn validate(&self) -> Result<(), String> {
        validate_accuracy_sweeps(&self.sweep, "sweep")
    }
}

fn validate_accuracy_sweeps(sweeps: &[AccuracySweep], name: &str) -> Result<(), String> {
    check_nonempty(sweeps, name)?;
    for (i, s) in sweeps.iter().enumerate() {
        let key = format!("{name}[{i}]");
        check_kernels(&s.kernels, &format!("{key}.kernels"))?;
        check_nonempty(&s.num_perm, &format!("{key}.num_perm"))?;
        if let Some(j) = s.num_perm.iter().position(|&k| k == 0) {
            return Err(format!("{key}.num_perm[{j}]: must be at least 1"));
        }
        check_nonempty(&s.union, &format!("{key}.union"))?;
        if let Some(j) = s.union.iter().position(|&u| u < 2) {
            return Err(format!(
                "{key}.union[{j}]: a union needs at least 2 elements"
            ));
        }
        check_nonempty(&s.jaccard, &format!("{key}.jaccard"))?;
        check_unit_open(&s.jaccard, &format!("{key}.jaccard"))?;
        check_nonempty(&s.elements, &format!("{key}.elements"))?;
        for (j, e) in s.elements.iter().enumerate() {
            if e != "random" && e != "consecutive" {
                return Err(format!(
                    "{key}.elements[{j}]: `{e}` is not `random` or `consecutive`"
                ));
            }
        }
        if s.trials < 2 {
            return Err(format!("{key}.trials: need at least 2 trials"));
        }
        check_bit_list(&s.bits, &format!("{key}.bits"))?;
        check_at_most(&s.num_perm, &format!("{key}.num_perm"), MAX_NUM_PERM)?;
        check_at_most(&s.union, &format!("{key}.union"), MAX_UNION)?;
        check_one_at_most(s.trials, &format!("{key}.trials"), MAX_TRIALS)?;
        check_cells(
            &[
                s.kernels.len(),
                s.num_perm.len(),
                s.union.len(),
                s.jaccard.len(),
                s.elements.len(),
                s.bits.len(),
            ],
            &key,
        )?;
    }
    Ok(())
}

impl Validate for FaultsConfig {
    fn validate(&self) -> Result<(), String> {
        validate_accuracy_sweeps(&self.accuracy, "accuracy")?;
        validate_scurve_sweeps(&self.scurve, "scurve")?;
        check_nonempty(&self.faults, "faults")?;
        for (i, f) in self.faults.iter().enumerate() {
            if super::broken::fault(f).is_none() {
                return Err(format!("faults[{i}]: {}", super::broken::unknown_fault(f)));
            }
        }
        if !(self.family_alpha > 0.0 && self.family_alpha < 1.0) {
            return Err("family_alpha: must be in (0, 1)".into());
        }
        Ok(())
    }
}

fn validate_scurve_sweeps(sweeps: &[ScurveSweep], name: &str) -> Result<(), String> {
    check_nonempty(sweeps, name)?;
    for (i, s) in sweeps.iter().enumerate() {
        let key = format!("{name}[{i}]");
        check_kernels(&s.kernels, &format!("{key}.kernels"))?;
        check_nonempty(&s.bands_rows, &format!("{key}.bands_rows"))?;
        check_nonempty(&s.union, &format!("{key}.union"))?;
        check_nonempty(&s.jaccard, &format!("{key}.jaccard"))?;
        for (j, &v) in s.jaccard.iter().enumerate() {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{key}.jaccard[{j}]: {v} is not in [0, 1]"));
            }
        }
        if s.trials == 0 {
            return Err(format!("{key}.trials: must be at least 1"));
        }
        check_bit_list(&s.bits, &format!("{key}.bits"))?;
        let hashes: Vec<usize> = s.bands_rows.iter().map(|b| b.hashes()).collect();
        check_at_most(&hashes, &format!("{key}.bands_rows"), MAX_NUM_PERM)?;
        check_at_most(&s.union, &format!("{key}.union"), MAX_UNION)?;
        check_one_at_most(s.trials, &format!("{key}.trials"), MAX_TRIALS)?;
        check_cells(
            &[
                s.kernels.len(),
                s.bands_rows.len(),
                s.union.len(),
                s.jaccard.len(),
                s.bits.len(),
            ],
            &key,
        )?;
    }
    Ok(())
}

impl Validate for ScurveConfig {
    fn validate(&self) -> Result<(), String> {
        validate_scurve_sweeps(&self.sweep, "sweep")?;
        for (i, s) in self.band_agreement.iter().enumerate() {
            let key = format!("band_agreement[{i}]");
            check_kernels(&s.kernels, &format!("{key}.kernels"))?;
            check_nonempty(&s.union, &format!("{key}.union"))?;
            check_unit_open(&s.jaccard, &format!("{key}.jaccard"))?;
            for (&r, &k) in s.rows.iter().zip(&s.num_perm) {
                if r == 0 || r > k {
                    return Err(format!("{key}.rows: {r} rows do not fit k = {k}"));
                }
            }
            check_nonempty(&s.rows, &format!("{key}.rows"))?;
            check_nonempty(&s.num_perm, &format!("{key}.num_perm"))?;
            if s.trials == 0 {
                return Err(format!("{key}.trials: must be at least 1"));
            }
            check_at_most(&s.num_perm, &format!("{key}.num_perm"), MAX_NUM_PERM)?;
            check_at_most(&s.union, &format!("{key}.union"), MAX_UNION)?;
            check_one_at_most(s.trials, &format!("{key}.trials"), MAX_TRIALS)?;
            check_cells(
                &[
                    s.kernels.len(),
                    s.union.len(),
                    s.jaccard.len(),
                    s.rows.len(),
                    s.num_perm.len(),
                ],
                &key,
            )?;
        }
        if !(self.family_alpha > 0.0 && self.family_alpha < 1.0) {
            return Err("family_alpha: must be in (0, 1)".into());
        }
        Ok(())
    }
}

impl Validate for RecallConfig {
    fn validate(&self) -> Result<(), String> {
        check_nonempty(&self.study, "study")?;
        for (i, s) in self.study.iter().enumerate() {
            let key = format!("study[{i}]");
            s.dataset.validate(&format!("{key}.dataset"))?;
            check_shingles(std::slice::from_ref(&s.shingle), &format!("{key}.shingle"))?;
            check_kernels(&s.kernels, &format!("{key}.kernels"))?;
            check_nonempty(&s.bands_rows, &format!("{key}.bands_rows"))?;
            for (j, br) in s.bands_rows.iter().enumerate() {
                if br.hashes() > s.num_perm {
                    return Err(format!(
                        "{key}.bands_rows[{j}]: {br} needs {} slots but num_perm is {}",
                        br.hashes(),
                        s.num_perm
                    ));
                }
            }
            check_one_at_most(s.num_perm, &format!("{key}.num_perm"), MAX_NUM_PERM)?;
            check_bit_list(&s.bits, &format!("{key}.bits"))?;
            check_cells(
                &[
                    s.kernels.len(),
                    s.bands_rows.len(),
                    s.thresholds.len(),
                    s.bits.len(),
                ],
                &key,
            )?;
            check_nonempty(&s.thresholds, &format!("{key}.thresholds"))?;
            for (j, &t) in s.thresholds.iter().enumerate() {
                if !(t > 0.0 && t <= 1.0) {
                    return Err(format!("{key}.thresholds[{j}]: {t} is not in (0, 1]"));
                }
            }
        }
        if !(self.family_alpha > 0.0 && self.family_alpha < 1.0) {
            return Err("family_alpha: must be in (0, 1)".into());
        }
        Ok(())
    }
}

impl Validate for ThroughputConfig {
    fn validate(&self) -> Result<(), String> {
        check_nonempty(&self.datasets, "datasets")?;
        for (i, d) in self.datasets.iter().enumerate() {
            d.validate(&format!("datasets[{i}]"))?;
        }
        check_kernels(&self.kernels, "kernels")?;
        check_nonempty(&self.num_perm, "num_perm")?;
        check_shingles(&self.shingles, "shingles")?;
        check_nonempty(&self.threads, "threads")?;
        if self.repeats == 0 {
            return Err("repeats: must be at least 1".into());
        }
        check_one_at_most(self.repeats, "repeats", MAX_REPEATS)?;
        check_at_most(&self.num_perm, "num_perm", MAX_NUM_PERM)?;
        check_at_most(&self.threads, "threads", MAX_THREADS)?;
        check_bit_list(&self.bits, "bits")?;
        check_cells(
            &[
                self.datasets.len(),
                self.bits.len(),
                self.kernels.len(),
                self.num_perm.len(),
                self.shingles.len(),
                self.threads.len(),
            ],
            "the throughput grid",
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    const GOOD: &str = r#"
kind = "accuracy"
seed = 7
[[sweep]]
kernels = ["scalar"]
num_perm = [32, 64]
union = [8]
jaccard = [0.5]
elements = ["random"]
trials = 100
[quick]
sweep = [{ kernels = ["scalar"], num_perm = [16], union = [8], jaccard = [0.5], elements = ["random"], trials = 10 }]
"#;

    #[test]
    fn a_good_config_loads_and_quick_overrides_the_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "acc.toml", GOOD);
        let full = load(&p, false).unwrap();
        assert_eq!(full.len(), 1);
        assert_eq!(full[0].name, "acc");
        assert_eq!(full[0].seed, 7);
        let Spec::Accuracy(a) = &full[0].spec else {
            panic!()
        };
        assert_eq!(a.sweep[0].num_perm, vec![32, 64]);
        let quick = load(&p, true).unwrap();
        let Spec::Accuracy(a) = &quick[0].spec else {
            panic!()
        };
        assert_eq!(a.sweep[0].num_perm, vec![16]);
        assert_eq!(a.sweep[0].trials, 10);
    }

    #[test]
    fn a_misspelt_key_is_an_error_naming_the_key_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "bad.toml",
            &GOOD.replace(
                "kernels = [\"scalar\"]\nnum_perm",
                "kernals = [\"scalar\"]\nnum_perm",
            ),
        );
        let err = format!("{:#}", load(&p, false).unwrap_err());
        assert!(err.contains("kernals"), "{err}");
        assert!(err.contains("bad.toml"), "{err}");
    }

    #[test]
    fn a_bad_quick_table_fails_even_a_full_run() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "q.toml",
            &GOOD.replace("trials = 10 }", "trails = 10 }"),
        );
        let err = format!("{:#}", load(&p, false).unwrap_err());
        assert!(err.contains("[quick]") && err.contains("trails"), "{err}");
    }

    #[test]
    fn bad_values_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                GOOD.replace("[\"scalar\"]\nnum_perm", "[\"nope\"]\nnum_perm"),
                "sweep[0].kernels[0]",
            ),
            (
                GOOD.replace("jaccard = [0.5]", "jaccard = [1.5]"),
                "sweep[0].jaccard[0]",
            ),
            (
                GOOD.replace(
                    "elements = [\"random\"]\ntrials",
                    "elements = [\"rnd\"]\ntrials",
                ),
                "sweep[0].elements[0]",
            ),
            (
                GOOD.replace("num_perm = [32, 64]", "num_perm = \"32\""),
                "num_perm",
            ),
            (
                GOOD.replace("kind = \"accuracy\"", "kind = \"acuracy\""),
                "kind",
            ),
        ];
        for (text, key) in cases {
            let p = write(dir.path(), "v.toml", &text);
            let err = format!("{:#}", load(&p, false).unwrap_err());
            assert!(err.contains(key), "expected `{key}` in: {err}");
        }
        let scurve = r#"
kind = "scurve"
[[sweep]]
kernels = ["scalar"]
bands_rows = ["42x3", "7y2"]
union = [100]
jaccard = [0.5]
trials = 10
"#;
        let p = write(dir.path(), "s.toml", scurve);
        let err = format!("{:#}", load(&p, false).unwrap_err());
        assert!(
            err.contains("sweep[0].bands_rows[1]") && err.contains("7y2"),
            "{err}"
        );
    }

    #[test]
    fn the_shared_header_is_read_and_a_misspelt_top_level_key_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let named = GOOD.replace(
            "seed = 7",
            "seed = 7\nname = \"acc2\"\ndescription = \"a test\"",
        );
        let p = write(dir.path(), "h.toml", &named);
        let loaded = load(&p, false).unwrap();
        assert_eq!(loaded[0].name, "acc2");
        assert_eq!(loaded[0].seed, 7);
        let header = loaded[0].spec.header();
        assert_eq!(header.kind, "accuracy");
        assert_eq!(header.description.as_deref(), Some("a test"));
        assert!(header.quick.is_some());
        let p = write(dir.path(), "d.toml", "kind = \"theory\"\n");
        assert_eq!(load(&p, false).unwrap()[0].seed, 42);

        let p = write(dir.path(), "top.toml", &GOOD.replace("seed = 7", "sed = 7"));
        let err = load(&p, false).unwrap_err().to_string();
        assert!(
            err.contains("key `sed`") && err.contains("top.toml"),
            "{err}"
        );
        // A header key of the wrong type: toml places it.
        let p = write(
            dir.path(),
            "ty.toml",
            &GOOD.replace("seed = 7", "seed = \"x\""),
        );
        let err = load(&p, false).unwrap_err().to_string();
        assert!(
            err.contains("line 3") && err.contains("seed = \"x\""),
            "{err}"
        );
        let p = write(dir.path(), "topq.toml", &format!("{GOOD}sed = 7\n"));
        let err = load(&p, false).unwrap_err().to_string();
        assert!(
            err.contains("key `sed`") && err.contains("[quick]"),
            "{err}"
        );
    }

    #[test]
    fn recall_bandings_are_parsed_and_checked_against_num_perm() {
        let dir = tempfile::tempdir().unwrap();
        let recall = r#"
kind = "recall"
[[study]]
name = "s"
dataset = { name = "d", generator = "synth", docs = 10 }
shingle = "char:5"
kernels = ["simd"]
num_perm = 128
bands_rows = ["42x3", "20x5"]
thresholds = [0.5]
"#;
        let p = write(dir.path(), "r.toml", recall);
        let loaded = load(&p, false).unwrap();
        let Spec::Recall(r) = &loaded[0].spec else {
            panic!()
        };
        assert_eq!(
            r.study[0].bands_rows,
            vec![
                Banding { bands: 42, rows: 3 },
                Banding { bands: 20, rows: 5 }
            ]
        );
        let p = write(dir.path(), "r.toml", &recall.replace("\"20x5\"", "\"20x\""));
        let err = load(&p, false).unwrap_err().to_string();
        assert!(
            err.contains("study[0].bands_rows[1]") && err.contains("20x"),
            "{err}"
        );
        let p = write(
            dir.path(),
            "r.toml",
            &recall.replace("\"20x5\"", "\"30x5\""),
        );
        let err = load(&p, false).unwrap_err().to_string();
        assert!(
            err.contains("study[0].bands_rows[1]") && err.contains("150 slots"),
            "{err}"
        );
    }

    #[test]
    fn suites_include_relative_paths_and_refuse_duplicates_and_stray_keys() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.toml", GOOD);
        write(dir.path(), "t.toml", "kind = \"theory\"\n");
        let suite = write(
            dir.path(),
            "all.toml",
            "include = [\"a.toml\", \"t.toml\"]\n",
        );
        let loaded = load(&suite, true).unwrap();
        let names: Vec<_> = loaded.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["a", "t"]);
        let dup = write(
            dir.path(),
            "dup.toml",
            "include = [\"a.toml\", \"a.toml\"]\n",
        );
        assert!(format!("{:#}", load(&dup, false).unwrap_err()).contains("named `a`"));
        let stray = write(
            dir.path(),
            "stray.toml",
            "include = [\"a.toml\"]\nseed = 3\n",
        );
        assert!(format!("{:#}", load(&stray, false).unwrap_err()).contains("`seed`"));
        let cyc = write(dir.path(), "cyc.toml", "include = [\"cyc.toml\"]\n");
        assert!(format!("{:#}", load(&cyc, false).unwrap_err()).contains("cycle"));
    }

    #[test]
    fn bands_rows_parse() {
        assert_eq!(parse_banding("42x3"), Some(Banding { bands: 42, rows: 3 }));
        assert_eq!(
            parse_banding(" 42 x 3 "),
            Some(Banding { bands: 42, rows: 3 })
        );
        assert_eq!(parse_banding("0x3"), None);
        assert_eq!(parse_banding("42x0"), None);
        assert_eq!(parse_banding("42*3"), None);
    }
}
