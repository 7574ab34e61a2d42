//! The command-line interface: the only layer that parses flags, prints, draws progress bars and builds
//! thread pools for a command. Each subcommand's flags and printing live in a file of their own; the library
//! calls take plain option structs and return values and reports.

pub mod args;
pub mod check;
pub mod dedup;
pub mod exact;
pub mod r#gen;
pub mod report;
pub mod run;
pub mod scurve;
pub mod serve;
pub mod sketch;
pub mod term;
pub mod tune;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "lshbench",
    version,
    about = "Near-duplicate detection with MinHash and LSH: kernels, S-curves, dedup"
)]
/// The parsed command line.
pub struct Cli {
    #[command(subcommand)]
    /// The subcommand and its flags.
    pub command: Command,
}

#[derive(Subcommand, Debug)]
/// The subcommands.
pub enum Command {
    /// CPU features seen, the instruction set each kernel runs on, the kernels available.
    Info,
    /// Read a corpus, shingle and sign every document, write the signatures (CSV, NPY or Parquet).
    Sketch(sketch::SketchArgs),
    /// Write a seeded synthetic corpus with planted near-duplicate clusters and its ground truth.
    Gen(r#gen::GenArgs),
    /// Which (b, r)? Every banding with b*r <= k against recall and false-positive targets.
    Tune(tune::TuneArgs),
    /// The S-curve P(s) = 1 - (1 - s^r)^b of one banding: table, threshold, steepest point.
    Scurve(scurve::ScurveArgs),
    /// Exact all-pairs Jaccard join (prefix filtering, multi-threaded): ground truth for dedup.
    Exact(Box<exact::ExactArgs>),
    /// Near-duplicate pairs and groups: read, shingle, sign, band, verify, group.
    Dedup(Box<dedup::DedupArgs>),
    /// Run an experiment config (TOML): sweeps to CSV, markdown and plots under results/, with self-checks.
    Run(run::RunArgs),
    /// The online service: a durable near-duplicate index over HTTP (check, query, insert, delete)
    Serve(Box<serve::ServeArgs>),
    /// Stream a corpus through a running `lshbench serve` and write the near-duplicate pairs it reports
    Check(Box<check::CheckArgs>),
}

/// Parses the command line, runs the subcommand, prints an error (with its causes) and exits non-zero on failure.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Info => info(),
        Command::Sketch(args) => sketch::run(&args),
        Command::Gen(args) => r#gen::run(&args),
        Command::Tune(args) => tune::run(&args),
        Command::Scurve(args) => scurve::run(&args),
        Command::Exact(args) => exact::run(&args),
        Command::Dedup(args) => dedup::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Check(args) => check::run(&args),
    }
}

fn info() -> anyhow::Result<()> {
    use lshbench_core::kernel::{self, KernelParams};
    println!("machine: {}", lshbench_core::machine::describe());
    let isa = args::auto_isa();
    println!("detected ISA: {isa}");
    println!("kernels:");
    for spec in kernel::KERNELS {
        let params = KernelParams {
            num_perm: 128,
            seed: 42,
            isa: Some(isa),
        };
        match kernel::build_spec(spec, &params) {
            Ok(k) => println!(
                "  {:<10} runs on {:<8} [{}] {}",
                spec.name,
                k.isa().name(),
                spec.family.name(),
                spec.about
            ),
            Err(e) => println!("  {:<10} unavailable: {e}", spec.name),
        }
    }
    println!(
        "b-bit slots: --bits {} on sketch and dedup, with any kernel (Li and König; estimate corrected for \
         chance agreement 2^-b, dedup's banding tuned at 2^-b + (1 - 2^-b) s)",
        kernel::bbit::BITS.map(|b| b.to_string()).join("|")
    );
    Ok(())
}
