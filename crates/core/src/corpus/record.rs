//! What every corpus reader shares, whatever the format: the document, the reader's options, its errors and
//! counts, and a rejected or parsed record before the reader ([`super::reader`]) attaches the corpus path.

use std::borrow::Cow;
use std::path::PathBuf;

/// One document as read from a corpus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// 0-based position among the documents this reader yielded (rejected records do not take a position).
    pub index: u64,
    /// The record's id, or its 0-based record index as a string when the record has none.
    pub id: String,
    /// The text: the JSONL field, the CSV/TSV column, the line, or the file's contents.
    pub text: String,
}

/// A corpus's format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum InputFormat {
    /// From the path: a directory, `.parquet`, or the extension under an optional `.gz`
    /// (`.jsonl`/`.ndjson`/`.json`, `.csv`, `.tsv`/`.tab`, anything else is text).
    #[default]
    Auto,
    /// One JSON object per line.
    Jsonl,
    /// Comma-separated values with a header row (RFC 4180 quoting; quoted fields may span lines).
    Csv,
    /// Tab-separated values with a header row (same quoting rules as CSV).
    Tsv,
    /// Plain text, one document per line.
    Text,
    /// A directory, one document per file (recursively, in sorted order), the relative path as id.
    Dir,
    /// Apache Parquet: a text column and an optional id column, streamed batch by batch (needs the `parquet`
    /// feature, which the command-line tool has).
    Parquet,
}

/// What a reader does with a malformed record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum OnError {
    /// Stop at the first malformed record with an error naming file, line and reason.
    #[default]
    Fail,
    /// Report and count malformed records, and go on.
    Skip,
}

/// How to read a corpus: its format, where a record's id and text are, and what to do with bad records.
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    /// The format (`Auto`: from the path, see [`crate::corpus::reader::detect_format`]).
    pub format: InputFormat,
    /// JSONL: the id field (`None`: use "id" when present, else the record index).
    pub id_field: Option<String>,
    /// JSONL: the text field.
    pub text_field: String,
    /// CSV/TSV/Parquet: the id column (`None`: the record index).
    pub id_column: Option<String>,
    /// CSV/TSV/Parquet: the text column (`None`: a column named "text", else an error listing the columns).
    pub text_column: Option<String>,
    /// What to do with a malformed record.
    pub on_error: OnError,
    /// Reject invalid UTF-8 instead of replacing it with U+FFFD.
    pub strict_utf8: bool,
    /// The longest record (a line, a CSV row, a file of a directory), in bytes after decompression: a longer
    /// one stops the run, so a gzip bomb or a file without newlines cannot exhaust memory.
    pub max_record_bytes: u64,
    /// The instruction set of the JSONL fast path (the CLI passes its `--isa`; by default the widest this CPU
    /// runs). Same documents on any.
    pub dispatch: crate::arch::Dispatch,
    /// JSONL field or CSV/TSV/Parquet column whose value each document carries for a survivor policy
    /// (`--keep column:NAME:max`); the reader collects the values ([`super::CorpusReader::take_rank_values`]).
    pub rank_field: Option<String>,
}

/// The default [`ReaderOptions::max_record_bytes`]: 1 GiB.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = crate::defaults::MAX_RECORD_BYTES;

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            format: InputFormat::Auto,
            id_field: None,
            text_field: "text".into(),
            id_column: None,
            text_column: None,
            on_error: OnError::Fail,
            strict_utf8: false,
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            dispatch: crate::arch::Dispatch::detect(),
            rank_field: None,
        }
    }
}

/// What went wrong, always naming the file and, for a record, its 1-based line and the field.
/// A record-level problem (a line that is not JSON, a CSV row of the wrong width) has an empty `field`.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read. The cause is in the message, not exposed as a source (so an
    /// error chain does not print it twice).
    #[error("{}: {cause}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// What the operating system or the decompressor said.
        cause: std::io::Error,
    },
    /// A record is malformed.
    #[error("{}:{line}: {}{reason}", file.display(), field_prefix(field))]
    Malformed {
        /// The file.
        file: PathBuf,
        /// The 1-based line the record starts on.
        line: u64,
        /// The offending field or column (empty for a record-level problem).
        field: String,
        /// What is wrong.
        reason: String,
    },
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("field `{field}`: ")
    }
}

/// Counts kept while reading, so no document is ever dropped silently.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Records seen, good or bad.
    pub records: u64,
    /// Documents yielded.
    pub documents: u64,
    /// Records rejected under `OnError::Skip` (or the one that stopped the run under `Fail`).
    pub rejected: u64,
    /// Documents whose invalid UTF-8 was replaced with U+FFFD.
    pub utf8_replaced: u64,
    /// The first rejection messages (at most 20), for the run summary.
    pub first_rejections: Vec<String>,
    /// Documents whose id (from the id field or column) equals an earlier document's. They are kept and
    /// counted, never dropped: outputs then carry the id more than once.
    pub duplicate_ids: u64,
}

/// How many rejection messages [`ReadStats`] keeps.
pub const MAX_KEPT_REJECTIONS: usize = 20;

/// A rejected record, before the reader attaches the corpus path (`file` is set when the record lives in a
/// file of a directory corpus).
pub(super) struct Bad {
    pub(super) file: Option<PathBuf>,
    pub(super) line: u64,
    pub(super) field: String,
    pub(super) reason: String,
}

impl Bad {
    pub(super) fn new(line: u64, field: &str, reason: String) -> Bad {
        Bad {
            file: None,
            line,
            field: field.to_string(),
            reason,
        }
    }
}

/// A record parsed into owned strings, plus whether invalid UTF-8 was replaced in it.
pub(super) struct Parsed {
    pub(super) id: Option<String>,
    pub(super) text: String,
    pub(super) replaced: bool,
    /// The rank field's value ([`ReaderOptions::rank_field`]; `Missing` when none is asked for).
    pub(super) rank: FieldValue,
}

/// A record's value of the field a survivor policy ranks by.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum FieldValue {
    /// Absent, null, an empty CSV field or a NaN.
    #[default]
    Missing,
    /// A number (JSON number, a CSV field that parses as one, a numeric, date or timestamp Parquet column).
    Number(f64),
    /// Anything else, compared byte by byte (ISO 8601 dates order correctly as text).
    Text(String),
}

impl FieldValue {
    /// The value of a CSV/TSV field: empty is missing, a finite number is a number, anything else text.
    pub(super) fn from_field(s: &str) -> FieldValue {
        let t = s.trim();
        if t.is_empty() {
            return FieldValue::Missing;
        }
        match t.parse::<f64>() {
            Ok(x) if x.is_finite() => FieldValue::Number(x),
            _ => FieldValue::Text(s.to_string()),
        }
    }
}

/// Decodes bytes as UTF-8: borrowed when valid, else replaced (and flagged) or rejected under `strict`.
pub(super) fn decode(bytes: &[u8], strict: bool) -> Result<(Cow<'_, str>, bool), String> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok((Cow::Borrowed(s), false)),
        Err(e) if strict => Err(format!(
            "invalid UTF-8 at byte {} (rejected under --strict)",
            e.valid_up_to()
        )),
        Err(_) => Ok((String::from_utf8_lossy(bytes), true)),
    }
}
