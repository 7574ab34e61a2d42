//! `lshbench sketch`: flags, thread pool, progress bar and summary around [`lshbench_core::sketch::sketch`].

use crate::cli::args::{KernelArgs, ReaderArgs, ShingleArgs, check_outputs};
use crate::cli::term::Bar;
use lshbench_core::sketch::{SignatureWriter, SketchReport};
use std::path::PathBuf;

/// The flags of `lshbench sketch`.
#[derive(clap::Args, Debug)]
pub struct SketchArgs {
    /// The corpus and how to read it.
    #[command(flatten)]
    pub reader: ReaderArgs,
    /// Shingle kind and normalisation.
    #[command(flatten)]
    pub shingle: ShingleArgs,
    /// The signature kernel, k, the seed and the instruction set.
    #[command(flatten)]
    pub kernel: KernelArgs,
    /// Where to write the signatures: `.csv` (columns id,h0,...,h{k-1}), `.npy` (an n x k uint32 array, with
    /// the ids in `<stem>.ids.csv` beside it) or `.parquet` (columns id: utf8, signature: fixed-size list of k
    /// uint32, empty: bool). An empty document's row is all 4294967295.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Bits kept per slot: 1, 2, 4, 8, 16 or 32 (b-bit minwise hashing). Below 32, `.npy` holds an
    /// n x ceil(k b / 64) uint64 array of packed signatures (slot i at bit (i b) mod 64 of word i b / 64) and
    /// `.csv` the b-bit values.
    #[arg(long, default_value_t = 32)]
    pub bits: u32,
    /// Worker threads (default: every logical CPU; at most 1024). The output is identical for any value.
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Runs `lshbench sketch`: writes the signatures and prints the summary on stderr.
pub fn run(args: &SketchArgs) -> anyhow::Result<()> {
    let ids = lshbench_core::sketch::ids_path(&args.output);
    let npy = lshbench_core::sketch::SignatureFormat::of(&args.output)
        == Some(lshbench_core::sketch::SignatureFormat::Npy);
    check_outputs(
        &[("--input", Some(&args.reader.input))],
        &[
            ("--output", Some(&args.output)),
            ("--output's ids file", npy.then_some(ids.as_path())),
        ],
    )?;
    let shingler = args.shingle.shingler(args.kernel.seed, args.kernel.isa())?;
    let kernel = args.kernel.build_bits(args.bits)?;
    let pool = lshbench_core::exec::thread_pool(args.threads)?;
    let mut reader = args.reader.open(shingler.dispatch())?;
    let tuning = crate::cli::args::tuning();
    let output =
        SignatureWriter::create_bits(&args.output, kernel.num_perm(), args.bits)?.tuned(&tuning);
    let bar = Bar::new("sketching");
    let report = pool.install(|| {
        lshbench_core::sketch::sketch(
            &mut reader,
            &shingler,
            kernel.as_ref(),
            output,
            &bar,
            &tuning,
        )
    })?;
    bar.finish();
    eprint!("{}", summary(&report));
    Ok(())
}

/// The run summary `lshbench sketch` prints on stderr (one line per fact, newline-terminated).
pub fn summary(report: &SketchReport) -> String {
    format!(
        "{}\nsketched {} documents, {} of them empty (their rows are all 4294967295)\n\
         kernel {} on {}, k = {}, seed {}, shingle {}, {} threads: {:.3} s, {:.1} MB/s of text\nwrote {}\n",
        super::report::read_stats(&report.read),
        report.documents,
        report.empty,
        report.kernel,
        report.isa,
        report.num_perm,
        report.seed,
        report.shingle,
        report.threads,
        report.seconds,
        report.bytes as f64 / report.seconds / 1e6,
        report.output.display()
    )
}
