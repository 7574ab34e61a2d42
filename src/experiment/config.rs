//! Experiment configs: one TOML format for every experiment.
//!
//! A config file is either a suite (`include = ["theory.toml", ...]`, paths relative to the file) or one
//! experiment (`kind = "accuracy"`, ...). Every experiment has `kind`, an optional `name` (default: the file
//! stem; results go to `OUT/<name>/`), a `seed` and an optional `[quick]` table whose keys replace the
//! top-level keys of the same name under `--quick`. Sweeps are lists of `[[sweep]]` tables, each a cartesian
//! product of its lists. Unknown keys are errors that name the key, so a typo never silently runs the default.

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

fn default_seed() -> u64 {
    42
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

/// A (bands, rows) pair written "BxR", e.g. "42x3".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BandsRows {
    pub bands: usize,
    pub rows: usize,
}

impl BandsRows {
    pub fn parse(s: &str) -> Option<BandsRows> {
        let (b, r) = s.split_once('x')?;
        let bands: usize = b.trim().parse().ok()?;
        let rows: usize = r.trim().parse().ok()?;
        (bands > 0 && rows > 0).then_some(BandsRows { bands, rows })
    }
    pub fn hashes(&self) -> usize {
        self.bands * self.rows
    }
}

impl std::fmt::Display for BandsRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.bands, self.rows)
    }
}

fn parse_bands_rows(list: &[String], key: &str) -> Result<Vec<BandsRows>, String> {
    list.iter()
        .enumerate()
        .map(|(i, s)| {
            BandsRows::parse(s).ok_or_else(|| {
                format!("{key}[{i}]: `{s}` is not BANDSxROWS with both at least 1, e.g. \"42x3\"")
            })
        })
        .collect()
}

fn check_kernels(list: &[String], key: &str) -> Result<(), String> {
    if list.is_empty() {
        return Err(format!("{key}: list at least one kernel"));
    }
    let names = crate::kernel::names();
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
        s.parse::<crate::shingle::ShingleKind>()
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
    pub kind: String,
    pub name: Option<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub description: Option<String>,
    pub quick: Option<toml::Table>,
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

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccuracySweep {
    pub kernels: Vec<String>,
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
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccuracyConfig {
    pub kind: String,
    pub name: Option<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub description: Option<String>,
    pub quick: Option<toml::Table>,
    pub sweep: Vec<AccuracySweep>,
}

// ---------------------------------------------------------------------------------------------------------
// scurve

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScurveSweep {
    pub kernels: Vec<String>,
    /// (b, r) settings, "BxR"; each runs with k = b * r.
    pub bands_rows: Vec<String>,
    /// Union sizes |A u B| of the synthetic pairs.
    pub union: Vec<usize>,
    /// Jaccard grid (bin centres); each pair has exactly the nearest achievable J.
    pub jaccard: Vec<f64>,
    /// Independent pairs per (J, cell).
    pub trials: usize,
}

/// The probability that one band agrees, on small sets where densification bends it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandAgreementSweep {
    pub kernels: Vec<String>,
    pub union: Vec<usize>,
    pub jaccard: Vec<f64>,
    pub rows: Vec<usize>,
    pub num_perm: Vec<usize>,
    pub trials: usize,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScurveConfig {
    pub kind: String,
    pub name: Option<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub description: Option<String>,
    pub quick: Option<toml::Table>,
    pub sweep: Vec<ScurveSweep>,
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

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallStudy {
    /// A short name for the study (result paths, tables).
    pub name: String,
    pub dataset: DatasetSpec,
    pub shingle: String,
    #[serde(default)]
    pub lowercase: bool,
    pub kernels: Vec<String>,
    pub num_perm: usize,
    /// (b, r) settings, "BxR", with b * r <= num_perm (banding uses the first b * r slots).
    pub bands_rows: Vec<String>,
    /// Similarity thresholds t of the ground truth (pairs with exact J >= t).
    pub thresholds: Vec<f64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallConfig {
    pub kind: String,
    pub name: Option<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub description: Option<String>,
    pub quick: Option<toml::Table>,
    pub study: Vec<RecallStudy>,
    #[serde(default = "default_family_alpha")]
    pub family_alpha: f64,
}

// ---------------------------------------------------------------------------------------------------------
// throughput

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThroughputConfig {
    pub kind: String,
    pub name: Option<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub description: Option<String>,
    pub quick: Option<toml::Table>,
    pub datasets: Vec<DatasetSpec>,
    pub kernels: Vec<String>,
    pub num_perm: Vec<usize>,
    pub shingles: Vec<String>,
    /// Thread counts; 0 means all threads (`--threads`, else every logical CPU).
    pub threads: Vec<usize>,
    /// Timed repetitions per cell; the median is reported.
    #[serde(default = "default_repeats")]
    pub repeats: usize,
}
fn default_repeats() -> usize {
    3
}

// ---------------------------------------------------------------------------------------------------------

/// One experiment, parsed and validated.
#[derive(Clone, Debug)]
pub enum Spec {
    Theory(TheoryConfig),
    Accuracy(AccuracyConfig),
    Scurve(ScurveConfig),
    Recall(RecallConfig),
    Throughput(ThroughputConfig),
}

/// One experiment as loaded from a file.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// Results go to `OUT/<name>/` (or `OUT/quick/<name>/`).
    pub name: String,
    /// The file it came from.
    pub source: PathBuf,
    pub seed: u64,
    pub spec: Spec,
}

pub const KINDS: &[&str] = &["theory", "accuracy", "scurve", "recall", "throughput"];

/// Loads a config file (a suite or one experiment), with the `[quick]` overrides applied when `quick`.
pub fn load(path: &Path, quick: bool) -> Result<Vec<Loaded>> {
    let mut out = Vec::new();
    load_into(path, quick, 0, &mut out)?;
    let mut names: Vec<&str> = out.iter().map(|l| l.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        bail!(
            "{}: two experiments are named `{}`; give one a different `name`",
            path.display(),
            w[0]
        );
    }
    Ok(out)
}

fn load_into(path: &Path, quick: bool, depth: usize, out: &mut Vec<Loaded>) -> Result<()> {
    if depth > 8 {
        bail!("{}: includes nest deeper than 8 (a cycle?)", path.display());
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if let Some(include) = table.get("include") {
        if let Some(extra) = table
            .keys()
            .find(|k| *k != "include" && *k != "description")
        {
            bail!(
                "{}: key `{extra}`: a suite file holds only `include` (and `description`)",
                path.display()
            );
        }
        let list = include.as_array().ok_or_else(|| {
            anyhow!(
                "{}: key `include`: expected a list of config paths",
                path.display()
            )
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for (i, item) in list.iter().enumerate() {
            let rel = item.as_str().ok_or_else(|| {
                anyhow!(
                    "{}: key `include[{i}]`: expected a path string",
                    path.display()
                )
            })?;
            load_into(&dir.join(rel), quick, depth + 1, out)?;
        }
        return Ok(());
    }
    let kind = table
        .get("kind")
        .ok_or_else(|| {
            anyhow!(
                "{}: missing key `kind` (one of {}) or `include`",
                path.display(),
                KINDS.join(", ")
            )
        })?
        .as_str()
        .ok_or_else(|| anyhow!("{}: key `kind`: expected a string", path.display()))?
        .to_string();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| kind.clone());
    macro_rules! parse {
        ($ty:ty, $variant:ident) => {{
            let cfg: $ty = parse_with_quick(path, &text, quick)?;
            cfg.validate()
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            (cfg.name.clone(), cfg.seed, Spec::$variant(cfg))
        }};
    }
    let (name, seed, spec) = match kind.as_str() {
        "theory" => parse!(TheoryConfig, Theory),
        "accuracy" => parse!(AccuracyConfig, Accuracy),
        "scurve" => parse!(ScurveConfig, Scurve),
        "recall" => parse!(RecallConfig, Recall),
        "throughput" => parse!(ThroughputConfig, Throughput),
        other => bail!(
            "{}: key `kind`: unknown experiment kind `{other}` (one of {})",
            path.display(),
            KINDS.join(", ")
        ),
    };
    let name = name.unwrap_or(stem);
    if name.is_empty() || name.contains(['/', '\\']) || name == "quick" {
        bail!(
            "{}: key `name`: `{name}` cannot name a results folder",
            path.display()
        );
    }
    out.push(Loaded {
        name,
        source: path.to_path_buf(),
        seed,
        spec,
    });
    Ok(())
}

/// Parses `text` as `T`; then, if there is a `[quick]` table, overlays its keys on the top level and parses
/// again (always, so a broken `[quick]` is caught by a full run too). Returns the overlaid config when `quick`.
fn parse_with_quick<T: DeserializeOwned>(path: &Path, text: &str, quick: bool) -> Result<T> {
    // From the text first: toml's errors then carry the line and column, and name the key.
    let base: T = toml::from_str(text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let mut table: toml::Table = toml::from_str(text)?;
    let Some(overrides) = table.remove("quick") else {
        return Ok(base);
    };
    let overrides = match overrides {
        toml::Value::Table(t) => t,
        _ => bail!("{}: key `quick`: expected a table", path.display()),
    };
    for (k, v) in overrides {
        if k == "kind" || k == "quick" {
            bail!("{}: key `quick.{k}` cannot be overridden", path.display());
        }
        table.insert(k, v);
    }
    let overlaid: T = table
        .try_into()
        .map_err(|e| anyhow!("{}: in [quick]: {e}", path.display()))?;
    Ok(if quick { overlaid } else { base })
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
        check_unit_open(&self.thresholds, "thresholds")
    }
}

impl Validate for AccuracyConfig {
    fn validate(&self) -> Result<(), String> {
        check_nonempty(&self.sweep, "sweep")?;
        for (i, s) in self.sweep.iter().enumerate() {
            let key = format!("sweep[{i}]");
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
        }
        Ok(())
    }
}

impl Validate for ScurveConfig {
    fn validate(&self) -> Result<(), String> {
        check_nonempty(&self.sweep, "sweep")?;
        for (i, s) in self.sweep.iter().enumerate() {
            let key = format!("sweep[{i}]");
            check_kernels(&s.kernels, &format!("{key}.kernels"))?;
            check_nonempty(&s.bands_rows, &format!("{key}.bands_rows"))?;
            parse_bands_rows(&s.bands_rows, &format!("{key}.bands_rows"))?;
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
        }
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
            let brs = parse_bands_rows(&s.bands_rows, &format!("{key}.bands_rows"))?;
            check_nonempty(&brs, &format!("{key}.bands_rows"))?;
            for (j, br) in brs.iter().enumerate() {
                if br.hashes() > s.num_perm {
                    return Err(format!(
                        "{key}.bands_rows[{j}]: {br} needs {} slots but num_perm is {}",
                        br.hashes(),
                        s.num_perm
                    ));
                }
            }
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
        Ok(())
    }
}

impl ScurveSweep {
    pub fn parsed_bands_rows(&self) -> Vec<BandsRows> {
        parse_bands_rows(&self.bands_rows, "bands_rows").expect("validated")
    }
}

impl RecallStudy {
    pub fn parsed_bands_rows(&self) -> Vec<BandsRows> {
        parse_bands_rows(&self.bands_rows, "bands_rows").expect("validated")
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
        assert_eq!(
            BandsRows::parse("42x3"),
            Some(BandsRows { bands: 42, rows: 3 })
        );
        assert_eq!(BandsRows::parse("0x3"), None);
        assert_eq!(BandsRows::parse("42*3"), None);
    }
}
