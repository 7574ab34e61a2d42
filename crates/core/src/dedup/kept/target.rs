//! Where a kept corpus goes and what can go wrong: the target, its checks against the input, the counts and
//! errors of a kept pass.

use crate::corpus::{InputFormat, ReadError};
use crate::output::OutputError;
use std::io;
use std::path::{Path, PathBuf};

/// The default [`KeptTarget::shard_size`]: 1 GiB.
pub const DEFAULT_SHARD_SIZE: u64 = 1 << 30;

/// Where the kept corpus goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptTarget {
    /// A file, or a directory for shards (an existing empty directory, or a path ending in `/`) or for the
    /// copied tree of a directory corpus.
    pub path: PathBuf,
    /// Bytes after which a shard is closed (uncompressed; for Parquet, the bytes the writer has produced).
    pub shard_size: u64,
}

impl KeptTarget {
    /// `path` with the default shard size.
    pub fn new(path: impl Into<PathBuf>) -> KeptTarget {
        KeptTarget {
            path: path.into(),
            shard_size: DEFAULT_SHARD_SIZE,
        }
    }
}

/// What a kept pass wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeptStats {
    /// Documents read in the pass.
    pub documents: u64,
    /// Documents copied.
    pub kept: u64,
    /// Bytes written (before gzip compression), headers included.
    pub bytes: u64,
    /// Files written (shards, or the files of a copied tree; 1 for a single file).
    pub files: u64,
}

/// Why a kept pass stopped. Nothing is left under the target's name.
#[derive(Debug, thiserror::Error)]
pub enum KeptError {
    /// Reading the corpus failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing failed, or the target was refused by [`crate::output::check_outputs`].
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The target cannot be written (a non-empty directory, inside the input, ...).
    #[error("--kept {}: {reason}", path.display())]
    Refused {
        /// The target.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The corpus does not yield the documents the mask was made for.
    #[error("--kept: {}: {detail}", path.display())]
    Mismatch {
        /// The corpus.
        path: PathBuf,
        /// What differs.
        detail: String,
    },
}

/// Whether `target` names a directory: the input is a directory corpus (its kept files are copied into a
/// tree), or `target` is an existing directory or ends in `/` (shards).
pub fn is_directory_target(target: &Path, input_is_dir: bool) -> bool {
    input_is_dir || target.is_dir() || target.as_os_str().to_string_lossy().ends_with('/')
}

/// Refuses, before anything is read, a target that would overwrite or mix with something: a file target that
/// is the input ([`crate::output::check_outputs`]); a directory target that exists and is not empty or is not
/// a directory, whose parent does not exist, or that is the input or lies inside the input directory.
pub fn check_target(input: &Path, target: &Path) -> Result<(), KeptError> {
    if !is_directory_target(target, input.is_dir()) {
        crate::output::check_outputs(&[("--input", input)], &[("--kept", target)])?;
        return Ok(());
    }
    let refuse = |reason: String| KeptError::Refused {
        path: target.to_path_buf(),
        reason,
    };
    match std::fs::metadata(target) {
        Ok(meta) if !meta.is_dir() => {
            return Err(refuse(
                "exists and is not a directory (this input's kept corpus is a directory)".into(),
            ));
        }
        Ok(_) => {
            let mut entries = std::fs::read_dir(target).map_err(|e| refuse(e.to_string()))?;
            if entries.next().is_some() {
                return Err(refuse(
                    "is a directory that is not empty; name a new or empty directory (shards are never \
                     mixed with earlier ones)"
                        .into(),
                ));
            }
        }
        Err(_) => {}
    }
    let Some(location) = location(target) else {
        return Err(refuse(format!(
            "the directory {} does not exist",
            parent(target).display()
        )));
    };
    if let Ok(input_location) = std::fs::canonicalize(input) {
        if location == input_location {
            return Err(refuse(format!(
                "is the input ({}); refusing to overwrite it",
                input.display()
            )));
        }
        if input.is_dir() && location.starts_with(&input_location) {
            return Err(refuse(format!(
                "lies inside the input directory ({})",
                input.display()
            )));
        }
    }
    Ok(())
}

/// Refuses a file target whose name says another corpus form than the one it will hold, which is always the
/// input's: a Parquet input's kept corpus named `kept.jsonl`, or a JSONL input's named `kept.parquet`. A name
/// without a corpus extension (as the reader reads names: [`crate::corpus::reader::named_format`]) is taken as
/// given, and a directory target names no form.
pub fn check_named_form(target: &Path, input: InputFormat) -> Result<(), KeptError> {
    let Some(named) = crate::corpus::reader::named_format(target) else {
        return Ok(());
    };
    if matches!(input, InputFormat::Dir | InputFormat::Auto) || named == input {
        return Ok(());
    }
    Err(KeptError::Refused {
        path: target.to_path_buf(),
        reason: format!(
            "the name says {}, but the kept corpus is written in the input's form, {}: name it .{} (or \
             give a name without a corpus extension)",
            form_name(named),
            form_name(input),
            shard_extension(input, false)
        ),
    })
}

fn form_name(format: InputFormat) -> &'static str {
    match format {
        InputFormat::Jsonl => "JSON lines",
        InputFormat::Csv => "CSV",
        InputFormat::Tsv => "TSV",
        InputFormat::Parquet => "Parquet",
        InputFormat::Dir => "a directory",
        InputFormat::Text | InputFormat::Auto => "text lines",
    }
}

/// The directory `path` is in (`.` for a bare name).
pub(crate) fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Where `path` is or would be: canonical if it exists, else its canonical parent joined with its name.
fn location(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let name = path.file_name()?;
    Some(std::fs::canonicalize(parent(path)).ok()?.join(name))
}

pub(crate) fn create_error(path: &Path, cause: io::Error) -> KeptError {
    KeptError::Output(OutputError::Create {
        path: path.to_path_buf(),
        cause,
    })
}

pub(crate) fn write_error(path: &Path, cause: io::Error) -> KeptError {
    KeptError::Output(OutputError::Write {
        path: path.to_path_buf(),
        cause,
    })
}

/// The extension of shards for this input (see the module docs).
pub(crate) fn shard_extension(format: InputFormat, gzip: bool) -> String {
    let ext = match format {
        InputFormat::Jsonl => "jsonl",
        InputFormat::Csv => "csv",
        InputFormat::Tsv => "tsv",
        InputFormat::Parquet => "parquet",
        _ => "txt",
    };
    if gzip {
        format!("{ext}.gz")
    } else {
        ext.to_string()
    }
}
