//! `lshbench exact`: the flags of the exact all-pairs join ([`lshbench_core::exact`]) and its summary on stdout.

use lshbench_core::exact;
use lshbench_core::lsh::scurve::check_threshold;

/// `lshbench exact`: every pair with exact Jaccard >= threshold (ground truth for `dedup`).
#[derive(clap::Args, Debug, Clone)]
pub struct ExactArgs {
    /// The corpus and how to read it.
    #[command(flatten)]
    pub reader: super::args::ReaderArgs,
    /// How documents become shingle sets.
    #[command(flatten)]
    pub shingle: super::args::ShingleArgs,
    /// Seed of the shingle hash (use the same as `dedup --seed` for identical shingle ids).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Report pairs with exact Jaccard at least this, in (0, 1].
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,
    /// Output CSV `id_a,id_b,jaccard` (ids in input order within a pair; rows sorted by input position).
    #[arg(long, value_name = "CSV")]
    pub output: std::path::PathBuf,
    /// Worker threads (default: all logical CPUs; at most 1024).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The instruction set of reading, shingling and the join's set building.
    #[command(flatten)]
    pub arch: super::args::IsaArgs,
}

/// Runs `lshbench exact`: writes the pairs CSV and prints the read counts, the pair count and the timings.
pub fn run(args: &ExactArgs) -> anyhow::Result<()> {
    lshbench_core::exec::with_threads(args.threads, || run_on_pool(args))?
}

fn run_on_pool(args: &ExactArgs) -> anyhow::Result<()> {
    let t = check_threshold(args.threshold)?;
    super::args::check_outputs(
        &[("--input", Some(&args.reader.input))],
        &[("--output", Some(&args.output))],
    )?;
    let t0 = std::time::Instant::now();
    let shingler = args.shingle.shingler(args.seed, Some(args.arch.isa()))?;
    let mut corpus = args.reader.open(shingler.dispatch())?;
    let bar = super::term::Bar::new("shingling");
    let joined = exact::join_corpus(&mut corpus, &shingler, t, &bar);
    bar.finish();
    let join = joined?;
    exact::write_pairs_csv(&args.output, &join.ids, &join.pairs)?;
    println!("{}", super::report::read_stats(&join.stats));
    println!(
        "documents: {}, {} empty (never paired); pairs with J >= {t}: {}",
        join.ids.len(),
        join.empty,
        join.pairs.len()
    );
    println!(
        "time: read+shingle {:.3} s, join {:.3} s, total {:.3} s",
        join.read_seconds,
        join.join_seconds,
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
