//! `dedup --kept PATH`: the kept corpus in the input's own form, written by a streaming second pass over the
//! input that copies each kept document's record as read.
//!
//! Which documents are kept is a mask by document position (the order in which the corpus reader yields
//! documents, [`crate::corpus::Document::index`]); [`write_kept`] takes it from its caller, so any survivor
//! policy can drive it. The second pass reopens the corpus with the same reader in raw-capture mode
//! ([`CorpusReader::capture_raw`]): records are split, parsed and rejected exactly as in the first pass, so the
//! n-th document of the second pass is the n-th of the first, and a record the reader rejected under
//! `--on-error skip` is not a document and is not copied (the first pass already counted and reported it). A
//! corpus that yields a different number of documents the second time (it changed on disk) stops the pass with
//! an error, and nothing is written.
//!
//! Per format:
//! - JSONL and text: each kept line byte for byte, its line end as read (`\n` or `\r\n`); a last line without
//!   one gets `\n`. A UTF-8 BOM starting the file is not part of the first record and is not copied; blank JSONL
//!   lines are not records.
//! - CSV/TSV: the header row as read (a UTF-8 BOM included), then each kept row's bytes as read (quoted fields
//!   spanning lines included), each row ended by the file's line terminator (`\r\n` if the header row ends in
//!   one, else `\n`), a last row without one included.
//! - Directory: the kept files, copied byte for byte into a new directory tree at the same relative paths.
//! - Parquet: see [`parquet`].
//!
//! Targets: a path naming a file gets one file, gzip-compressed if the name ends in `.gz`. A path that is an
//! existing (empty) directory or ends in `/` gets shards `part-00000.<ext>`, ... , each closed once it holds
//! [`KeptTarget::shard_size`] bytes (uncompressed, header included; a shard holds at least one record, and
//! there is always at least one shard, possibly holding only the header). The extension follows the input:
//! `jsonl`, `csv`, `tsv`, `txt` or `parquet`, plus `.gz` (and gzip-compressed shards) when the input was gzip.
//! CSV/TSV shards each start with the header row; Parquet shards are each a complete file.
//!
//! Whole or nothing: a single file is written under a temporary name and renamed into place
//! ([`crate::output::AtomicFile`]); a directory (shards or a copied tree) is built in a temporary sibling
//! directory and renamed into place at the end. A target directory that exists and is not empty is refused, so
//! shards are never mixed with stale ones.
//!
//! Memory: the mask (a byte per document), one record (or, for Parquet, one batch and the row group being
//! written, flushed at [`parquet::ROW_GROUP_BYTES`]) and the write buffers.
#[cfg(feature = "parquet")]
pub mod parquet;
mod stream;
mod target;

pub use target::{
    DEFAULT_SHARD_SIZE, KeptError, KeptStats, KeptTarget, check_named_form, check_target,
    is_directory_target,
};

use crate::corpus::reader::has_gz_extension;
use crate::corpus::{CorpusReader, InputFormat, RawRecord, ReaderOptions};
use crate::output::AtomicFile;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use stream::{Docs, Encoded, Staged, finish_shard};
use target::{create_error, shard_extension, write_error};

/// Writes the kept corpus of the corpus at `input`, read with `options` (the first pass's, so that records
/// split and reject alike): the records of the documents whose position `p` has `keep[p]`, in the input's own
/// form (see the module docs). `keep` must have one entry per document the corpus yields.
pub fn write_kept(
    input: &Path,
    options: &ReaderOptions,
    keep: &[bool],
    target: &KeptTarget,
) -> Result<KeptStats, KeptError> {
    check_target(input, &target.path)?;
    let mut pass = CorpusReader::open(input, options)?;
    pass.capture_raw();
    let docs = Docs::new(pass, keep);
    match docs.reader.format() {
        InputFormat::Dir => write_tree(docs, target),
        #[cfg(feature = "parquet")]
        InputFormat::Parquet => parquet::write(docs, target),
        _ => write_lines(docs, target),
    }
}

/// One output of a line-based pass: a single file or the current shard.
enum LineOut {
    Single(Encoded<AtomicFile>),
    Shard(Encoded<BufWriter<File>>, PathBuf),
}

impl Write for LineOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            LineOut::Single(w) => w.write(buf),
            LineOut::Shard(w, _) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            LineOut::Single(w) => w.write_all(buf),
            LineOut::Shard(w, _) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            LineOut::Single(w) => w.flush(),
            LineOut::Shard(w, _) => w.flush(),
        }
    }
}

/// A record's bytes ending in exactly one line terminator: a JSONL/text line keeps its own (`\n` added to a
/// last line without one); a CSV/TSV row's own (`\r`, `\n`, or none at the end of the file) is replaced by the
/// file's `terminator`.
fn terminated<'b>(raw: &'b [u8], terminator: Option<&[u8]>, scratch: &'b mut Vec<u8>) -> &'b [u8] {
    match terminator {
        None if raw.ends_with(b"\n") => raw,
        None => {
            scratch.clear();
            scratch.extend_from_slice(raw);
            scratch.push(b'\n');
            scratch
        }
        Some(term) => {
            let body = raw
                .iter()
                .rposition(|&b| b != b'\n' && b != b'\r')
                .map_or(0, |i| i + 1);
            let body = &raw[..body];
            if raw.len() == body.len() + term.len() && raw.ends_with(term) {
                return raw;
            }
            scratch.clear();
            scratch.extend_from_slice(body);
            scratch.extend_from_slice(term);
            scratch
        }
    }
}

/// The kept pass of a JSONL, text, CSV or TSV corpus.
fn write_lines(mut docs: Docs<'_>, target: &KeptTarget) -> Result<KeptStats, KeptError> {
    let format = docs.reader.format();
    let mut scratch = Vec::new();
    // CSV/TSV: the header row, and the line terminator every row gets.
    let (header, terminator): (Vec<u8>, Option<&[u8]>) = match docs.reader.header_raw() {
        Some(h) => {
            // The reader's row ends at the `\r` of a `\r\n`: a header ending in `\r` is from a `\r\n` file.
            let crlf = h.ends_with(b"\r") || h.ends_with(b"\r\n");
            let term: &[u8] = if crlf { b"\r\n" } else { b"\n" };
            (terminated(h, Some(term), &mut scratch).to_vec(), Some(term))
        }
        None => (Vec::new(), None),
    };
    let gzip_input = docs.reader.decodes();
    let sharded = is_directory_target(&target.path, false);
    let mut stats = KeptStats::default();
    let staged = if sharded {
        Some(Staged::new(&target.path)?)
    } else {
        None
    };
    let ext = shard_extension(format, gzip_input);
    // The open output and the bytes written to it.
    let mut out: Option<(LineOut, u64)> = None;
    let open = |stats: &mut KeptStats| -> Result<(LineOut, u64), KeptError> {
        let mut w = match &staged {
            None => {
                let file = AtomicFile::create(&target.path)?;
                LineOut::Single(Encoded::new(file, has_gz_extension(&target.path)))
            }
            Some(staged) => {
                let path = staged.shard(stats.files, &ext);
                let file = File::create(&path).map_err(|cause| create_error(&path, cause))?;
                let w = Encoded::new(BufWriter::with_capacity(1 << 20, file), gzip_input);
                LineOut::Shard(w, path)
            }
        };
        stats.files += 1;
        w.write_all(&header)
            .map_err(|cause| write_error(&target.path, cause))?;
        stats.bytes += header.len() as u64;
        Ok((w, header.len() as u64))
    };
    let close = |w: LineOut| -> Result<(), KeptError> {
        match w {
            LineOut::Single(w) => {
                let file = w
                    .finish()
                    .map_err(|cause| write_error(&target.path, cause))?;
                file.commit()?;
            }
            LineOut::Shard(w, path) => {
                let file = w.finish().map_err(|cause| write_error(&path, cause))?;
                finish_shard(file, &path)?;
            }
        }
        Ok(())
    };
    while let Some(keep) = docs.next()? {
        if !keep {
            continue;
        }
        let Some(RawRecord::Bytes(raw)) = docs.reader.raw() else {
            unreachable!("a line-based reader in capture mode gives the record's bytes");
        };
        let bytes = terminated(raw, terminator, &mut scratch);
        if out.is_none() {
            out = Some(open(&mut stats)?);
        }
        let (w, written) = out.as_mut().expect("opened above");
        w.write_all(bytes)
            .map_err(|cause| write_error(&target.path, cause))?;
        *written += bytes.len() as u64;
        stats.bytes += bytes.len() as u64;
        stats.kept += 1;
        if staged.is_some() && *written >= target.shard_size {
            let (w, _) = out.take().expect("open");
            close(w)?;
        }
    }
    stats.documents = docs.documents();
    // Nothing kept, or the last shard closed: there is still one file (possibly only the header).
    if stats.files == 0 {
        out = Some(open(&mut stats)?);
    }
    if let Some((w, _)) = out {
        close(w)?;
    }
    if let Some(staged) = staged {
        staged.commit()?;
    }
    Ok(stats)
}

/// The kept pass of a directory corpus: the kept files copied into a new tree.
fn write_tree(mut docs: Docs<'_>, target: &KeptTarget) -> Result<KeptStats, KeptError> {
    let root = docs.reader.path().to_path_buf();
    let staged = Staged::new(&target.path)?;
    let mut stats = KeptStats::default();
    while let Some(keep) = docs.next()? {
        if !keep {
            continue;
        }
        let Some(RawRecord::File(rel)) = docs.reader.raw() else {
            unreachable!("a directory reader in capture mode gives the file's path");
        };
        let from = root.join(rel);
        let to = staged.path().join(rel);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|cause| create_error(&target.path.join(rel), cause))?;
        }
        let bytes = std::fs::copy(&from, &to).map_err(|cause| {
            write_error(
                &target.path.join(rel),
                io::Error::new(cause.kind(), format!("copying {}: {cause}", from.display())),
            )
        })?;
        stats.bytes += bytes;
        stats.files += 1;
        stats.kept += 1;
    }
    stats.documents = docs.documents();
    staged.commit()?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_end_in_one_terminator() {
        let mut s = Vec::new();
        assert_eq!(terminated(b"{}\n", None, &mut s), b"{}\n");
        assert_eq!(terminated(b"{}\r\n", None, &mut s), b"{}\r\n");
        assert_eq!(terminated(b"{}", None, &mut s), b"{}\n");
        let crlf: &[u8] = b"\r\n";
        assert_eq!(terminated(b"a,b\r", Some(crlf), &mut s), b"a,b\r\n");
        assert_eq!(
            terminated(b"a,\"x\ny\"", Some(crlf), &mut s),
            b"a,\"x\ny\"\r\n"
        );
        assert_eq!(terminated(b"a,b\n", Some(b"\n"), &mut s), b"a,b\n");
        assert_eq!(terminated(b"a,b", Some(b"\n"), &mut s), b"a,b\n");
    }

    #[test]
    fn a_name_that_says_another_form_is_refused() {
        let ok = |name: &str, input| check_named_form(Path::new(name), input).is_ok();
        assert!(ok("kept.parquet", InputFormat::Parquet));
        assert!(ok("kept.jsonl.gz", InputFormat::Jsonl));
        assert!(ok("kept.NDJSON", InputFormat::Jsonl));
        assert!(ok("kept.tab", InputFormat::Tsv));
        assert!(ok("kept.out", InputFormat::Parquet));
        assert!(ok("kept", InputFormat::Csv));
        assert!(ok("kept.jsonl", InputFormat::Dir));
        assert!(!ok("kept.jsonl", InputFormat::Parquet));
        assert!(!ok("kept.parquet", InputFormat::Jsonl));
        assert!(!ok("kept.csv.gz", InputFormat::Tsv));
        assert!(!ok("kept.txt", InputFormat::Csv));
        let err = check_named_form(Path::new("k.jsonl"), InputFormat::Parquet)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("k.jsonl") && err.contains("Parquet") && err.contains("name it .parquet"),
            "{err}"
        );
    }

    #[test]
    fn directory_targets() {
        let dir = tempfile::tempdir().unwrap();
        assert!(is_directory_target(dir.path(), false));
        assert!(is_directory_target(Path::new("out/"), false));
        assert!(!is_directory_target(Path::new("out.jsonl"), false));
        assert!(is_directory_target(Path::new("out.jsonl"), true));
    }
}
