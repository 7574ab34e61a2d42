//! What can go wrong in the harness, typed: config files, result files, cells, and the lower layers' errors.
//!
//! Errors about a file carry its path and the cause in their message, once (the cause is not also a
//! [`std::error::Error::source`]); the context wrappers ([`ExperimentError::Experiment`],
//! [`ExperimentError::Cell`], ...) name where it happened and hand the cause on as their source, so a printer
//! that walks the source chain (the CLI's) shows `experiment `x` (file): cell k=v: cause`.

use crate::check::Check;
use std::path::PathBuf;
use std::sync::Arc;

/// Why an experiment run failed.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A config file that cannot be used; the message names the file and the key.
    #[error("{}: {message}", file.display())]
    Config {
        /// The config file.
        file: PathBuf,
        /// What is wrong, starting with the key.
        message: String,
    },
    /// A config file that is not valid TOML or does not fit the experiment's format.
    #[error("{}: {}{cause}", file.display(), if *in_quick { "in [quick]: " } else { "" })]
    Toml {
        /// The config file.
        file: PathBuf,
        /// Whether the error is in the `[quick]` overrides.
        in_quick: bool,
        /// toml's message: the line and column where it has them, and the key.
        cause: toml::de::Error,
    },
    /// A config file that cannot be read.
    #[error("cannot read config {}: {cause}", file.display())]
    ReadConfig {
        /// The config file.
        file: PathBuf,
        /// Why it cannot be read.
        cause: std::io::Error,
    },
    /// A results folder that cannot be created.
    #[error("cannot create {}: {cause}", path.display())]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// Why it cannot be created.
        cause: std::io::Error,
    },
    /// A results file that cannot be written.
    #[error("cannot write {}: {cause}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why it cannot be written.
        cause: std::io::Error,
    },
    /// A CSV file of results that cannot be opened, written or read back.
    #[error("{}: {cause}", path.display())]
    Csv {
        /// The CSV file.
        path: PathBuf,
        /// The CSV library's error.
        cause: csv::Error,
    },
    /// A row of a CSV file of results that does not parse.
    #[error("{}: row {row}: {cause}", path.display())]
    CsvRow {
        /// The CSV file.
        path: PathBuf,
        /// The row, counting the header as row 1.
        row: usize,
        /// The CSV library's error.
        cause: csv::Error,
    },
    /// A finished cell's file (from an earlier run) that cannot be read back.
    #[error("reading the finished cell {} (rerun with --force to recompute it)", path.display())]
    FinishedCell {
        /// The cell's file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        cause: Box<ExperimentError>,
    },
    /// A cell that failed.
    #[error("cell {label}")]
    Cell {
        /// The cell's parameters, `k=v, ...`.
        label: String,
        /// Why it failed.
        #[source]
        cause: Box<ExperimentError>,
    },
    /// An experiment that failed.
    #[error("experiment `{name}` ({})", file.display())]
    Experiment {
        /// The experiment's name.
        name: String,
        /// Its config file.
        file: PathBuf,
        /// Why it failed.
        #[source]
        cause: Box<ExperimentError>,
    },
    /// A recall study whose corpus could not be prepared (shared by every cell of the study).
    #[error("study `{name}`")]
    Study {
        /// The study's name.
        name: String,
        /// Why its corpus could not be prepared.
        #[source]
        cause: Arc<ExperimentError>,
    },
    /// The synthetic generator refused a dataset's parameters.
    #[error("dataset `{dataset}`: generator: {message}")]
    Generator {
        /// The dataset's name.
        dataset: String,
        /// The generator's message.
        message: String,
    },
    /// A shingle spec that does not parse (configs are checked when loaded, so only direct callers see it).
    #[error("{0}")]
    Shingle(String),
    /// Two ways of computing the same result disagreed (a defect, not a statistical failure).
    #[error("{0}")]
    Mismatch(String),
    /// A chart that could not be drawn or written.
    #[error("plot `{what}`: {message}")]
    Plot {
        /// The chart's title or file.
        what: String,
        /// plotters' message.
        message: String,
    },
    /// Self-checks that failed: every one is named, with its numbers.
    #[error("{}", failed_message(.0))]
    SelfChecks(Vec<Check>),
    /// A kernel that cannot be built.
    #[error(transparent)]
    Kernel(#[from] lshbench_core::kernel::KernelError),
    /// A slot width outside 1, 2, 4, 8, 16, 32.
    #[error(transparent)]
    Bits(#[from] lshbench_core::kernel::bbit::BadBits),
    /// An instruction set this CPU does not run.
    #[error(transparent)]
    Isa(#[from] lshbench_core::arch::Unsupported),
    /// A thread pool that cannot be had.
    #[error(transparent)]
    Threads(#[from] lshbench_core::exec::ThreadsError),
    /// A corpus file that cannot be read.
    #[error(transparent)]
    Read(#[from] lshbench_core::corpus::ReadError),
    /// A result file that cannot be written (temporary name, then renamed into place; the message names it).
    #[error(transparent)]
    Output(#[from] lshbench_core::output::OutputError),
}

fn failed_message(failed: &[Check]) -> String {
    let mut msg = format!("{} self-check(s) failed:", failed.len());
    for c in failed {
        msg.push_str(&format!("\n  [{}] {}: {}", c.experiment, c.name, c.detail));
    }
    msg
}

impl ExperimentError {
    /// A config error about `file`.
    pub(crate) fn config(file: &std::path::Path, message: impl Into<String>) -> ExperimentError {
        ExperimentError::Config {
            file: file.to_path_buf(),
            message: message.into(),
        }
    }
}
