//! The research harness behind `lshbench run`: experiment configs (TOML), a runner that sweeps their cartesian
//! products cell by cell (finished cells are skipped, `--force` reruns them), CSV rows with provenance,
//! markdown summaries, plots, and self-checks that fail the run loudly when a result contradicts theory.
//!
//! Layout: [`config`] (the format), [`runner`] (cells, paths, CSV, checks), [`stats`] (erfinv, Wilson,
//! Ertl's band), [`report`] (markdown), [`plot`] (PNG and SVG), and one module per experiment kind:
//! [`theory`], [`accuracy`], [`scurve`], [`recall`], [`throughput`].

pub mod accuracy;
pub mod config;
pub mod deps;
pub mod plot;
pub mod recall;
pub mod report;
pub mod runner;
pub mod scurve;
pub mod stats;
pub mod theory;
pub mod throughput;

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Instant;

/// Flags of `lshbench run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// The experiment config (TOML): one experiment, e.g. experiments/scurve.toml, or a suite such as
    /// experiments/all.toml.
    pub config: PathBuf,
    /// Run the small version of every experiment with its self-checks (what CI runs). Results go to
    /// OUT/quick/<name>/ and are always recomputed.
    #[arg(long)]
    pub quick: bool,
    /// Recompute cells whose result files already exist (by default finished cells are skipped).
    #[arg(long)]
    pub force: bool,
    /// The results folder; each experiment writes OUT/<name>/.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Worker threads (default: every logical CPU). Results do not depend on it; timings do.
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Runs every experiment of the config, then fails with a message naming each failed self-check.
pub fn run(args: &RunArgs) -> Result<()> {
    let plan = config::load(&args.config, args.quick)?;
    let threads = args
        .threads
        .unwrap_or_else(crate::machine::logical_cpus)
        .max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("cannot start the thread pool")?;
    let mut all_checks = Vec::new();
    let started = Instant::now();
    for exp in &plan {
        let ctx = runner::Ctx::new(
            &args.out,
            &exp.name,
            args.quick,
            args.force,
            threads,
            &exp.source,
            exp.seed,
        );
        eprintln!(
            "[{}] {} -> {}",
            exp.name,
            if args.quick { "quick run" } else { "full run" },
            ctx.dir.display()
        );
        let t = Instant::now();
        let checks = pool.install(|| run_one(&ctx, exp))?;
        let (computed, skipped) = ctx.counts();
        let failed = checks.failed().count();
        eprintln!(
            "[{}] done in {:.1} s: {computed} cells computed, {skipped} reused; {} checks, {failed} failed",
            exp.name,
            t.elapsed().as_secs_f64(),
            checks.list.len()
        );
        for c in checks.failed() {
            eprintln!("[{}] FAILED {}: {}", exp.name, c.name, c.detail);
        }
        all_checks.extend(checks.list);
    }
    eprintln!(
        "all experiments done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    runner::fail_on(&all_checks)
}

fn run_one(ctx: &runner::Ctx, exp: &config::Loaded) -> Result<runner::Checks> {
    let checks = match &exp.spec {
        config::Spec::Theory(c) => theory::run(ctx, c),
        config::Spec::Accuracy(c) => accuracy::run(ctx, c),
        config::Spec::Scurve(c) => scurve::run(ctx, c),
        config::Spec::Recall(c) => recall::run(ctx, c),
        config::Spec::Throughput(c) => throughput::run(ctx, c),
    };
    checks.with_context(|| format!("experiment `{}` ({})", exp.name, exp.source.display()))
}
