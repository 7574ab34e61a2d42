//! The research harness behind `lshbench run`: experiment configs (TOML), a runner that sweeps their cartesian
//! products cell by cell (finished cells are skipped, `force` reruns them), CSV rows with provenance, markdown
//! summaries, plots, and self-checks that say when a result contradicts theory.
//!
//! The library call is [`run`]: [`RunOptions`] in, a [`RunReport`] (every check, timings) out, progress through
//! a [`RunProgress`]; it prints nothing. [`RunReport::result`] turns failed self-checks into an error.
//!
//! Which theory a kernel's cells are checked against comes from the kernel registry
//! ([`lshbench_core::kernel::KernelSpec::family`] and `same_output_as`); a kernel outside the registry is an error.
//!
//! Layout: [`config`] (the format), [`runner`] (cells, paths, CSV, checks), [`stats`] (erfinv, Wilson,
//! Ertl's band), [`report`] (markdown), [`chart`] (what is plotted, the kernel colours), `plot` (drawing PNG and
//! SVG, with the `plots` feature), [`error`], and one module per experiment kind: [`theory`], [`accuracy`],
//! [`scurve`], [`recall`], [`throughput`], [`bbit`] (b-bit slots against bytes per document), [`ablation`]
//! (hash families, the Pareto figure), and [`faults`], which runs the checks against deliberately broken
//! kernels.

#![warn(missing_docs)]

pub mod ablation;
pub mod accuracy;
pub mod bbit;
pub mod broken;
pub mod chart;
pub mod check;
pub mod config;
pub mod deps;
pub mod error;
pub mod faults;
pub mod figures;
#[cfg(feature = "plots")]
pub mod plot;
pub mod recall;
pub mod report;
pub mod runner;
pub mod scurve;
pub mod stats;
pub mod theory;
pub mod throughput;

pub use error::ExperimentError;
pub use runner::Check;

use lshbench_core::exec::Progress;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What [`run`] runs, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// The experiment config (TOML): one experiment, e.g. `experiments/scurve.toml`, or a suite such as
    /// `experiments/all.toml`.
    pub config: PathBuf,
    /// Run the small version of every experiment with its self-checks. Results go to `out/quick/<name>/` and
    /// are always recomputed.
    pub quick: bool,
    /// Recompute cells whose result files already exist (by default finished cells are reused).
    pub force: bool,
    /// The results folder; each experiment writes `out/<name>/`.
    pub out: PathBuf,
    /// Worker threads (`None`: every logical CPU). Results do not depend on it; timings do.
    pub threads: Option<usize>,
    /// The instruction set of every kernel and shingler the experiments build (`None`: the widest this CPU
    /// runs). Statistics do not depend on it; timings do. Cells run on a narrower one than the widest are
    /// kept apart (their file names end in `__isa-NAME`), so a finished cell is never reused for another.
    pub isa: Option<lshbench_core::arch::Isa>,
}

impl RunOptions {
    /// The full run of `config` into `results/`, reusing finished cells, on every logical CPU.
    pub fn new(config: impl Into<PathBuf>) -> RunOptions {
        RunOptions {
            config: config.into(),
            quick: false,
            force: false,
            out: PathBuf::from("results"),
            threads: None,
            isa: None,
        }
    }
}

/// Where [`run`] reports as it goes: the stages of [`Progress`] (e.g. a recall study's ground truth), and each
/// experiment as it starts and finishes. Every method has a do-nothing default.
pub trait RunProgress: Progress {
    /// Experiment `name` starts; its results go to `dir`.
    fn started(&self, _name: &str, _dir: &Path) {}
    /// An experiment finished (its self-checks may have failed).
    fn finished(&self, _report: &ExperimentReport) {}
}

/// Reports nothing.
impl RunProgress for lshbench_core::exec::Silent {}

/// One experiment's outcome.
#[derive(Clone, Debug)]
pub struct ExperimentReport {
    /// The experiment's name.
    pub name: String,
    /// The config file it came from.
    pub source: PathBuf,
    /// The folder its results went to.
    pub dir: PathBuf,
    /// Cells computed in this run.
    pub computed: usize,
    /// Finished cells reused from an earlier run.
    pub skipped: usize,
    /// Wall time.
    pub seconds: f64,
    /// Its self-checks, passed and failed.
    pub checks: Vec<Check>,
    /// Comparisons reported in the summary but not checked (where theory gives no firm prediction).
    pub notes: Vec<String>,
}

impl ExperimentReport {
    /// The self-checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.passed)
    }
}

/// What a [`run`] did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Each experiment, in the order run.
    pub experiments: Vec<ExperimentReport>,
    /// Wall time of the whole run.
    pub seconds: f64,
    /// Whether charts were drawn (the `plots` feature); without it only CSV and markdown are written.
    pub charts_drawn: bool,
}

impl RunReport {
    /// Every self-check of every experiment.
    pub fn checks(&self) -> impl Iterator<Item = &Check> {
        self.experiments.iter().flat_map(|e| e.checks.iter())
    }

    /// The self-checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks().filter(|c| !c.passed)
    }

    /// What the run wants said once: that charts were not drawn, when they were not.
    pub fn notes(&self) -> Vec<String> {
        if self.charts_drawn {
            Vec::new()
        } else {
            vec![chart::NOT_DRAWN.to_string()]
        }
    }

    /// `Ok` when every self-check passed, else [`ExperimentError::SelfChecks`] naming each failed one.
    pub fn result(&self) -> Result<(), ExperimentError> {
        let all: Vec<Check> = self.checks().cloned().collect();
        runner::fail_on(&all)
    }
}

/// Runs every experiment of the config on a pool of `options.threads` workers and reports each one's checks
/// and timings. Failed self-checks do not make this fail (see [`RunReport::result`]); a config that cannot be
/// loaded, a cell that cannot be computed or a file that cannot be written does.
pub fn run(options: &RunOptions, progress: &dyn RunProgress) -> Result<RunReport, ExperimentError> {
    let started = Instant::now();
    let plan = config::load(&options.config, options.quick)?;
    let dispatch = lshbench_core::arch::Dispatch::of(options.isa)?;
    let threads = options
        .threads
        .unwrap_or_else(lshbench_core::machine::logical_cpus);
    let pool = lshbench_core::exec::thread_pool(Some(threads))?;
    let mut experiments = Vec::new();
    for exp in &plan {
        let ctx = runner::Ctx::new(
            &options.out,
            &exp.name,
            &exp.source,
            exp.seed,
            options.quick,
            options.force,
            threads,
        )
        .with_dispatch(dispatch)
        .with_progress(progress);
        progress.started(&exp.name, &ctx.dir);
        let t = Instant::now();
        let checks = pool.install(|| run_one(&ctx, &exp.spec)).map_err(|cause| {
            ExperimentError::Experiment {
                name: exp.name.clone(),
                file: exp.source.clone(),
                cause: Box::new(cause),
            }
        })?;
        let (computed, skipped) = ctx.counts();
        let report = ExperimentReport {
            name: exp.name.clone(),
            source: exp.source.clone(),
            dir: ctx.dir.clone(),
            computed,
            skipped,
            seconds: t.elapsed().as_secs_f64(),
            checks: checks.list,
            notes: checks.notes,
        };
        progress.finished(&report);
        experiments.push(report);
    }
    Ok(RunReport {
        experiments,
        seconds: started.elapsed().as_secs_f64(),
        charts_drawn: chart::DRAWN,
    })
}

/// Runs one experiment in `ctx` (on the current rayon pool) and returns its checks.
pub fn run_one(ctx: &runner::Ctx, spec: &config::Spec) -> Result<runner::Checks, ExperimentError> {
    match spec {
        config::Spec::Theory(c) => theory::run(ctx, c),
        config::Spec::Accuracy(c) => accuracy::run(ctx, c),
        config::Spec::Scurve(c) => scurve::run(ctx, c),
        config::Spec::Recall(c) => recall::run(ctx, c),
        config::Spec::Throughput(c) => throughput::run(ctx, c),
        config::Spec::Faults(c) => faults::run(ctx, c),
        config::Spec::Bbit(c) => bbit::run(ctx, c),
        config::Spec::Ablation(c) => ablation::run(ctx, c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records what a run reports.
    #[derive(Default)]
    struct Record(Mutex<Vec<String>>);

    impl Progress for Record {
        fn stage(&self, what: &str) {
            self.0.lock().unwrap().push(format!("stage {what}"));
        }
    }

    impl RunProgress for Record {
        fn started(&self, name: &str, _dir: &Path) {
            self.0.lock().unwrap().push(format!("started {name}"));
        }
        fn finished(&self, report: &ExperimentReport) {
            self.0
                .lock()
                .unwrap()
                .push(format!("finished {}", report.name));
        }
    }

    #[test]
    fn run_returns_a_report_and_prints_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("t.toml");
        std::fs::write(&config, "kind = \"theory\"\nthresholds = [0.5]\n").unwrap();
        let options = RunOptions {
            out: dir.path().join("out"),
            threads: Some(1),
            ..RunOptions::new(&config)
        };
        let record = Record::default();
        let report = run(&options, &record).unwrap();
        assert_eq!(
            *record.0.lock().unwrap(),
            ["started t", "finished t"].map(String::from)
        );
        assert_eq!(report.experiments.len(), 1);
        let t = &report.experiments[0];
        assert_eq!(
            (t.name.as_str(), t.dir.clone()),
            ("t", dir.path().join("out/t"))
        );
        assert!(t.dir.join("summary.md").exists() && t.dir.join("checks.csv").exists());
        assert!(t.checks.len() > 10 && report.failed().next().is_none());
        assert_eq!(report.checks().count(), t.checks.len());
        assert!(report.result().is_ok());
        assert_eq!(report.charts_drawn, chart::DRAWN);
        assert_eq!(report.notes().is_empty(), chart::DRAWN);
    }

    /// The `isa` column of every row of `file`.
    fn isas(file: &Path) -> Vec<String> {
        let mut r = csv::Reader::from_path(file).unwrap();
        let column = r.headers().unwrap().iter().position(|h| h == "isa");
        let column = column.expect("the rows record the instruction set");
        let isas: Vec<String> = r
            .records()
            .map(|row| row.unwrap()[column].to_string())
            .collect();
        assert!(!isas.is_empty(), "{} has rows", file.display());
        isas
    }

    #[test]
    fn every_kernel_runs_on_the_instruction_set_of_the_run_and_its_rows_say_so() {
        use lshbench_core::arch::Isa;
        let dir = tempfile::tempdir().unwrap();
        let throughput = dir.path().join("speed.toml");
        std::fs::write(
            &throughput,
            "kind = \"throughput\"\n\
             datasets = [{ name = \"synth\", generator = \"synth\", docs = 30, seed = 7 }]\n\
             kernels = [\"simd\"]\nnum_perm = [64]\nshingles = [\"char:5\"]\nthreads = [1]\nrepeats = 1\n",
        )
        .unwrap();
        let accuracy = dir.path().join("acc.toml");
        std::fs::write(
            &accuracy,
            "kind = \"accuracy\"\n[[sweep]]\nkernels = [\"simd\"]\nnum_perm = [64]\nunion = [32]\n\
             jaccard = [0.5]\nelements = [\"random\"]\ntrials = 10\n",
        )
        .unwrap();
        let out = dir.path().join("out");
        // The default (the widest ISA) first, then scalar into the same folder without `force`: the scalar run
        // must compute its own cells, not reuse the widest one's.
        for isa in [None, Some(Isa::Scalar)] {
            for (config, rows) in [
                (&throughput, "speed/throughput.csv"),
                (&accuracy, "acc/accuracy.csv"),
            ] {
                let options = RunOptions {
                    out: out.clone(),
                    threads: Some(1),
                    isa,
                    ..RunOptions::new(config)
                };
                let report = run(&options, &lshbench_core::exec::Silent).unwrap();
                assert_eq!(report.experiments[0].skipped, 0, "{isa:?}");
                let want = isa.unwrap_or_else(Isa::detect).name();
                assert!(
                    isas(&out.join(rows)).iter().all(|got| got == want),
                    "{rows} with {isa:?}: {:?}",
                    isas(&out.join(rows))
                );
                let summary =
                    std::fs::read_to_string(report.experiments[0].dir.join("summary.md")).unwrap();
                assert_eq!(summary.contains("--isa scalar"), isa.is_some(), "{summary}");
            }
        }
        let run_on = |isa| RunOptions {
            out: out.clone(),
            threads: Some(1),
            isa,
            ..RunOptions::new(&accuracy)
        };
        // Rerun without `force`, each instruction set reuses its own finished cells.
        for isa in [None, Some(Isa::Scalar)] {
            let report = run(&run_on(isa), &lshbench_core::exec::Silent).unwrap();
            assert_eq!(report.experiments[0].computed, 0, "{isa:?}");
            let want = isa.unwrap_or_else(Isa::detect).name();
            assert!(
                isas(&out.join("acc/accuracy.csv"))
                    .iter()
                    .all(|got| got == want)
            );
        }
    }

    #[test]
    fn a_bad_config_or_zero_threads_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, "kind = \"theory\"\nnum_perm = 0\n").unwrap();
        let err = run(&RunOptions::new(&config), &lshbench_core::exec::Silent).unwrap_err();
        assert!(
            matches!(err, ExperimentError::Config { .. }) && err.to_string().contains("bad.toml"),
            "{err}"
        );
        std::fs::write(&config, "kind = \"theory\"\n").unwrap();
        let options = RunOptions {
            threads: Some(0),
            out: dir.path().join("out"),
            ..RunOptions::new(&config)
        };
        let err = run(&options, &lshbench_core::exec::Silent).unwrap_err();
        assert!(matches!(err, ExperimentError::Threads(_)), "{err}");
    }
}
