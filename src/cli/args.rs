//! Flag groups shared by several subcommands, flattened into their `Args` structs.

use lshbench_core::corpus::{CorpusReader, InputFormat, OnError, ReadError, ReaderOptions};
use lshbench_core::kernel::{self, Isa, KernelParams};
use lshbench_core::shingle::{Normalization, ShingleKind, Shingler};
use std::path::{Path, PathBuf};

/// Upper limits of the flags that size memory or work, beyond which a command stops with an error naming the
/// flag (the guide's Reliability page, section "Bad input", lists them with the library's: `--num-perm` at most
/// [`kernel::MAX_NUM_PERM`], `--threads` at most [`lshbench_core::exec::MAX_THREADS`], `--bucket-cap` at most
/// [`lshbench_core::lsh::choice::MAX_BUCKET_CAP`]).
pub mod limits {
    /// `dedup --max-candidates`: candidate pairs held in memory (8 bytes each).
    pub const MAX_CANDIDATES: u64 = 1_000_000_000;
    /// `dedup --pair-budget`: member pairs examined per group.
    pub const PAIR_BUDGET: usize = 1_000_000;
    /// `gen --docs`.
    pub const GEN_DOCS: usize = 100_000_000;
    /// `gen --mean-len` (bytes).
    pub const GEN_MEAN_LEN: usize = 10_000_000;
    /// `gen --cluster-size` MAX.
    pub const GEN_CLUSTER_SIZE: usize = 100_000;
    /// `gen --max-moves`.
    pub const GEN_MAX_MOVES: usize = 10_000;
    /// `scurve --step`: the smallest step (10,001 table rows).
    pub const SCURVE_MIN_STEP: f64 = 1e-4;
    /// `tune --top`: rows printed.
    pub const TUNE_TOP: usize = 100_000;
}

/// Fails with a message naming `flag` when `value` exceeds `max`.
pub fn at_most<T: PartialOrd + std::fmt::Display>(
    flag: &str,
    value: T,
    max: T,
) -> anyhow::Result<()> {
    if value > max {
        anyhow::bail!("{flag} {value} is above the limit {max}");
    }
    Ok(())
}

/// Refuses, before anything is read, outputs that would overwrite an input or each other (see
/// [`lshbench_core::output::check_outputs`]); `None` entries are flags not given.
pub fn check_outputs(
    inputs: &[(&str, Option<&Path>)],
    outputs: &[(&str, Option<&Path>)],
) -> anyhow::Result<()> {
    lshbench_core::output::check_outputs(&given(inputs), &given(outputs))?;
    Ok(())
}

fn given<'a>(list: &[(&'a str, Option<&'a Path>)]) -> Vec<(&'a str, &'a Path)> {
    list.iter().filter_map(|&(f, p)| Some((f, p?))).collect()
}

/// The kernel flags shared by `lshbench sketch` and friends.
#[derive(clap::Args, Clone, Debug)]
pub struct KernelArgs {
    /// The registry name of the kernel (the help text lists the registry).
    #[arg(long, default_value = lshbench_core::defaults::KERNEL, help = kernel_help())]
    pub kernel: String,
    /// k, the number of 32-bit slots per signature (1 to 16384).
    #[arg(long, default_value_t = lshbench_core::defaults::NUM_PERM)]
    pub num_perm: usize,
    /// Seed of the kernel's hash functions and of the shingle hash.
    #[arg(long, default_value_t = lshbench_core::defaults::SEED)]
    pub seed: u64,
    /// The instruction set of reading, shingling and signing.
    #[command(flatten)]
    pub arch: IsaArgs,
}

/// `--isa`, the one instruction-set flag of every command that runs vector code (the reader's JSONL fast path,
/// shingling, signing, verification): flatten it with `#[command(flatten)]` (the kernel flags include it).
#[derive(clap::Args, Clone, Debug)]
pub struct IsaArgs {
    /// Instruction set of the command's vector code (JSONL reading, shingling, signing, verifying: whichever
    /// it runs): auto picks the widest this CPU supports (capped by the LSHBENCH_ISA variable).
    #[arg(long, default_value = "auto", value_parser = ["auto", "scalar", "portable", "avx2", "avx512"])]
    pub isa: String,
}

impl IsaArgs {
    /// The one instruction-set decision of a command: `--isa`, or for `auto` [`auto_isa`]. Every component
    /// (the reader's JSONL fast path, the shingler, the kernel, verification) takes it from here.
    pub fn isa(&self) -> Isa {
        Isa::parse(&self.isa).unwrap_or_else(auto_isa)
    }

    /// [`IsaArgs::isa`] checked against this CPU: fails with a message naming the instruction set when the CPU
    /// does not run it.
    pub fn dispatch(
        &self,
    ) -> Result<lshbench_core::arch::Dispatch, lshbench_core::arch::Unsupported> {
        lshbench_core::arch::Dispatch::new(self.isa())
    }
}

/// `--kernel`'s help, from the registry: every kernel's name.
fn kernel_help() -> String {
    let names = kernel::names();
    let (last, rest) = names.split_last().expect("the registry is not empty");
    format!(
        "Signature kernel: {} or {last} (`lshbench info` lists them)",
        rest.join(", ")
    )
}

impl KernelArgs {
    /// The command's instruction set ([`IsaArgs::isa`]), as the kernel parameters and the shingler take it.
    pub fn isa(&self) -> Option<Isa> {
        Some(self.arch.isa())
    }

    /// The kernel parameters these flags give.
    pub fn params(&self) -> KernelParams {
        KernelParams {
            num_perm: self.num_perm,
            seed: self.seed,
            isa: self.isa(),
        }
    }

    /// Builds the chosen kernel; fails on an unknown name, k = 0 or an unsupported instruction set.
    pub fn build(&self) -> Result<Box<dyn kernel::Kernel>, kernel::KernelError> {
        kernel::build(&self.kernel, &self.params())
    }

    /// Builds the chosen kernel with its slots cut to `bits` bits (`--bits`; 32 keeps it as it is).
    pub fn build_bits(&self, bits: u32) -> anyhow::Result<Box<dyn kernel::Kernel>> {
        Ok(kernel::bbit::BBit::wrap(self.build()?, bits)?)
    }
}

/// The shingle flags of `lshbench sketch` and friends. The seed comes from the kernel flags (`--seed`).
#[derive(clap::Args, Clone, Debug)]
pub struct ShingleArgs {
    /// Shingle kind: char:K (Unicode scalar values), byte:K, word:N (whitespace tokens) or stopword:N (a stop
    /// word and the N tokens after it).
    #[arg(long, default_value = lshbench_core::defaults::SHINGLE)]
    pub shingle: ShingleKind,
    /// Lowercase the text before shingling.
    #[arg(long)]
    pub lowercase: bool,
    /// Turn each run of whitespace into one space and trim the ends.
    #[arg(long)]
    pub collapse_whitespace: bool,
    /// Remove every character that is neither alphanumeric nor whitespace (punctuation and symbols).
    #[arg(long)]
    pub strip_punctuation: bool,
}

impl ShingleArgs {
    /// The normalisation these flags turn on.
    pub fn normalization(&self) -> Normalization {
        Normalization {
            lowercase: self.lowercase,
            collapse_whitespace: self.collapse_whitespace,
            strip_punctuation: self.strip_punctuation,
        }
    }

    /// The shingler, its hash seeded with `seed` (the kernel's `--seed`), on the instruction set `isa` (`None`:
    /// the widest this CPU supports).
    pub fn shingler(
        &self,
        seed: u64,
        isa: Option<Isa>,
    ) -> Result<Shingler, lshbench_core::arch::Unsupported> {
        Shingler::new(self.shingle, self.normalization(), seed).with_isa(isa)
    }
}

/// The reader flags shared by every subcommand that reads a corpus (`sketch`, `dedup`, `exact`, ...):
/// flatten it with `#[command(flatten)]`.
#[derive(clap::Args, Clone, Debug)]
pub struct ReaderArgs {
    /// The corpus: a JSONL, CSV, TSV or text file (optionally .gz), a Parquet file, or a directory of files.
    #[arg(long, value_name = "PATH")]
    pub input: PathBuf,
    /// Input format; `auto` decides from the path (directory, .parquet, or extension under an optional .gz).
    #[arg(long, value_enum, default_value_t = InputFormat::Auto)]
    pub format: InputFormat,
    /// JSONL: the field holding the id (string or number). Default: "id" when present, else the record index.
    #[arg(long, value_name = "NAME")]
    pub id_field: Option<String>,
    /// JSONL: the field holding the text (must be a string).
    #[arg(long, value_name = "NAME", default_value = "text")]
    pub text_field: String,
    /// CSV/TSV/Parquet: the column holding the id (Parquet: a string or integer column). Default: the 0-based
    /// record (row) index.
    #[arg(long, value_name = "NAME")]
    pub id_column: Option<String>,
    /// CSV/TSV/Parquet: the column holding the text (Parquet: string, large string, string view, binary or
    /// dictionary-encoded; a null is a malformed record). Default: a column named "text".
    #[arg(long, value_name = "NAME")]
    pub text_column: Option<String>,
    /// What a malformed record does: stop the run (`fail`) or get counted and reported (`skip`).
    #[arg(long, value_enum, default_value_t = OnError::Fail)]
    pub on_error: OnError,
    /// Reject records with invalid UTF-8 as malformed instead of replacing the bad bytes with U+FFFD.
    #[arg(long)]
    pub strict: bool,
    /// The longest record (line, CSV row, file of a directory) in bytes after decompression; a longer one stops
    /// the run (a guard against gzip bombs and files without newlines).
    #[arg(long, value_name = "BYTES", default_value_t = lshbench_core::corpus::DEFAULT_MAX_RECORD_BYTES)]
    pub max_record_bytes: u64,
}

impl ReaderArgs {
    /// The reader options these flags give.
    pub fn options(&self) -> ReaderOptions {
        ReaderOptions {
            format: self.format,
            id_field: self.id_field.clone(),
            text_field: self.text_field.clone(),
            id_column: self.id_column.clone(),
            text_column: self.text_column.clone(),
            on_error: self.on_error,
            strict_utf8: self.strict,
            max_record_bytes: self.max_record_bytes,
            ..ReaderOptions::default()
        }
    }

    /// Opens the reader these flags describe, its JSONL fast path on the instruction set of `dispatch` (the
    /// command's one choice, the shingler's).
    pub fn open(&self, dispatch: lshbench_core::arch::Dispatch) -> Result<CorpusReader, ReadError> {
        self.open_ranked(dispatch, None)
    }

    /// [`ReaderArgs::open`], collecting the values of `rank_field` for a column survivor policy.
    pub fn open_ranked(
        &self,
        dispatch: lshbench_core::arch::Dispatch,
        rank_field: Option<&str>,
    ) -> Result<CorpusReader, ReadError> {
        let options = ReaderOptions {
            dispatch,
            rank_field: rank_field.map(str::to_string),
            ..self.options()
        };
        CorpusReader::open(&self.input, &options)
    }
}

/// The machine-specific tuning the CLI opts into for `sketch` and `dedup` ([`lshbench_core::exec::Tuning`]): all of
/// it, but the binding of `sketch`'s reading and writing threads when `LSHBENCH_PIN=0` is set. Library callers
/// get none of it.
pub fn tuning() -> lshbench_core::exec::Tuning {
    lshbench_core::exec::Tuning {
        bind_helpers: std::env::var_os("LSHBENCH_PIN").is_none_or(|v| v != "0"),
        huge_pages: true,
        exchange_rename: true,
    }
}

/// What `--isa auto` means: the widest instruction set this CPU runs, capped by the `LSHBENCH_ISA` environment
/// variable when it names one (so CI can force each fallback path on one machine). The CLI alone reads the
/// variable; the library takes the choice as a value.
pub fn auto_isa() -> Isa {
    let best = Isa::detect();
    match std::env::var("LSHBENCH_ISA")
        .ok()
        .as_deref()
        .and_then(Isa::parse)
    {
        Some(cap) if cap < best => cap,
        _ => best,
    }
}
