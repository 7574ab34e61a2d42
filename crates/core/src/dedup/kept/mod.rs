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

use crate::corpus::reader::has_gz_extension;
use crate::corpus::{CorpusReader, InputFormat, RawRecord, ReadError, ReaderOptions};
use crate::output::{AtomicFile, OutputError};
use std::fs::File;
use std::io::{self, BufWriter, Write};
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
fn parent(path: &Path) -> &Path {
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
    let docs = Docs {
        reader: pass,
        keep,
        documents: 0,
    };
    match docs.reader.format() {
        InputFormat::Dir => write_tree(docs, target),
        #[cfg(feature = "parquet")]
        InputFormat::Parquet => parquet::write(docs, target),
        _ => write_lines(docs, target),
    }
}

/// The documents of a kept pass, each with its place in the mask.
pub(crate) struct Docs<'a> {
    pub(crate) reader: CorpusReader,
    keep: &'a [bool],
    documents: u64,
}

impl Docs<'_> {
    /// The next document's keep flag (its record is then [`CorpusReader::raw`]); `None` at the end, after
    /// checking that the corpus yielded as many documents as the mask has.
    pub(crate) fn next(&mut self) -> Result<Option<bool>, KeptError> {
        match self.reader.next() {
            Some(Ok(doc)) => {
                self.documents += 1;
                // Read with the first pass's options so records are rejected alike; a survivor column's values
                // were used by the first pass and are not kept here.
                if self.reader.options().rank_field.is_some() {
                    drop(self.reader.take_rank_values());
                }
                match self.keep.get(doc.index as usize) {
                    Some(&keep) => Ok(Some(keep)),
                    None => Err(self.mismatch()),
                }
            }
            Some(Err(e)) => Err(e.into()),
            None if self.documents != self.keep.len() as u64 => Err(self.mismatch()),
            None => Ok(None),
        }
    }

    fn mismatch(&self) -> KeptError {
        KeptError::Mismatch {
            path: self.reader.path().to_path_buf(),
            detail: format!(
                "the corpus yields {}{} documents now, the keep mask was made for {} (did the corpus change \
                 since it was read?)",
                if self.documents > self.keep.len() as u64 {
                    "at least "
                } else {
                    ""
                },
                self.documents,
                self.keep.len()
            ),
        }
    }

    pub(crate) fn documents(&self) -> u64 {
        self.documents
    }
}

/// A byte stream, gzip-compressed or not.
// Boxed: the encoder's state is large, and most outputs are plain.
pub(crate) enum Encoded<W: Write> {
    Plain(W),
    Gzip(Box<flate2::write::GzEncoder<W>>),
}

impl<W: Write> Encoded<W> {
    pub(crate) fn new(inner: W, gzip: bool) -> Encoded<W> {
        if gzip {
            Encoded::Gzip(Box::new(flate2::write::GzEncoder::new(
                inner,
                flate2::Compression::default(),
            )))
        } else {
            Encoded::Plain(inner)
        }
    }

    /// Ends the stream (the gzip trailer) and gives the inner writer back.
    pub(crate) fn finish(self) -> io::Result<W> {
        match self {
            Encoded::Plain(w) => Ok(w),
            Encoded::Gzip(g) => (*g).finish(),
        }
    }
}

impl<W: Write> Write for Encoded<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoded::Plain(w) => w.write(buf),
            Encoded::Gzip(g) => g.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Encoded::Plain(w) => w.write_all(buf),
            Encoded::Gzip(g) => g.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoded::Plain(w) => w.flush(),
            Encoded::Gzip(g) => g.flush(),
        }
    }
}

/// A directory being built under a temporary name beside its target, renamed into place by [`Staged::commit`]
/// (over an empty directory of that name); dropped before, it is removed.
pub(crate) struct Staged {
    dir: tempfile::TempDir,
    target: PathBuf,
}

impl Staged {
    pub(crate) fn new(target: &Path) -> Result<Staged, KeptError> {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut builder = tempfile::Builder::new();
        let prefix = format!(".{name}.");
        builder.prefix(&prefix).suffix(".tmp");
        // The final directory gets the usual permissions (0777 less the umask), not the 0700 of a temporary one.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o777));
        }
        let dir = builder
            .tempdir_in(parent(target))
            .map_err(|cause| create_error(target, cause))?;
        Ok(Staged {
            dir,
            target: target.to_path_buf(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The path of shard `i` with extension `ext`.
    pub(crate) fn shard(&self, i: u64, ext: &str) -> PathBuf {
        self.dir.path().join(format!("part-{i:05}.{ext}"))
    }

    pub(crate) fn commit(self) -> Result<(), KeptError> {
        let temp = self.dir.path().to_path_buf();
        std::fs::rename(&temp, &self.target).map_err(|cause| write_error(&self.target, cause))?;
        // Renamed: nothing is left to remove under the temporary name.
        let _ = self.dir.keep();
        Ok(())
    }
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

/// Flushes a finished shard and syncs it, so that the directory renamed into place holds its bytes.
pub(crate) fn finish_shard(file: BufWriter<File>, path: &Path) -> Result<(), KeptError> {
    file.into_inner()
        .map_err(|e| write_error(path, e.into_error()))?
        .sync_all()
        .map_err(|cause| write_error(path, cause))
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
