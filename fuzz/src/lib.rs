//! Shared checks of the fuzz targets: a scratch file per process (on tmpfs when there is one) and the
//! invariants every corpus reader keeps, whatever the bytes.
//!
//! The reader invariants (`check_reader`): opening either succeeds or fails with an error that names the file;
//! iterating yields documents whose `index` counts 0, 1, 2, ...; every record is a document or a counted
//! rejection (`records == documents + rejected`); under `OnError::Fail` the first error ends the iteration;
//! under `OnError::Skip` a malformed record never ends it (only an I/O error does); a malformed record's line
//! is 1-based; every message names the file. A panic anywhere is a crash.

use lshbench_core::corpus::{CorpusReader, Document, OnError, ReadError, ReadStats, ReaderOptions};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// This process's scratch directory: under /dev/shm when it exists (no disk writes per execution), else the
/// system temp directory. One per process, so parallel fuzz jobs do not share files.
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() {
            base.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("lshbench-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        dir
    })
}

/// Writes `bytes` to the scratch file `name` (replacing it) and returns its path.
pub fn scratch_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch_dir().join(name);
    std::fs::write(&path, bytes).expect("scratch file");
    path
}

/// Reader options driven by one fuzz byte: skip or fail, strict UTF-8 or not, and whether the id and text
/// fields/columns are the defaults or short names the fuzzer can hit (`a`, `b`).
pub fn options_from(byte: u8) -> ReaderOptions {
    ReaderOptions {
        on_error: if byte & 1 == 0 {
            OnError::Skip
        } else {
            OnError::Fail
        },
        strict_utf8: byte & 2 != 0,
        id_field: (byte & 4 != 0).then(|| "a".to_string()),
        text_field: if byte & 8 != 0 { "b" } else { "text" }.to_string(),
        id_column: (byte & 16 != 0).then(|| "a".to_string()),
        text_column: (byte & 32 != 0).then(|| "b".to_string()),
        ..Default::default()
    }
}

/// What a full read gave: the documents, or the error that ended it (with the documents before it).
pub struct ReadOutcome {
    /// The documents yielded.
    pub documents: Vec<Document>,
    /// Malformed records reported (under `Skip`, every one; under `Fail`, at most one).
    pub malformed: u64,
    /// Whether the read ended on an error (at open, an I/O error, or a malformed record under `Fail`).
    pub failed: bool,
    /// The reader's final counts (all zero when the open failed).
    pub stats: ReadStats,
}

/// Opens and reads `path` to the end, asserting the reader invariants (module docs); returns what it read.
pub fn check_reader(path: &Path, options: &ReaderOptions) -> ReadOutcome {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut reader = match CorpusReader::open(path, options) {
        Ok(r) => r,
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(&name), "open error without the file: {msg}");
            return ReadOutcome {
                documents: Vec::new(),
                malformed: 0,
                failed: true,
                stats: ReadStats::default(),
            };
        }
    };
    let mut documents = Vec::new();
    let mut malformed = 0u64;
    let mut failed = false;
    while let Some(item) = reader.next() {
        assert!(!failed, "the reader went on after an error under Fail");
        match item {
            Ok(doc) => {
                assert_eq!(doc.index, documents.len() as u64, "document index");
                documents.push(doc);
            }
            Err(err) => {
                let msg = err.to_string();
                assert!(msg.contains(&name), "error without the file: {msg}");
                match &err {
                    ReadError::Malformed { line, .. } => {
                        assert!(*line >= 1, "0 line in {msg}");
                        malformed += 1;
                        if options.on_error == OnError::Skip {
                            panic!("a malformed record ended the iteration under Skip: {msg}");
                        }
                    }
                    ReadError::Io { .. } => {}
                }
                failed = true;
            }
        }
    }
    assert!(reader.next().is_none(), "the reader yielded after its end");
    let stats = reader.stats();
    assert_eq!(stats.documents, documents.len() as u64, "documents counted");
    assert_eq!(
        stats.records,
        stats.documents + stats.rejected,
        "every record is a document or a counted rejection"
    );
    if options.on_error == OnError::Fail {
        assert_eq!(
            stats.rejected, malformed,
            "Fail: the rejection is the error"
        );
    }
    assert!(stats.utf8_replaced <= stats.documents);
    assert_eq!(
        stats.first_rejections.len() as u64,
        stats
            .rejected
            .min(lshbench_core::corpus::reader::MAX_KEPT_REJECTIONS as u64)
    );
    ReadOutcome {
        documents,
        malformed,
        failed,
        stats: stats.clone(),
    }
}

/// The bytes the readers parse from a file holding `bytes`: decompressed when they start with the gzip magic
/// `1f 8b` (the readers detect gzip by content, whatever the file's name), as one stream over concatenated
/// members; a stream that breaks gives the bytes before the break, as the readers read them before their error.
/// The fuzz inputs are at most a few KB, so the output is at most a few MB.
pub fn as_read(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    use std::io::Read;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return std::borrow::Cow::Borrowed(bytes);
    }
    let mut out = Vec::new();
    let _ = flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut out);
    std::borrow::Cow::Owned(out)
}

/// The lines of `bytes` as the line readers cut them: at `\n`, the `\r` of a `\r\n` removed (a `\r` ending the
/// file without a `\n` stays), no line after a final `\n`.
pub fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last = out.pop().unwrap_or_default();
    let mut out: Vec<&[u8]> = out
        .into_iter()
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .collect();
    if !last.is_empty() {
        out.push(last);
    }
    // The text and JSONL readers skip a UTF-8 byte-order mark at the start of the first line (a file that is
    // only the mark is one empty line).
    if let Some(first) = out.first_mut() {
        *first = first.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(first);
    }
    out
}
