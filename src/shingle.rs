//! Text to shingle ids: every window of a document becomes a 64-bit id through a seeded, platform-independent
//! hash. Kinds: `char:K`, `byte:K`, `word:N`, `stopword:N`. Normalisation is opt-in.
//!
//! OWNER: kernels helper. Interface fixed by the skeleton; bodies to be written.

use std::fmt;
use std::str::FromStr;

/// Which windows of a text become shingles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShingleKind {
    /// K consecutive Unicode scalar values.
    Char(usize),
    /// K consecutive bytes of the UTF-8 encoding.
    Byte(usize),
    /// N consecutive tokens (maximal runs of non-whitespace).
    Word(usize),
    /// A stop word followed by the next N tokens.
    StopWord(usize),
}

impl FromStr for ShingleKind {
    type Err = String;
    /// Parses `char:5`, `byte:8`, `word:3`, `stopword:2`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, n) = s.split_once(':').ok_or_else(|| {
            format!("shingle `{s}`: expected KIND:N, e.g. char:5, byte:8, word:3, stopword:2")
        })?;
        let n: usize = n
            .parse()
            .map_err(|_| format!("shingle `{s}`: `{n}` is not a whole number"))?;
        if n == 0 {
            return Err(format!("shingle `{s}`: the length must be at least 1"));
        }
        match kind {
            "char" => Ok(ShingleKind::Char(n)),
            "byte" => Ok(ShingleKind::Byte(n)),
            "word" => Ok(ShingleKind::Word(n)),
            "stopword" => Ok(ShingleKind::StopWord(n)),
            other => Err(format!(
                "shingle `{s}`: unknown kind `{other}` (char, byte, word, stopword)"
            )),
        }
    }
}

impl fmt::Display for ShingleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShingleKind::Char(k) => write!(f, "char:{k}"),
            ShingleKind::Byte(k) => write!(f, "byte:{k}"),
            ShingleKind::Word(n) => write!(f, "word:{n}"),
            ShingleKind::StopWord(n) => write!(f, "stopword:{n}"),
        }
    }
}

/// Opt-in text normalisation, applied before shingling. The default leaves the text exactly as given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Normalization {
    pub lowercase: bool,
    pub collapse_whitespace: bool,
    pub strip_punctuation: bool,
}

/// Turns texts into shingle ids. Cheap to clone and shareable across threads.
#[derive(Clone, Debug)]
pub struct Shingler {
    pub kind: ShingleKind,
    pub normalization: Normalization,
    pub seed: u64,
}

impl Shingler {
    pub fn new(kind: ShingleKind, normalization: Normalization, seed: u64) -> Self {
        Shingler {
            kind,
            normalization,
            seed,
        }
    }

    /// Clears `out` and pushes the id of every window of `text`, in text order, duplicates included
    /// (MinHash is idempotent under repeats, so kernels need no dedup). Text shorter than one window gives one
    /// shingle, the whole text; empty text gives none.
    pub fn hashes(&self, text: &str, out: &mut Vec<u64>) {
        let _ = (text, out);
        todo!("kernels helper")
    }

    /// The shingle set of `text`: sorted, deduplicated ids. Exact Jaccard is computed on these.
    pub fn set(&self, text: &str) -> Vec<u64> {
        let mut ids = Vec::new();
        self.hashes(text, &mut ids);
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}
