//! `lshbench run`: the flags, the progress lines on stderr and the exit status of the experiment harness
//! ([`lshbench_lab::run`] does the work and prints nothing).

use lshbench_core::exec::Progress;
use lshbench_lab::{ExperimentReport, RunOptions, RunProgress};
use std::path::{Path, PathBuf};

/// Flags of `lshbench run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// The experiment config (TOML): one experiment, e.g. experiments/scurve.toml, or a suite such as
    /// experiments/all.toml.
    pub config: PathBuf,
    /// Run the small version of every experiment with its self-checks (what CI runs). Results go to
    /// `OUT/quick/<name>/` and are always recomputed.
    #[arg(long)]
    pub quick: bool,
    /// Recompute cells whose result files already exist (by default finished cells are skipped).
    #[arg(long)]
    pub force: bool,
    /// The results folder; each experiment writes `OUT/<name>/`.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Worker threads (default: every logical CPU). Results do not depend on it; timings do.
    #[arg(long)]
    pub threads: Option<usize>,
    /// The instruction set of every kernel and shingler the experiments build (each row records it).
    #[command(flatten)]
    pub arch: super::args::IsaArgs,
}

impl RunArgs {
    /// The library's options for these flags.
    pub fn options(&self) -> RunOptions {
        RunOptions {
            config: self.config.clone(),
            quick: self.quick,
            force: self.force,
            out: self.out.clone(),
            threads: self.threads,
            isa: Some(self.arch.isa()),
        }
    }
}

/// Progress as lines on stderr: `[name] ...`.
struct Lines {
    quick: bool,
}

impl Progress for Lines {
    fn stage(&self, what: &str) {
        eprintln!("{what}");
    }
}

impl RunProgress for Lines {
    fn started(&self, name: &str, dir: &Path) {
        eprintln!(
            "[{name}] {} -> {}",
            if self.quick { "quick run" } else { "full run" },
            dir.display()
        );
    }

    fn finished(&self, r: &ExperimentReport) {
        eprintln!(
            "[{}] done in {:.1} s: {} cells computed, {} reused; {} checks, {} failed",
            r.name,
            r.seconds,
            r.computed,
            r.skipped,
            r.checks.len(),
            r.failed().count()
        );
        for c in r.failed() {
            eprintln!("[{}] FAILED {}: {}", r.name, c.name, c.detail);
        }
    }
}

/// Runs every experiment of the config, printing progress, then fails with a message naming each failed
/// self-check.
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let report = lshbench_lab::run(&args.options(), &Lines { quick: args.quick })?;
    eprintln!("all experiments done in {:.1} s", report.seconds);
    for note in report.notes() {
        eprintln!("{note}");
    }
    report.result()?;
    Ok(())
}
