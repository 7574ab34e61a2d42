//! The memory limit of an out-of-core run and what can go wrong under it.

use super::spill::SpillError;
use std::path::PathBuf;

/// The memory budget of an out-of-core run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    /// Peak resident bytes the run must stay under.
    pub bytes: u64,
    /// Where spill files go (a fresh subdirectory, deleted at the end); `None`: the system temp dir.
    pub tmp_dir: Option<PathBuf>,
    /// Test knob: records per sorted run, to force spilling on a small corpus (`None`: from the budget).
    #[doc(hidden)]
    pub run_records: Option<usize>,
}

impl MemoryLimit {
    /// A limit of `bytes` with spill files in the system temp dir.
    pub fn new(bytes: u64) -> MemoryLimit {
        MemoryLimit {
            bytes,
            tmp_dir: None,
            run_records: None,
        }
    }
}

/// Parses a size such as `4G`, `512M`, `1.5G`, `64K` or `1000000` (bytes). The suffixes K, M, G, T are powers of
/// 1024 (`KiB`, `MiB`, `GiB`, `TiB` and a trailing `B` are accepted too).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (num, mult) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 1u64 << 10),
        Some('M') => (&body[..body.len() - 1], 1 << 20),
        Some('G') => (&body[..body.len() - 1], 1 << 30),
        Some('T') => (&body[..body.len() - 1], 1 << 40),
        _ => (body, 1),
    };
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size (examples: 4G, 512M, 1.5G, 1000000)"))?;
    if !x.is_finite() || x <= 0.0 {
        return Err(format!("{s:?}: a size must be positive"));
    }
    let bytes = x * mult as f64;
    if bytes >= u64::MAX as f64 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(bytes as u64)
}

/// A byte count for messages: `1.50 GiB`, `512.00 MiB`, `100 B`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, unit) in UNITS {
        if bytes >= unit {
            return format!("{:.2} {name}", bytes as f64 / unit as f64);
        }
    }
    format!("{bytes} B")
}

/// Why an out-of-core run stopped.
#[derive(Debug, thiserror::Error)]
pub enum OutOfCoreError {
    /// A spill file could not be written or read back intact.
    #[error(transparent)]
    Spill(#[from] SpillError),
    /// What must stay resident does not fit under the limit.
    #[error(
        "--memory-limit {}: {what} needs about {} resident ({detail}), more than the limit allows. Raise \
         --memory-limit (the run stopped before allocating it)",
        format_size(*limit),
        format_size(*need)
    )]
    TooSmall {
        /// The limit.
        limit: u64,
        /// The estimated need.
        need: u64,
        /// Which phase.
        what: &'static str,
        /// What the need is made of.
        detail: String,
    },
    /// An option the out-of-core run does not support.
    #[error(
        "--memory-limit cannot be combined with {0} (the out-of-core run keeps neither texts nor signatures)"
    )]
    Unsupported(&'static str),
    /// The second pass did not see the corpus the first pass read.
    #[error("{}: the corpus changed between the two passes of --memory-limit ({what})", path.display())]
    Changed {
        /// The corpus.
        path: PathBuf,
        /// What differed.
        what: String,
    },
}
