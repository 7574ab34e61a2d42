//! The runner's machinery: where results go, one CSV per cell with its path derived from the cell's
//! parameters (finished cells are skipped, `--force` reruns them), the provenance every row carries, and the
//! self-checks each experiment makes of its own results.

pub use crate::check::Check;
use crate::error::ExperimentError;
use lshbench_core::arch::Dispatch;
use lshbench_core::exec::Progress;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// Provenance recorded with every result row.
#[derive(Clone, Debug)]
pub struct Meta {
    /// The commit of the code (`-dirty` when files outside `results/` have uncommitted changes).
    pub git_commit: String,
    /// The CPU model name with its vendor, family and model numbers.
    pub cpu_model: String,
    /// One line: CPU model and numbers, logical CPUs, OS, features.
    pub machine: String,
}

impl Meta {
    /// The provenance of this process: commit, CPU, machine.
    pub fn detect() -> Meta {
        Meta {
            git_commit: source_commit(),
            cpu_model: lshbench_core::machine::cpu_name(),
            machine: lshbench_core::machine::describe(),
        }
    }
}

/// The git commit of the code, marked `-dirty` only when files outside `results/` have uncommitted changes: a
/// run rewrites tracked result files, which says nothing about the code that produced them.
fn source_commit() -> String {
    let commit = lshbench_core::machine::git_commit();
    let Some(clean) = commit.strip_suffix("-dirty") else {
        return commit;
    };
    let outside_results = std::process::Command::new("git")
        .args([
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":(exclude)results",
        ])
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(true);
    if outside_results {
        commit
    } else {
        clean.to_string()
    }
}

/// Everything an experiment needs to run: where to write, whether to skip finished cells, provenance, and
/// where to report progress.
pub struct Ctx<'a> {
    /// The experiment's name.
    pub name: String,
    /// `OUT/<name>` (or `OUT/quick/<name>`).
    pub dir: PathBuf,
    /// The small version (`--quick`).
    pub quick: bool,
    /// Recompute finished cells (always under `quick`).
    pub force: bool,
    /// Threads for "all threads" (`--threads`, else every logical CPU).
    pub threads: usize,
    /// The instruction set of every kernel, shingler and reader the experiment builds (`--isa`, else the
    /// widest this CPU runs).
    pub dispatch: Dispatch,
    /// Provenance recorded with every row.
    pub meta: Meta,
    /// The config file, for the regenerate command in reports.
    pub source: PathBuf,
    /// The experiment seed.
    pub seed: u64,
    /// Where stages are reported.
    pub progress: &'a dyn Progress,
    computed: AtomicUsize,
    skipped: AtomicUsize,
    /// The cell files this run computed or read back, for the summary's provenance.
    used: std::sync::Mutex<Vec<PathBuf>>,
}

/// The parameters that identify one cell, in a fixed order. They name its result file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellKey(pub Vec<(&'static str, String)>);

impl CellKey {
    /// No parameters yet.
    pub fn new() -> CellKey {
        CellKey(Vec::new())
    }
    /// Adds the parameter `name` with `value`.
    pub fn with(mut self, name: &'static str, value: impl ToString) -> CellKey {
        self.0.push((name, value.to_string()));
        self
    }
    /// A file name: `name-value` pairs joined by `__`, with characters outside `[A-Za-z0-9.-]` replaced by
    /// `_` (so `char:5` becomes `char_5`).
    pub fn file_name(&self) -> String {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{}-{}", clean(k), clean(v)))
            .collect();
        format!("{}.csv", parts.join("__"))
    }
    /// A short human label, `k=v, ...`.
    pub fn label(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Default for CellKey {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> Ctx<'a> {
    /// The context of experiment `name` (config file `source`, seed `seed`) writing under `out`; it reports
    /// nothing until given a [`Progress`] with [`Ctx::with_progress`].
    pub fn new(
        out: &Path,
        name: &str,
        source: &Path,
        seed: u64,
        quick: bool,
        force: bool,
        threads: usize,
    ) -> Ctx<'a> {
        Ctx {
            name: name.to_string(),
            dir: experiment_dir(out, name, quick),
            quick,
            // A quick run is a check of the code that is running now: never reuse old cells.
            force: force || quick,
            threads,
            dispatch: Dispatch::detect(),
            meta: Meta::detect(),
            source: source.to_path_buf(),
            seed,
            progress: &lshbench_core::exec::Silent,
            computed: AtomicUsize::new(0),
            skipped: AtomicUsize::new(0),
            used: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Reports stages to `progress`.
    pub fn with_progress(mut self, progress: &'a dyn Progress) -> Ctx<'a> {
        self.progress = progress;
        self
    }

    /// Runs the experiment's kernels, shinglers and readers on `dispatch` (by default the widest this CPU
    /// runs).
    pub fn with_dispatch(mut self, dispatch: Dispatch) -> Ctx<'a> {
        self.dispatch = dispatch;
        self
    }

    /// Whether the instruction set is narrower than the widest this CPU runs (then it names cells and the
    /// regenerate command).
    fn narrowed(&self) -> bool {
        self.dispatch != Dispatch::detect()
    }

    /// A cell's key as its file names it: with the instruction set added when it is narrowed, so that a
    /// finished cell is reused only by a run on the instruction set that computed it (the widest keeps the
    /// plain names).
    fn stored_key(&self, key: &CellKey) -> CellKey {
        if self.narrowed() {
            key.clone().with("isa", self.dispatch.isa())
        } else {
            key.clone()
        }
    }

    /// The file holding a cell's rows.
    pub fn cell_path(&self, key: &CellKey) -> PathBuf {
        self.dir
            .join("cells")
            .join(self.stored_key(key).file_name())
    }

    /// Runs one cell, or reads its rows back when its file exists (unless `--force`). Rows are written to a
    /// temporary file and renamed, so an interrupted run never leaves a half-written cell behind.
    pub fn cell<R, F>(&self, key: &CellKey, compute: F) -> Result<Vec<R>>
    where
        R: Serialize + DeserializeOwned,
        F: FnOnce() -> Result<Vec<R>>,
    {
        let path = self.cell_path(key);
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(path.clone());
        if !self.force && path.exists() {
            let rows = read_csv(&path).map_err(|cause| ExperimentError::FinishedCell {
                path: path.clone(),
                cause: Box::new(cause),
            })?;
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(rows);
        }
        let rows = compute().map_err(|cause| ExperimentError::Cell {
            label: key.label(),
            cause: Box::new(cause),
        })?;
        write_csv(&path, &rows)?;
        self.computed.fetch_add(1, Ordering::Relaxed);
        Ok(rows)
    }

    /// The cell files this run computed or read back so far, sorted, each once.
    pub fn used_cells(&self) -> Vec<PathBuf> {
        let mut cells = self.used.lock().unwrap_or_else(|e| e.into_inner()).clone();
        cells.sort();
        cells.dedup();
        cells
    }

    /// (computed, skipped) cell counts so far.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.computed.load(Ordering::Relaxed),
            self.skipped.load(Ordering::Relaxed),
        )
    }

    /// The command that regenerates this experiment's results.
    pub fn command(&self) -> String {
        format!(
            "cargo run --release -- run {}{}{}",
            self.source.display(),
            if self.quick { " --quick" } else { "" },
            if self.narrowed() {
                format!(" --isa {}", self.dispatch.isa())
            } else {
                String::new()
            }
        )
    }

    /// A path inside the experiment's folder, creating the folder.
    pub fn file(&self, name: &str) -> Result<PathBuf> {
        create_dir(&self.dir)?;
        Ok(self.dir.join(name))
    }

    /// Writes `text` to the file `name` in the experiment's folder.
    pub fn write_file(&self, name: &str, text: &str) -> Result<()> {
        let path = self.file(name)?;
        Ok(lshbench_core::output::write_atomic(&path, |w| {
            std::io::Write::write_all(w, text.as_bytes())
        })?)
    }
}

/// Where experiment `name` writes: `out/<name>`, or `out/quick/<name>` for the small version.
pub fn experiment_dir(out: &Path, name: &str, quick: bool) -> PathBuf {
    if quick {
        out.join("quick").join(name)
    } else {
        out.join(name)
    }
}

fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|cause| ExperimentError::CreateDir {
        path: dir.to_path_buf(),
        cause,
    })
}

/// Writes rows as CSV with a header, atomically (temporary file, then rename).
pub fn write_csv<R: Serialize>(path: &Path, rows: &[R]) -> Result<()> {
    if let Some(dir) = path.parent() {
        create_dir(dir)?;
    }
    let mut out = lshbench_core::output::AtomicFile::create(path)?;
    {
        let mut w = csv::Writer::from_writer(&mut out);
        for row in rows {
            w.serialize(row).map_err(|cause| ExperimentError::Csv {
                path: path.to_path_buf(),
                cause,
            })?;
        }
        w.flush().map_err(|cause| ExperimentError::Write {
            path: path.to_path_buf(),
            cause,
        })?;
    }
    Ok(out.commit()?)
}

/// Reads rows written by [`write_csv`].
pub fn read_csv<R: DeserializeOwned>(path: &Path) -> Result<Vec<R>> {
    let mut r = csv::Reader::from_path(path).map_err(|cause| ExperimentError::Csv {
        path: path.to_path_buf(),
        cause,
    })?;
    let mut rows = Vec::new();
    for (i, row) in r.deserialize().enumerate() {
        rows.push(row.map_err(|cause| ExperimentError::CsvRow {
            path: path.to_path_buf(),
            row: i + 2,
            cause,
        })?);
    }
    Ok(rows)
}

/// Collects an experiment's checks.
#[derive(Debug, Default)]
pub struct Checks {
    /// The experiment making them.
    pub experiment: String,
    /// The checks, in the order made.
    pub list: Vec<Check>,
    /// Comparisons reported but not checked (where theory gives no firm prediction), shown in the summary.
    pub notes: Vec<String>,
}

impl Checks {
    /// No checks yet.
    pub fn new(experiment: &str) -> Checks {
        Checks {
            experiment: experiment.to_string(),
            list: Vec::new(),
            notes: Vec::new(),
        }
    }
    /// Records a check: `passed` says whether `name` held, `detail` gives the numbers.
    pub fn expect(&mut self, name: impl Into<String>, passed: bool, detail: impl Into<String>) {
        self.list.push(Check {
            experiment: self.experiment.clone(),
            name: name.into(),
            passed,
            detail: detail.into(),
        });
    }
    /// Records a comparison that is reported, not checked.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }
    /// The checks that did not hold.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.list.iter().filter(|c| !c.passed)
    }
    /// Writes `checks.csv` and returns a markdown list of the checks.
    pub fn write(&self, ctx: &Ctx) -> Result<String> {
        write_csv(&ctx.file("checks.csv")?, &self.list)?;
        let mut md = String::new();
        for c in &self.list {
            md.push_str(&format!(
                "- {} **{}**: {}\n",
                if c.passed { "PASS" } else { "FAIL" },
                c.name,
                c.detail
            ));
        }
        for n in &self.notes {
            md.push_str(&format!("- NOTE (reported, not checked): {n}\n"));
        }
        Ok(md)
    }
}

/// Fails with [`ExperimentError::SelfChecks`], naming each failed check, when any check failed.
pub fn fail_on(checks: &[Check]) -> Result<()> {
    let failed: Vec<Check> = checks.iter().filter(|c| !c.passed).cloned().collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(ExperimentError::SelfChecks(failed))
    }
}

/// The values of a list parameter joined by `-`, as a cell key holds them (`[64, 128]` is `64-128`).
pub fn dash_joined<T: ToString>(values: &[T]) -> String {
    values
        .iter()
        .map(T::to_string)
        .collect::<Vec<_>>()
        .join("-")
}

/// A seed for one cell, from the experiment seed and the cell's parameters (not its position), so results do
/// not depend on the order or the thread that runs the cell.
pub fn cell_seed(seed: u64, parts: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(parts.as_bytes(), seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Row {
        kernel: String,
        value: f64,
    }

    #[test]
    fn cell_paths_come_from_the_parameters() {
        let key = CellKey::new()
            .with("kernel", "oph-opt")
            .with("shingle", "char:5")
            .with("k", 128);
        assert_eq!(key.file_name(), "kernel-oph-opt__shingle-char_5__k-128.csv");
        let other = CellKey::new()
            .with("kernel", "oph-opt")
            .with("shingle", "char:5")
            .with("k", 64);
        assert_ne!(key.file_name(), other.file_name());
    }

    #[test]
    fn finished_cells_are_skipped_and_force_reruns_them() {
        let dir = tempfile::tempdir().unwrap();
        let src = Path::new("x.toml");
        let key = CellKey::new().with("kernel", "scalar");
        let runs = AtomicUsize::new(0);
        let compute = || {
            runs.fetch_add(1, Ordering::Relaxed);
            Ok(vec![Row {
                kernel: "scalar".into(),
                value: 0.5,
            }])
        };
        let ctx = Ctx::new(dir.path(), "e", src, 1, false, false, 1);
        let first: Vec<Row> = ctx.cell(&key, compute).unwrap();
        let again: Vec<Row> = ctx.cell(&key, compute).unwrap();
        assert_eq!(first, again);
        assert_eq!(runs.load(Ordering::Relaxed), 1);
        assert_eq!(ctx.counts(), (1, 1));
        assert!(ctx.cell_path(&key).starts_with(dir.path().join("e/cells")));

        let forced = Ctx::new(dir.path(), "e", src, 1, false, true, 1);
        let _: Vec<Row> = forced.cell(&key, compute).unwrap();
        assert_eq!(runs.load(Ordering::Relaxed), 2);

        // --quick writes elsewhere and always recomputes.
        let quick = Ctx::new(dir.path(), "e", src, 1, true, false, 1);
        assert!(quick.dir.ends_with("quick/e"));
        let _: Vec<Row> = quick.cell(&key, compute).unwrap();
        let _: Vec<Row> = quick.cell(&key, compute).unwrap();
        assert_eq!(runs.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn a_failing_compute_leaves_no_cell_file() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Ctx::new(dir.path(), "e", Path::new("x.toml"), 1, false, false, 1);
        let key = CellKey::new().with("kernel", "scalar");
        let r: Result<Vec<Row>> = ctx.cell(&key, || Err(ExperimentError::Mismatch("boom".into())));
        let err = r.unwrap_err();
        assert!(err.to_string().contains("kernel=scalar"), "{err}");
        let cause = std::error::Error::source(&err).map(|c| c.to_string());
        assert_eq!(cause.as_deref(), Some("boom"));
        assert!(!ctx.cell_path(&key).exists());
    }

    #[test]
    fn fail_on_names_every_failed_check() {
        let mut c = Checks::new("accuracy");
        c.expect("fine", true, "ok");
        c.expect("rel MSE in band", false, "1.4 outside [0.9, 1.1]");
        let err = fail_on(&c.list).unwrap_err().to_string();
        assert!(err.contains("rel MSE in band") && err.contains("[accuracy]"));
        assert!(!err.contains("fine"));
        assert!(fail_on(&c.list[..1]).is_ok());
    }
}
