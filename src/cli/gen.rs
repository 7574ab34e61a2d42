//! `lshbench gen`: the flags of the synthetic corpus generator ([`lshbench_core::corpus::synth`]) and its summary.

use lshbench_core::corpus::synth::{self, GenConfig};
use std::path::PathBuf;

/// Parses `MIN..MAX` (inclusive) or a single value `V` (meaning `V..V`).
fn parse_range<T: std::str::FromStr + PartialOrd + Copy>(s: &str) -> Result<(T, T), String>
where
    T::Err: std::fmt::Display,
{
    let parse = |x: &str| {
        x.trim()
            .parse::<T>()
            .map_err(|e| format!("`{x}`: {e} (expected MIN..MAX or a single value)"))
    };
    let (lo, hi) = match s.split_once("..") {
        Some((a, b)) => (parse(a)?, parse(b.strip_prefix('=').unwrap_or(b))?),
        None => {
            let v = parse(s)?;
            (v, v)
        }
    };
    if hi < lo {
        return Err(format!("`{s}`: MAX is below MIN"));
    }
    Ok((lo, hi))
}

fn parse_usize_range(s: &str) -> Result<(usize, usize), String> {
    parse_range(s)
}

fn parse_f64_range(s: &str) -> Result<(f64, f64), String> {
    parse_range(s)
}

/// `lshbench gen`: write a synthetic corpus with planted near-duplicate clusters and its ground truth.
#[derive(clap::Args, Clone, Debug)]
pub struct GenArgs {
    /// Number of documents (at most 10^8).
    #[arg(long, default_value_t = 10_000)]
    pub docs: usize,
    /// Mean document length in bytes (at most 10^7).
    #[arg(long, value_name = "BYTES", default_value_t = 1500)]
    pub mean_len: usize,
    /// Spread of document lengths: sigma of the log-normal length distribution (0 = all the same length).
    #[arg(long, default_value_t = 0.5)]
    pub len_sigma: f64,
    /// Fraction of documents that are planted copies (near-duplicates of another document in the corpus).
    #[arg(long, default_value_t = 0.1)]
    pub dup_fraction: f64,
    /// Documents per planted cluster, base included: MIN..MAX (inclusive; MAX at most 10^5) or one number.
    #[arg(long, value_name = "MIN..MAX", default_value = "2..5", value_parser = parse_usize_range)]
    pub cluster_size: (usize, usize),
    /// Word edits per base word for each copy, drawn uniformly from MIN..MAX (0 gives exact copies).
    #[arg(long, value_name = "MIN..MAX", default_value = "0..0.3", value_parser = parse_f64_range)]
    pub edit_rate: (f64, f64),
    /// Block moves per copy: uniformly 0 to this many runs of 5-30 words cut and put back elsewhere (at most
    /// 10^4).
    #[arg(long, default_value_t = 2)]
    pub max_moves: usize,
    /// Fraction of clusters whose members share a template (job-ad style) with their own slot values.
    #[arg(long, default_value_t = 0.2)]
    pub template_fraction: f64,
    /// Template slots (names, cities, companies, salaries, dates, numbers) per word of template text.
    #[arg(long, default_value_t = 0.05)]
    pub slot_rate: f64,
    /// Vocabulary size (word types).
    #[arg(long, default_value_t = 50_000)]
    pub vocab: usize,
    /// Zipf exponent s of the word frequencies (rank r has probability proportional to r^-s).
    #[arg(long, default_value_t = 1.0)]
    pub zipf: f64,
    /// Leave the common English words out of the vocabulary (all pseudo-words).
    #[arg(long)]
    pub no_english: bool,
    /// Random seed: the same seed and flags give byte-identical files.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Output corpus, JSONL `{"id","text"}`; gzip-compressed when the name ends in `.gz`.
    #[arg(long, value_name = "PATH")]
    pub output: PathBuf,
    /// Ground-truth CSV naming every planted cluster. Default: beside the output, `<name>.truth.csv`.
    #[arg(long, value_name = "PATH")]
    pub truth: Option<PathBuf>,
    /// Worker threads (0 = all cores; at most 1024). The output does not depend on it.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

impl GenArgs {
    /// The generator configuration these flags describe.
    pub fn config(&self) -> GenConfig {
        GenConfig {
            docs: self.docs,
            mean_len: self.mean_len,
            len_sigma: self.len_sigma,
            dup_fraction: self.dup_fraction,
            cluster_size: self.cluster_size,
            edit_rate: self.edit_rate,
            max_moves: self.max_moves,
            template_fraction: self.template_fraction,
            slot_rate: self.slot_rate,
            vocab: self.vocab,
            zipf: self.zipf,
            english: !self.no_english,
            seed: self.seed,
        }
    }

    /// The truth path: `--truth`, or [`synth::default_truth_path`] of the output.
    pub fn truth_path(&self) -> PathBuf {
        match &self.truth {
            Some(t) => t.clone(),
            None => synth::default_truth_path(&self.output),
        }
    }
}

/// Runs `lshbench gen`: writes the corpus and its truth, then a two-line summary on stderr.
pub fn run(args: &GenArgs) -> anyhow::Result<()> {
    use super::args::{at_most, limits};
    let config = args.config();
    config.validate()?;
    at_most("--docs", args.docs, limits::GEN_DOCS)?;
    at_most("--mean-len", args.mean_len, limits::GEN_MEAN_LEN)?;
    at_most(
        "--cluster-size MAX",
        args.cluster_size.1,
        limits::GEN_CLUSTER_SIZE,
    )?;
    at_most("--max-moves", args.max_moves, limits::GEN_MAX_MOVES)?;
    let threads = (args.threads != 0).then_some(args.threads);
    let truth_path = args.truth_path();
    super::args::check_outputs(
        &[],
        &[
            ("--output", Some(&args.output)),
            ("--truth", Some(&truth_path)),
        ],
    )?;
    let bar = super::term::Bar::new("generating");
    let started = std::time::Instant::now();
    let written = lshbench_core::exec::with_threads(threads, || {
        synth::write_files(&config, &args.output, &truth_path, &bar)
    });
    bar.finish();
    let report = written??;
    let secs = started.elapsed().as_secs_f64();
    let text_bytes = report.text_bytes;
    eprintln!(
        "wrote {} documents ({:.1} MB of text, mean {:.0} bytes) to {} in {:.2} s ({:.0} MB/s, {} threads)",
        report.documents,
        text_bytes as f64 / 1e6,
        text_bytes as f64 / report.documents.max(1) as f64,
        args.output.display(),
        secs,
        text_bytes as f64 / 1e6 / secs,
        report.threads
    );
    let truth = &report.truth;
    eprintln!(
        "planted {} clusters ({} documents, {} copies); ground truth in {}",
        truth.clusters.len(),
        truth
            .clusters
            .iter()
            .map(|c| c.members.len())
            .sum::<usize>(),
        truth.copies(),
        truth_path.display()
    );
    Ok(())
}
