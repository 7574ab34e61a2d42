//! The saved state of a dedup run: the signatures of every document with its id, and the parameters that made
//! them, so a later run can load them and take new documents online (`--load state.bin --save state.bin`).
//! The banding is not part of the state: the index is rebuilt from the signatures, so any (b, r) can be used.
//!
//! Format, version 2, all integers little-endian (version 1 had the same layout, but its signatures were made
//! from the earlier shingle ids of windows of at most 8 bytes, so it is refused rather than mixed with new ones):
//! ```text
//! magic     16 bytes  "LSHBENCH-STATE\0\0"
//! version   u32       2
//! hlen      u32       length of the header
//! header    hlen bytes of JSON: kernel, num_perm, seed, shingle, lowercase, collapse_whitespace,
//!           strip_punctuation, documents, crate version
//! ids       per document: u32 length + UTF-8 bytes
//! empty     one byte per document (1 = empty shingle set)
//! sigs      documents x num_perm u32 slots, row-major
//! checksum  u64       xxh3_64 of everything from `version` up to here
//! ```

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 16] = b"LSHBENCH-STATE\0\0";
/// The state format version this build reads and writes.
pub const VERSION: u32 = 2;

/// Why a state file could not be loaded, used or saved. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The file could not be opened or read.
    #[error("reading state {}: {cause}", path.display())]
    Read {
        /// The state file.
        path: PathBuf,
        /// What the operating system said.
        cause: std::io::Error,
    },
    /// The path is a directory, device or FIFO.
    #[error("reading state {}: not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The file does not start with the state magic bytes.
    #[error("{} is not an lshbench state file (bad magic bytes)", path.display())]
    NotState {
        /// The file.
        path: PathBuf,
    },
    /// A state format version this build does not read.
    #[error("{}: state format version {version}; this lshbench reads version {VERSION}", path.display())]
    Version {
        /// The state file.
        path: PathBuf,
        /// The version the file declares.
        version: u32,
    },
    /// The stored checksum does not match the contents.
    #[error("{}: checksum mismatch, the file is corrupt or truncated", path.display())]
    Checksum {
        /// The state file.
        path: PathBuf,
    },
    /// The JSON header does not parse.
    #[error("{}: unreadable header: {cause}", path.display())]
    Header {
        /// The state file.
        path: PathBuf,
        /// The JSON parser's complaint.
        cause: serde_json::Error,
    },
    /// The file ends before the data its header announces.
    #[error("{}: truncated state file", path.display())]
    Truncated {
        /// The state file.
        path: PathBuf,
    },
    /// An id is not valid UTF-8.
    #[error("{}: an id is not UTF-8: {cause}", path.display())]
    IdNotUtf8 {
        /// The state file.
        path: PathBuf,
        /// Where the bad bytes are.
        cause: std::str::Utf8Error,
    },
    /// The header announces sizes the file cannot hold (checked before anything is allocated).
    #[error("{}: the header does not match the file: {what}", path.display())]
    LyingHeader {
        /// The state file.
        path: PathBuf,
        /// Which size is impossible.
        what: String,
    },
    /// The header announces more signature slots than this machine can address.
    #[error("size overflow")]
    SizeOverflow,
    /// Bytes are left over after the signatures.
    #[error("{}: {extra} unexpected bytes after the signatures", path.display())]
    Trailing {
        /// The state file.
        path: PathBuf,
        /// How many bytes are left over.
        extra: usize,
    },
    /// The state was made with other signature parameters than this run's.
    #[error(
        "{} was made with other signature parameters, so its signatures cannot be compared with this \
         run's: {}",
        path.display(),
        differences.join("; ")
    )]
    Incompatible {
        /// The state file.
        path: PathBuf,
        /// Each difference, as `what: state X, this run Y`.
        differences: Vec<String>,
    },
    /// An id too long for the format's u32 length prefix.
    #[error("an id longer than 4 GiB: {cause}")]
    IdTooLong {
        /// The conversion's complaint.
        cause: std::num::TryFromIntError,
    },
    /// The state file could not be created, written or renamed into place (the message names it).
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
}

/// What made the signatures. A state is only usable by a run with the same values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateParams {
    /// The kernel's registry name.
    pub kernel: String,
    /// k, slots per signature.
    pub num_perm: usize,
    /// The seed of the kernel and the shingle hash.
    pub seed: u64,
    /// The shingle kind, as `char:5` etc.
    pub shingle: String,
    /// Normalisation: lowercase.
    pub lowercase: bool,
    /// Normalisation: collapse whitespace.
    pub collapse_whitespace: bool,
    /// Normalisation: strip punctuation.
    pub strip_punctuation: bool,
}

impl StateParams {
    /// The parameters of signatures made by `kernel` over `shingler`'s windows, both seeded with `seed`.
    pub fn new(
        kernel: &dyn crate::kernel::Kernel,
        shingler: &crate::shingle::Shingler,
        seed: u64,
    ) -> Self {
        StateParams {
            kernel: kernel.name().to_string(),
            num_perm: kernel.num_perm(),
            seed,
            shingle: shingler.kind.to_string(),
            lowercase: shingler.normalization.lowercase,
            collapse_whitespace: shingler.normalization.collapse_whitespace,
            strip_punctuation: shingler.normalization.strip_punctuation,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    #[serde(flatten)]
    params: StateParams,
    documents: u64,
    written_by: String,
}

/// Documents with their signatures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// What made the signatures.
    pub params: StateParams,
    /// Document ids, in order.
    pub ids: Vec<String>,
    /// Whether each document's shingle set was empty.
    pub empty: Vec<bool>,
    /// `ids.len() * num_perm` slots.
    pub signatures: Vec<u32>,
}

impl State {
    /// Writes the state to `path` (see [`save_parts`]).
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        save_parts(path, &self.params, &self.ids, &self.empty, &self.signatures)
    }

    /// Reads a state file, checking its magic bytes, version and checksum.
    pub fn load(path: &Path) -> Result<State, StateError> {
        let file = || path.to_path_buf();
        let read_err = |cause| StateError::Read {
            path: file(),
            cause,
        };
        let mut f = std::fs::File::open(path).map_err(read_err)?;
        // Only a regular file: its length bounds what is read (a FIFO or /dev/zero would not end).
        let len = f.metadata().map_err(read_err)?;
        if !len.is_file() {
            return Err(StateError::NotAFile { path: file() });
        }
        let mut bytes = Vec::new();
        (&mut f)
            .take(len.len())
            .read_to_end(&mut bytes)
            .map_err(read_err)?;
        if bytes.len() < 16 + 8 + 8 || &bytes[..16] != MAGIC {
            return Err(StateError::NotState { path: file() });
        }
        let body = &bytes[16..bytes.len() - 8];
        let stored = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap());
        let mut cur = Cursor {
            buf: body,
            pos: 0,
            path,
        };
        let version = cur.u32()?;
        if version != VERSION {
            return Err(StateError::Version {
                path: file(),
                version,
            });
        }
        if xxhash_rust::xxh3::xxh3_64(body) != stored {
            return Err(StateError::Checksum { path: file() });
        }
        let hlen = cur.u32()? as usize;
        let header: Header =
            serde_json::from_slice(cur.take(hlen)?).map_err(|cause| StateError::Header {
                path: file(),
                cause,
            })?;
        let n = usize::try_from(header.documents).map_err(|_| StateError::SizeOverflow)?;
        let k = header.params.num_perm;
        if k == 0 || k > crate::kernel::MAX_NUM_PERM {
            return Err(StateError::LyingHeader {
                path: file(),
                what: format!(
                    "num_perm {k} is outside 1..={}",
                    crate::kernel::MAX_NUM_PERM
                ),
            });
        }
        // Every size is checked against the bytes left before anything is allocated: a document takes at
        // least 4 (id length) + 1 (empty flag) + 4k (slots) bytes.
        let left = (body.len() - cur.pos) as u128;
        let least = n as u128 * (5 + 4 * k as u128);
        if least > left {
            return Err(StateError::LyingHeader {
                path: file(),
                what: format!(
                    "{n} documents of {k} slots need at least {least} bytes, but only {left} follow the header"
                ),
            });
        }
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            let len = cur.u32()? as usize;
            let id =
                std::str::from_utf8(cur.take(len)?).map_err(|cause| StateError::IdNotUtf8 {
                    path: file(),
                    cause,
                })?;
            ids.push(id.to_string());
        }
        let empty = cur.take(n)?.iter().map(|&b| b != 0).collect();
        let sig_bytes = cur.take(
            n.checked_mul(k)
                .and_then(|x| x.checked_mul(4))
                .ok_or(StateError::SizeOverflow)?,
        )?;
        let signatures = sig_bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if cur.pos != body.len() {
            return Err(StateError::Trailing {
                path: file(),
                extra: body.len() - cur.pos,
            });
        }
        Ok(State {
            params: header.params,
            ids,
            empty,
            signatures,
        })
    }

    /// Refuses a state made with other parameters, naming each difference.
    pub fn check_compatible(&self, run: &StateParams, path: &Path) -> Result<(), StateError> {
        let s = &self.params;
        let mut diffs = Vec::new();
        let mut diff = |what: &str, saved: String, now: String| {
            if saved != now {
                diffs.push(format!("{what}: state {saved}, this run {now}"));
            }
        };
        diff("kernel", s.kernel.clone(), run.kernel.clone());
        diff(
            "num_perm (k)",
            s.num_perm.to_string(),
            run.num_perm.to_string(),
        );
        diff("seed", s.seed.to_string(), run.seed.to_string());
        diff("shingle", s.shingle.clone(), run.shingle.clone());
        diff(
            "lowercase",
            s.lowercase.to_string(),
            run.lowercase.to_string(),
        );
        diff(
            "collapse_whitespace",
            s.collapse_whitespace.to_string(),
            run.collapse_whitespace.to_string(),
        );
        diff(
            "strip_punctuation",
            s.strip_punctuation.to_string(),
            run.strip_punctuation.to_string(),
        );
        if !diffs.is_empty() {
            return Err(StateError::Incompatible {
                path: path.to_path_buf(),
                differences: diffs,
            });
        }
        Ok(())
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StateError> {
        if self.buf.len() - self.pos < n {
            return Err(StateError::Truncated {
                path: self.path.to_path_buf(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, StateError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
}

/// Writes a state file from borrowed parts (no copy of the signature matrix), streaming: the checksum is
/// computed while writing. The file goes to a temporary name next to `path` and is renamed into place, so
/// `--load x --save x` never leaves a half-written state behind.
pub fn save_parts(
    path: &Path,
    params: &StateParams,
    ids: &[String],
    empty: &[bool],
    signatures: &[u32],
) -> Result<(), StateError> {
    let n = ids.len();
    assert_eq!(empty.len(), n);
    assert_eq!(signatures.len(), n * params.num_perm);
    for id in ids {
        u32::try_from(id.len()).map_err(|cause| StateError::IdTooLong { cause })?;
    }
    let header = serde_json::to_vec(&Header {
        params: params.clone(),
        documents: n as u64,
        written_by: format!("lshbench {}", env!("CARGO_PKG_VERSION")),
    })
    .expect("a header of strings, numbers and booleans serialises");
    Ok(crate::output::write_atomic(path, |f| {
        f.write_all(MAGIC)?;
        // Everything from the version on goes through the hasher as well as to the file.
        let mut body = Hashed {
            out: &mut *f,
            hasher: xxhash_rust::xxh3::Xxh3::new(),
        };
        body.write_all(&VERSION.to_le_bytes())?;
        body.write_all(&(header.len() as u32).to_le_bytes())?;
        body.write_all(&header)?;
        for id in ids {
            // Checked above: every length fits.
            body.write_all(&(id.len() as u32).to_le_bytes())?;
            body.write_all(id.as_bytes())?;
        }
        let flags: Vec<u8> = empty.iter().map(|&e| e as u8).collect();
        body.write_all(&flags)?;
        for row in signatures.chunks(4096) {
            let bytes: Vec<u8> = row.iter().flat_map(|s| s.to_le_bytes()).collect();
            body.write_all(&bytes)?;
        }
        let checksum = body.hasher.digest();
        f.write_all(&checksum.to_le_bytes())
    })?)
}

/// A writer that also feeds what it writes to an xxh3 hasher (whose digest equals the one-shot `xxh3_64`).
struct Hashed<'a, W: Write> {
    out: &'a mut W,
    hasher: xxhash_rust::xxh3::Xxh3,
}

impl<W: Write> Write for Hashed<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.out.write(buf)?;
        self.hasher.update(&buf[..written]);
        Ok(written)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> StateParams {
        StateParams {
            kernel: "oph-opt".into(),
            num_perm: 4,
            seed: 42,
            shingle: "char:5".into(),
            lowercase: false,
            collapse_whitespace: false,
            strip_punctuation: false,
        }
    }

    fn state() -> State {
        State {
            params: params(),
            ids: vec!["a".into(), "b/ü".into(), String::new()],
            empty: vec![false, false, true],
            signatures: (0..12).map(|x| x * 0x0101_0101).collect(),
        }
    }

    #[test]
    fn round_trip_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.bin");
        let s = state();
        s.save(&path).unwrap();
        let back = State::load(&path).unwrap();
        assert_eq!(back, s);
        back.check_compatible(&params(), &path).unwrap();
        let mut other = params();
        other.kernel = "simd".into();
        other.seed = 7;
        let err = back
            .check_compatible(&other, &path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("kernel: state oph-opt, this run simd"),
            "{err}"
        );
        assert!(err.contains("seed: state 42, this run 7"), "{err}");
        // Flip one signature byte: the checksum catches it.
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 12;
        bytes[at] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let err = State::load(&path).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
        std::fs::write(&path, b"not a state").unwrap();
        assert!(
            State::load(&path)
                .unwrap_err()
                .to_string()
                .contains("magic")
        );
    }

    /// Rewrites the JSON header of a saved state with `edit` and seals it with a correct checksum, as a
    /// hostile or buggy writer would.
    fn rewrite_header(bytes: &[u8], edit: impl Fn(&str) -> String) -> Vec<u8> {
        let hlen = u32::from_le_bytes(bytes[20..24].try_into().unwrap()) as usize;
        let header = std::str::from_utf8(&bytes[24..24 + hlen]).unwrap();
        let new = edit(header);
        assert_ne!(new, header, "the edit changed nothing");
        let mut out = bytes[..20].to_vec();
        out.extend_from_slice(&(new.len() as u32).to_le_bytes());
        out.extend_from_slice(new.as_bytes());
        out.extend_from_slice(&bytes[24 + hlen..bytes.len() - 8]);
        let checksum = xxhash_rust::xxh3::xxh3_64(&out[16..]);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    #[test]
    fn a_header_that_lies_about_sizes_is_refused_before_allocating() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.bin");
        state().save(&path).unwrap();
        let good = std::fs::read(&path).unwrap();
        // 2^40 documents with a correct checksum: before the size check this aborted on a 26 TB allocation.
        let lying = rewrite_header(&good, |h| {
            h.replace("\"documents\":3", "\"documents\":1099511627776")
        });
        std::fs::write(&path, &lying).unwrap();
        let err = State::load(&path).unwrap_err().to_string();
        assert!(err.contains("the header does not match the file"), "{err}");
        assert!(err.contains("1099511627776 documents"), "{err}");
        // A k far beyond the limit, likewise.
        let lying = rewrite_header(&good, |h| {
            h.replace("\"num_perm\":4", "\"num_perm\":9223372036854775807")
        });
        std::fs::write(&path, &lying).unwrap();
        let err = State::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("num_perm 9223372036854775807 is outside"),
            "{err}"
        );
        // A directory or device is not read to its (missing) end.
        let err = State::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
