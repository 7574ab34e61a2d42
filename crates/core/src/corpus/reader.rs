//! Streaming corpus readers: JSONL, CSV/TSV with a header, plain text (one document per line), a directory
//! (one document per file) and, with the `parquet` feature, Parquet (a text column and an id column, see
//! `corpus/parquet.rs`). `.gz` is read transparently (by extension or gzip magic bytes). One record is held
//! at a time, so memory does not grow with the corpus.
//!
//! Counting rules (so that no document is ever dropped silently):
//! - a *record* is a JSONL line that is not blank, a CSV/TSV row after the header, a text line, a file of a
//!   directory or a row of a Parquet file; every record is either yielded as a document or rejected, and both
//!   are counted;
//! - a blank (empty or all-whitespace) JSONL line is not a record and counts nothing, so files ending in extra
//!   newlines read cleanly; a blank line of a *text* corpus is an empty document (the text format has no
//!   syntax to violate, and the empty document is then counted as empty downstream);
//! - a record without an id gets its 0-based record index (rejected records keep their index, so ids stay
//!   tied to the position in the file whatever `--on-error` says).

use super::record::{Bad, Parsed, decode};
pub use super::record::{
    DEFAULT_MAX_RECORD_BYTES, Document, FieldValue, InputFormat, MAX_KEPT_REJECTIONS, OnError,
    ReadError, ReadStats, ReaderOptions,
};
use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Buffer sizes: large reads keep syscalls and decompressor calls rare.
const FILE_BUF: usize = 1 << 16;
const TEXT_BUF: usize = 1 << 18;

type Source = Box<dyn BufRead + Send>;

/// Opens a file as a buffered byte stream, decompressing gzip (detected by the magic bytes `1f 8b`, which
/// also covers a `.gz` extension; a `.gz` file without them is an error rather than silently read raw).
/// With `read_ahead`, a gzip stream is decompressed on its own thread ([`ReadAhead`]), ahead of parsing: worth it
/// for a corpus file, not for the many small files of a directory. The flag says whether the file is gzip.
fn open_source(path: &Path, read_ahead: bool) -> Result<(Source, bool), ReadError> {
    let io_err = |cause| ReadError::Io {
        file: path.to_path_buf(),
        cause,
    };
    let file = File::open(path).map_err(io_err)?;
    let mut raw = BufReader::with_capacity(FILE_BUF, file);
    let head = raw.fill_buf().map_err(io_err)?;
    let gzip = head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b;
    if gzip {
        // MultiGzDecoder: concatenated gzip members (as `cat a.gz b.gz` or bgzip produce) are one stream.
        let mut dec = flate2::bufread::MultiGzDecoder::new(raw);
        // The first bytes of the text, however the members split them (a first member may hold a single
        // byte): at least 4, or all there is, so the UTF-16 check and the CSV reader's UTF-8 mark check see the
        // mark whole. A stream that breaks after some bytes gives those first and its error after them, as a
        // plain read would.
        let mut head = Vec::with_capacity(64);
        let mut chunk = [0u8; 64];
        let mut broken = None;
        while head.len() < 4 {
            match dec.read(&mut chunk) {
                Ok(0) => break,
                Ok(m) => head.extend_from_slice(&chunk[..m]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if head.is_empty() => return Err(io_err(e)),
                Err(e) => {
                    broken = Some(e);
                    break;
                }
            }
        }
        refuse_utf16(&head).map_err(io_err)?;
        let head = std::io::Cursor::new(head);
        let src: Source = match broken {
            Some(e) => Box::new(head.chain(BufReader::new(Broken(Some(e))))),
            None if read_ahead => match ReadAhead::spawn(Box::new(dec)) {
                Ok(ahead) => Box::new(head.chain(ahead)),
                Err(dec) => Box::new(head.chain(BufReader::with_capacity(TEXT_BUF, dec))),
            },
            None => Box::new(head.chain(BufReader::with_capacity(TEXT_BUF, dec))),
        };
        Ok((src, true))
    } else if let Err(e) = refuse_utf16(head) {
        Err(io_err(e))
    } else if has_gz_extension(path) && !head.is_empty() {
        Err(io_err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the name ends in .gz but the file is not gzip (no 1f 8b magic bytes)",
        )))
    } else {
        Ok((Box::new(raw), false))
    }
}

/// Bytes per chunk of a [`ReadAhead`], and chunks it may hold ready ahead of the consumer: a short lead (see
/// `READ_BATCH_BYTES` in `pipeline.rs`).
const AHEAD_CHUNK: usize = 512 << 10;
const AHEAD_CHUNKS: usize = 2;

/// A byte stream read on its own thread, at most [`AHEAD_CHUNKS`] chunks ahead of the consumer, so that
/// decompression overlaps with parsing. The bytes and errors are the inner stream's, in its order (an error
/// arrives after the bytes before it, then the stream ends). Dropping it stops the thread at its next chunk and
/// waits for it to end, so no reader leaves a thread behind (ASan's leak check found the thread's exit racing
/// the end of a fuzz input while it was detached).
struct ReadAhead {
    chunks: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    /// The reading thread, joined on drop.
    thread: Option<std::thread::JoinHandle<()>>,
    /// Spent chunk buffers go back to the reading thread, so the chunks are allocated once.
    spent: std::sync::mpsc::SyncSender<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
    done: bool,
}

impl ReadAhead {
    /// Starts the reading thread; if the thread cannot be started, gives `inner` back to be read in place.
    fn spawn(inner: Box<dyn Read + Send>) -> Result<ReadAhead, Box<dyn Read + Send>> {
        let (tx, chunks) = std::sync::mpsc::sync_channel(AHEAD_CHUNKS);
        let (spent, spare) = std::sync::mpsc::sync_channel::<Vec<u8>>(AHEAD_CHUNKS + 2);
        // The stream moves into the thread only once it has started; a failed start hands it back.
        let (give, take) = std::sync::mpsc::sync_channel::<Box<dyn Read + Send>>(1);
        let started = std::thread::Builder::new()
            .name("lshbench-read-ahead".into())
            .spawn(move || {
                let Ok(mut inner) = take.recv() else { return };
                loop {
                    let mut buf = spare.try_recv().unwrap_or_default();
                    buf.resize(AHEAD_CHUNK, 0);
                    let mut n = 0;
                    let mut failed = None;
                    while n < buf.len() {
                        match inner.read(&mut buf[n..]) {
                            Ok(0) => break,
                            Ok(m) => n += m,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => {
                                failed = Some(e);
                                break;
                            }
                        }
                    }
                    buf.truncate(n);
                    let end = n < AHEAD_CHUNK;
                    // A send fails only when the consumer is gone: then stop.
                    if (n > 0 && tx.send(Ok(buf)).is_err()) || end {
                        if let Some(e) = failed {
                            let _ = tx.send(Err(e));
                        }
                        return;
                    }
                }
            });
        match started {
            Ok(thread) => {
                give.send(inner)
                    .expect("the reading thread waits for its stream");
                Ok(ReadAhead {
                    chunks,
                    thread: Some(thread),
                    spent,
                    cur: Vec::new(),
                    pos: 0,
                    done: false,
                })
            }
            Err(_) => Err(inner),
        }
    }
}

impl Read for ReadAhead {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for ReadAhead {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.pos == self.cur.len() && !self.done {
            let spent = std::mem::take(&mut self.cur);
            let _ = self.spent.try_send(spent);
            self.pos = 0;
            match self.chunks.recv() {
                Ok(Ok(chunk)) => self.cur = chunk,
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => self.done = true,
            }
        }
        Ok(&self.cur[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.cur.len());
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // Close the channel first, so that a thread waiting to send a chunk stops at once; then wait for it
        // (at most the chunk it is decompressing). A panic there is already reported by the thread itself.
        let (_, closed) = std::sync::mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.chunks, closed));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A stream that already failed: its error once, then the end.
struct Broken(Option<std::io::Error>);

impl Read for Broken {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        match self.0.take() {
            Some(e) => Err(e),
            None => Ok(0),
        }
    }
}

/// A UTF-16 byte-order mark at the start: the text is not UTF-8 and would be read as garbage.
fn refuse_utf16(head: &[u8]) -> std::io::Result<()> {
    if head.starts_with(&[0xFF, 0xFE]) || head.starts_with(&[0xFE, 0xFF]) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the text is UTF-16 (it starts with a UTF-16 byte-order mark); lshbench reads UTF-8: convert it first",
        ));
    }
    Ok(())
}

/// Whether a name ends in `.gz` (any case).
pub fn has_gz_extension(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// The format `Auto` resolves to for `path`: a directory, else the format its name says ([`named_format`]),
/// else text.
pub fn detect_format(path: &Path) -> InputFormat {
    if path.is_dir() {
        return InputFormat::Dir;
    }
    named_format(path).unwrap_or(InputFormat::Text)
}

/// The format a file name's extension says, if it says one: `.parquet`, or under an optional `.gz`
/// `.jsonl`/`.ndjson`/`.json`, `.csv`, `.tsv`/`.tab`, `.txt`.
pub fn named_format(path: &Path) -> Option<InputFormat> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
    {
        return Some(InputFormat::Parquet);
    }
    let inner: &Path = if has_gz_extension(path) {
        path.file_stem().map(Path::new).unwrap_or(path)
    } else {
        path
    };
    let ext = inner.extension()?.to_string_lossy().to_ascii_lowercase();
    match ext.as_str() {
        "jsonl" | "ndjson" | "json" => Some(InputFormat::Jsonl),
        "csv" => Some(InputFormat::Csv),
        "tsv" | "tab" => Some(InputFormat::Tsv),
        "txt" => Some(InputFormat::Text),
        _ => None,
    }
}

enum Inner {
    Lines {
        src: Source,
        buf: Vec<u8>,
        /// 1-based number of the last line read.
        line: u64,
        json: bool,
        /// Capture mode: the last line read, with its line end as read (a leading UTF-8 BOM left out).
        raw: Vec<u8>,
    },
    Delimited {
        // Boxed: the CSV parser's state is large, and most readers are not CSV.
        rows: Box<RowReader>,
        width: usize,
        text_col: (usize, String),
        id_col: Option<(usize, String)>,
        rank_col: Option<(usize, String)>,
        /// The header row's bytes as read (with its line end and any UTF-8 BOM).
        header: Vec<u8>,
    },
    Dir {
        root: PathBuf,
        files: std::vec::IntoIter<PathBuf>,
        buf: Vec<u8>,
        /// The relative path of the last file read.
        current: PathBuf,
    },
    #[cfg(feature = "parquet")]
    Parquet(Box<super::parquet::ParquetRows>),
}

/// A streaming reader over one corpus path. Iterating yields documents; under `OnError::Fail` the first
/// malformed record yields `Err` and ends the iteration.
pub struct CorpusReader {
    path: PathBuf,
    options: ReaderOptions,
    inner: Inner,
    stats: ReadStats,
    done: bool,
    /// xxh3 hashes of the explicit ids seen so far, to count duplicates.
    seen_ids: rustc_hash::FxHashSet<u64>,
    /// Whether reading decodes as well as parses (a gzip file, or Parquet).
    decodes: bool,
    /// The rank field's value of each document yielded, when [`ReaderOptions::rank_field`] names one.
    rank_values: Vec<FieldValue>,
    /// Heap bytes of the text values among them.
    rank_heap: u64,
    /// Raw-capture mode ([`CorpusReader::capture_raw`]): lines are copied out as read.
    capture: bool,
}

/// Where the last document a reader in raw-capture mode yielded came from ([`CorpusReader::raw`]).
#[derive(Debug)]
pub enum RawRecord<'a> {
    /// A JSONL or text line with its line end as read (none for a last line without one; a UTF-8 BOM at the
    /// start of the file left out), or a CSV/TSV row's bytes as read (quoted fields spanning lines included,
    /// ending in its line terminator up to its `\r` — the `\n` of a `\r\n` is not part of the row — or in
    /// nothing at the end of the file).
    Bytes(&'a [u8]),
    /// A file of a directory corpus, relative to the directory.
    File(&'a Path),
    /// A Parquet row, by its 0-based ordinal in the file (rejected rows count).
    Row(u64),
}

impl CorpusReader {
    /// Opens `path` in the format of `options` (or the detected one). Fails if the file or directory cannot be
    /// read, or a CSV/TSV file has no header row or lacks a named column (the header is read here).
    pub fn open(path: &Path, options: &ReaderOptions) -> Result<CorpusReader, ReadError> {
        let format = match options.format {
            InputFormat::Auto => detect_format(path),
            f => f,
        };
        let mut decodes = false;
        if let Some(field) = &options.rank_field
            && matches!(format, InputFormat::Text | InputFormat::Dir)
        {
            return Err(ReadError::Io {
                file: path.to_path_buf(),
                cause: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "field `{field}`: a survivor column needs a JSONL, CSV/TSV or Parquet corpus (a {} corpus \
                         has no fields)",
                        if format == InputFormat::Dir {
                            "directory"
                        } else {
                            "text"
                        }
                    ),
                ),
            });
        }
        let inner = match format {
            InputFormat::Jsonl | InputFormat::Text => {
                let (src, gzip) = open_source(path, true)?;
                decodes = gzip;
                Inner::Lines {
                    src,
                    buf: Vec::with_capacity(1 << 16),
                    line: 0,
                    json: format == InputFormat::Jsonl,
                    raw: Vec::new(),
                }
            }
            InputFormat::Csv | InputFormat::Tsv => {
                let delimiter = if format == InputFormat::Tsv {
                    b'\t'
                } else {
                    b','
                };
                let (src, gzip) = open_source(path, true)?;
                decodes = gzip;
                open_delimited(path, src, delimiter, options)?
            }
            InputFormat::Dir => {
                let mut files = Vec::new();
                walk(path, Path::new(""), &mut files)?;
                // Path ordering compares component by component, so the order depends only on the names,
                // never on the order the file system lists them in.
                files.sort();
                Inner::Dir {
                    root: path.to_path_buf(),
                    files: files.into_iter(),
                    buf: Vec::new(),
                    current: PathBuf::new(),
                }
            }
            #[cfg(feature = "parquet")]
            InputFormat::Parquet => {
                decodes = true;
                Inner::Parquet(Box::new(super::parquet::ParquetRows::open(path, options)?))
            }
            #[cfg(not(feature = "parquet"))]
            InputFormat::Parquet => {
                return Err(ReadError::Io {
                    file: path.to_path_buf(),
                    cause: std::io::Error::new(
                        std::io::ErrorKind::Unsupported,
                        "Parquet input needs lshbench built with the cargo feature `parquet`",
                    ),
                });
            }
            InputFormat::Auto => unreachable!("resolved above"),
        };
        Ok(CorpusReader {
            path: path.to_path_buf(),
            options: options.clone(),
            inner,
            stats: ReadStats::default(),
            done: false,
            seen_ids: Default::default(),
            decodes,
            rank_values: Vec::new(),
            rank_heap: 0,
            capture: false,
        })
    }

    /// Turns on raw-capture mode: after each document, [`CorpusReader::raw`] tells where it came from (the
    /// record's bytes, file or row), for a second pass that copies records as read (`dedup --kept`). Off, it
    /// costs the reader nothing but a test per line.
    pub fn capture_raw(&mut self) {
        self.capture = true;
    }

    /// In raw-capture mode, the record of the last document yielded; `None` when capture is off or nothing
    /// was yielded yet.
    pub fn raw(&self) -> Option<RawRecord<'_>> {
        if !self.capture || self.stats.documents == 0 {
            return None;
        }
        Some(match &self.inner {
            Inner::Lines { raw, .. } => RawRecord::Bytes(raw),
            Inner::Delimited { rows, .. } => RawRecord::Bytes(&rows.raw),
            Inner::Dir { current, .. } => RawRecord::File(current),
            #[cfg(feature = "parquet")]
            Inner::Parquet(rows) => RawRecord::Row(rows.rows_read() - 1),
        })
    }

    /// The format this reader reads (`Auto` resolved).
    pub fn format(&self) -> InputFormat {
        match &self.inner {
            Inner::Lines { json: true, .. } => InputFormat::Jsonl,
            Inner::Lines { json: false, .. } => InputFormat::Text,
            Inner::Delimited { rows, .. } if rows.delimiter == b'\t' => InputFormat::Tsv,
            Inner::Delimited { .. } => InputFormat::Csv,
            Inner::Dir { .. } => InputFormat::Dir,
            #[cfg(feature = "parquet")]
            Inner::Parquet(_) => InputFormat::Parquet,
        }
    }

    /// A CSV/TSV file's header row as read (with its line end and any UTF-8 BOM); `None` for other formats.
    pub fn header_raw(&self) -> Option<&[u8]> {
        match &self.inner {
            Inner::Delimited { header, .. } => Some(header),
            _ => None,
        }
    }

    /// Whether reading this corpus decodes as well as parses: a gzip file (inflated on a thread of its own) or
    /// Parquet. Such a reader keeps a core busy; a plain file's parsing leaves part of one idle.
    pub fn decodes(&self) -> bool {
        self.decodes
    }

    /// The counts so far (final once the iteration has ended).
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// The options this reader was opened with.
    pub fn options(&self) -> &ReaderOptions {
        &self.options
    }

    /// The corpus path this reader was opened on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rank field's values of the documents yielded so far (one per document, in order), taken out of the
    /// reader; empty unless [`ReaderOptions::rank_field`] names a field.
    pub fn take_rank_values(&mut self) -> Vec<FieldValue> {
        self.rank_heap = 0;
        std::mem::take(&mut self.rank_values)
    }

    /// Resident bytes of the rank values collected so far (for out-of-core dedup's memory estimate).
    pub fn rank_values_bytes(&self) -> u64 {
        self.rank_heap + (self.rank_values.capacity() * std::mem::size_of::<FieldValue>()) as u64
    }

    /// A fresh reader over the same path with the same options, from the first record (for a second pass over
    /// the corpus, as out-of-core dedup makes).
    pub fn reopen(&self) -> Result<CorpusReader, ReadError> {
        CorpusReader::open(&self.path, &self.options)
    }

    /// Reads the next record: `Ok(None)` at the end, `Ok(Some(Err(bad)))` for a malformed record.
    fn next_record(&mut self) -> NextRecord {
        let options = &self.options;
        let capture = self.capture;
        match &mut self.inner {
            Inner::Lines {
                src,
                buf,
                line,
                json,
                raw,
            } => loop {
                let limit = options.max_record_bytes;
                let io_err = |cause| ReadError::Io {
                    file: self.path.clone(),
                    cause,
                };
                // Most lines lie whole in the source's buffer: parse them there, without copying them out.
                let avail = src.fill_buf().map_err(io_err)?;
                if let Some(nl) = memchr::memchr(b'\n', avail).filter(|&nl| nl as u64 <= limit) {
                    *line += 1;
                    let bytes = &avail[..nl];
                    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
                    let record = line_record(bytes, *line, *json, options);
                    if capture {
                        raw_line(raw, &avail[..=nl], *line);
                    }
                    src.consume(nl + 1);
                    match record {
                        Some(record) => return Ok(Some(record)),
                        None => continue,
                    }
                }
                buf.clear();
                let n = src
                    .by_ref()
                    .take(limit.saturating_add(1))
                    .read_until(b'\n', buf)
                    .map_err(|cause| ReadError::Io {
                        file: self.path.clone(),
                        cause,
                    })?;
                if n == 0 {
                    return Ok(None);
                }
                *line += 1;
                if n as u64 > limit && buf.last() != Some(&b'\n') {
                    return Err(too_long(&self.path, *line, limit));
                }
                if capture {
                    raw_line(raw, buf, *line);
                }
                let mut bytes: &[u8] = buf;
                if let Some(rest) = bytes.strip_suffix(b"\n") {
                    bytes = rest.strip_suffix(b"\r").unwrap_or(rest);
                }
                if let Some(record) = line_record(bytes, *line, *json, options) {
                    return Ok(Some(record));
                }
            },
            Inner::Delimited {
                rows,
                width,
                text_col,
                id_col,
                rank_col,
                ..
            } => next_row(
                &self.path,
                options,
                rows,
                *width,
                text_col,
                id_col.as_ref(),
                rank_col.as_ref(),
            ),
            #[cfg(feature = "parquet")]
            Inner::Parquet(rows) => {
                rows.next_record(options.strict_utf8)
                    .map_err(|cause| ReadError::Io {
                        file: self.path.clone(),
                        cause,
                    })
            }
            Inner::Dir {
                root,
                files,
                buf,
                current,
            } => next_file(options, capture, root, files, buf, current),
        }
    }
}

/// What reading one record gives: `Ok(None)` at the end, `Ok(Some(Err(bad)))` for a malformed record.
type NextRecord = Result<Option<Result<Parsed, Bad>>, ReadError>;

/// The next row of a CSV/TSV corpus as a record: its text, id and rank fields decoded.
fn next_row(
    path: &Path,
    options: &ReaderOptions,
    rows: &mut RowReader,
    width: usize,
    text_col: &(usize, String),
    id_col: Option<&(usize, String)>,
    rank_col: Option<&(usize, String)>,
) -> NextRecord {
    let Some(line) = rows.next_row().map_err(|cause| ReadError::Io {
        file: path.to_path_buf(),
        cause,
    })?
    else {
        return Ok(None);
    };
    if rows.too_long || rows.fields_len() as u64 > options.max_record_bytes {
        return Err(too_long(path, line, options.max_record_bytes));
    }
    if rows.unterminated {
        return Ok(Some(Err(Bad::new(line, "", unterminated_reason()))));
    }
    if rows.len() != width {
        return Ok(Some(Err(Bad::new(
            line,
            "",
            format!(
                "expected {} fields (as in the header), found {}",
                width,
                rows.len()
            ),
        ))));
    }
    let strict = options.strict_utf8;
    let field = |(idx, name): &(usize, String)| {
        decode(rows.field(*idx), strict).map_err(|reason| Bad::new(line, name, reason))
    };
    let (text, mut replaced) = match field(text_col) {
        Ok(t) => t,
        Err(bad) => return Ok(Some(Err(bad))),
    };
    let id = match id_col.map(field) {
        Some(Ok((id, r))) => {
            replaced |= r;
            Some(id.into_owned())
        }
        Some(Err(bad)) => return Ok(Some(Err(bad))),
        None => None,
    };
    let rank = match rank_col.map(field) {
        Some(Ok((value, _))) => FieldValue::from_field(&value),
        Some(Err(bad)) => return Ok(Some(Err(bad))),
        None => FieldValue::Missing,
    };
    Ok(Some(Ok(Parsed {
        id,
        text: text.into_owned(),
        replaced,
        rank,
    })))
}

/// The next file of a directory corpus as a record, its id the path below the root.
fn next_file(
    options: &ReaderOptions,
    capture: bool,
    root: &Path,
    files: &mut std::vec::IntoIter<PathBuf>,
    buf: &mut Vec<u8>,
    current: &mut PathBuf,
) -> NextRecord {
    let Some(rel) = files.next() else {
        return Ok(None);
    };
    if capture {
        current.clone_from(&rel);
    }
    let full = root.join(&rel);
    buf.clear();
    let limit = options.max_record_bytes;
    open_source(&full, false)?
        .0
        .take(limit.saturating_add(1))
        .read_to_end(buf)
        .map_err(|cause| ReadError::Io {
            file: full.clone(),
            cause,
        })?;
    if buf.len() as u64 > limit {
        return Err(too_long(&full, 1, limit));
    }
    // Ids use '/' whatever the platform, so they are the same everywhere.
    let id = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    Ok(Some(match decode(buf, options.strict_utf8) {
        Ok((text, replaced)) => Ok(Parsed {
            id: Some(id),
            text: text.into_owned(),
            replaced,
            rank: FieldValue::Missing,
        }),
        Err(reason) => {
            // Point at the line holding the first invalid byte.
            let valid = std::str::from_utf8(buf)
                .err()
                .map_or(0, |e| e.valid_up_to());
            let line = 1 + memchr::memchr_iter(b'\n', &buf[..valid]).count() as u64;
            Err(Bad {
                file: Some(full),
                line,
                field: String::new(),
                reason,
            })
        }
    }))
}

impl Iterator for CorpusReader {
    type Item = Result<Document, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            let record_index = self.stats.records;
            match self.next_record() {
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Ok(Some(Ok(parsed))) => {
                    let stats = &mut self.stats;
                    stats.records += 1;
                    // Directory ids are paths, unique by construction.
                    if let Some(id) = &parsed.id
                        && !matches!(self.inner, Inner::Dir { .. })
                        && !self
                            .seen_ids
                            .insert(xxhash_rust::xxh3::xxh3_64(id.as_bytes()))
                    {
                        stats.duplicate_ids += 1;
                    }
                    stats.utf8_replaced += parsed.replaced as u64;
                    if self.options.rank_field.is_some() {
                        if let FieldValue::Text(t) = &parsed.rank {
                            self.rank_heap += t.capacity() as u64;
                        }
                        self.rank_values.push(parsed.rank);
                    }
                    let doc = Document {
                        index: stats.documents,
                        id: parsed.id.unwrap_or_else(|| record_index.to_string()),
                        text: parsed.text,
                    };
                    stats.documents += 1;
                    return Some(Ok(doc));
                }
                Ok(Some(Err(bad))) => {
                    let err = ReadError::Malformed {
                        file: bad.file.unwrap_or_else(|| self.path.clone()),
                        line: bad.line,
                        field: bad.field,
                        reason: bad.reason,
                    };
                    let stats = &mut self.stats;
                    stats.records += 1;
                    stats.rejected += 1;
                    if stats.first_rejections.len() < MAX_KEPT_REJECTIONS {
                        stats.first_rejections.push(err.to_string());
                    }
                    if self.options.on_error == OnError::Fail {
                        self.done = true;
                        return Some(Err(err));
                    }
                }
            }
        }
    }
}

/// Copies a line as read (with its line end) into the capture buffer, less a UTF-8 BOM starting the file.
fn raw_line(raw: &mut Vec<u8>, line_bytes: &[u8], line: u64) {
    let bytes = if line == 1 {
        line_bytes
            .strip_prefix(b"\xEF\xBB\xBF")
            .unwrap_or(line_bytes)
    } else {
        line_bytes
    };
    raw.clear();
    raw.extend_from_slice(bytes);
}

/// The record of one line of a JSONL or text corpus (`bytes` without its line end, `\n` or `\r\n`), or
/// `None` for a blank JSONL line, which is not a record.
fn line_record(
    mut bytes: &[u8],
    line: u64,
    json: bool,
    options: &ReaderOptions,
) -> Option<Result<Parsed, Bad>> {
    if line == 1 {
        // A UTF-8 byte-order mark, as editors on Windows write, is not part of the first record.
        bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    }
    if json {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        return Some(parse_json(bytes, line, options));
    }
    Some(match decode(bytes, options.strict_utf8) {
        Ok((text, replaced)) => Ok(Parsed {
            id: None,
            text: text.into_owned(),
            replaced,
            rank: FieldValue::Missing,
        }),
        Err(reason) => Err(Bad::new(line, "", reason)),
    })
}

// ---------------------------------------------------------------------------------------------------------
// JSONL

/// One JSON line: the fast path of `jsonl.rs` for plain lines, serde_json for everything else (the fast path
/// answers only where serde_json would answer the same).
fn parse_json(bytes: &[u8], line: u64, options: &ReaderOptions) -> Result<Parsed, Bad> {
    let id_field = options.id_field.as_deref().unwrap_or("id");
    if options.rank_field.is_some() {
        // The fast path takes the id and text fields only.
        return parse_json_serde(bytes, line, options);
    }
    match super::jsonl::parse_fast(bytes, id_field, &options.text_field, options.dispatch) {
        Some((id, text)) => Ok(Parsed {
            id,
            text,
            replaced: false,
            rank: FieldValue::Missing,
        }),
        None => parse_json_serde(bytes, line, options),
    }
}

/// One JSON line, parsed without building a `Value`: the id and text fields are copied out once, every other
/// field is skipped by the parser.
pub(super) fn parse_json_serde(
    bytes: &[u8],
    line: u64,
    options: &ReaderOptions,
) -> Result<Parsed, Bad> {
    let id_field = options.id_field.as_deref().unwrap_or("id");
    let text_field = options.text_field.as_str();
    let names = FieldNames {
        id: id_field,
        text: text_field,
        rank: options.rank_field.as_deref(),
    };
    let (fields, replaced) = match std::str::from_utf8(bytes) {
        Ok(s) => (parse_object(s, names, line)?, false),
        Err(e) => {
            // Parse the repaired line so the message can name the field that held the bad bytes.
            let lossy = String::from_utf8_lossy(bytes);
            let fields = parse_object(&lossy, names, line)?;
            let in_text = fields.text.as_ref().is_some_and(|t| t.contains('\u{FFFD}'));
            let in_id = fields.id.as_ref().is_some_and(|t| t.contains('\u{FFFD}'));
            if options.strict_utf8 {
                let field = if in_text {
                    text_field
                } else if in_id {
                    id_field
                } else {
                    ""
                };
                return Err(Bad::new(
                    line,
                    field,
                    format!(
                        "invalid UTF-8 at byte {} of the line (rejected under --strict)",
                        e.valid_up_to()
                    ),
                ));
            }
            (fields, in_text || in_id)
        }
    };
    let Some(text) = fields.text else {
        return Err(Bad::new(line, text_field, "missing".into()));
    };
    Ok(Parsed {
        id: fields.id,
        text,
        replaced,
        rank: fields.rank.unwrap_or_default(),
    })
}

struct JsonFields {
    id: Option<String>,
    text: Option<String>,
    rank: Option<FieldValue>,
}

/// The fields a JSONL record is read for.
#[derive(Clone, Copy)]
struct FieldNames<'a> {
    id: &'a str,
    text: &'a str,
    rank: Option<&'a str>,
}

fn parse_object(s: &str, names: FieldNames<'_>, line: u64) -> Result<JsonFields, Bad> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(s);
    let seed = ObjectSeed {
        id_field: names.id,
        text_field: names.text,
        rank_field: names.rank,
    };
    let result = seed.deserialize(&mut de).and_then(|r| de.end().map(|()| r));
    match result {
        Ok(Ok(fields)) => Ok(fields),
        Ok(Err((field, reason))) => Err(Bad::new(line, field, reason)),
        Err(e) => Err(Bad::new(line, "", format!("not a JSON object: {e}"))),
    }
}

/// Deserialises one JSON object, keeping only the id and text fields. A wrong type in one of those is a
/// record error (the field and the type found), not a parse error, so the message can name the field.
struct ObjectSeed<'a> {
    id_field: &'a str,
    text_field: &'a str,
    rank_field: Option<&'a str>,
}

type FieldResult<'a> = Result<JsonFields, (&'a str, String)>;

impl<'de, 'a> serde::de::DeserializeSeed<'de> for ObjectSeed<'a> {
    type Value = FieldResult<'a>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 'a> serde::de::Visitor<'de> for ObjectSeed<'a> {
    type Value = FieldResult<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = JsonFields {
            id: None,
            text: None,
            rank: None,
        };
        let mut problem: Option<(&'a str, String)> = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let key = key.0;
            let rank = self.rank_field.filter(|&r| key == r);
            let (name, slot, id) = if key == self.text_field {
                (self.text_field, &mut fields.text, false)
            } else if key == self.id_field {
                (self.id_field, &mut fields.id, true)
            } else if let Some(name) = rank {
                let value = map.next_value::<Scalar>()?;
                if problem.is_none() {
                    problem = rank_value(&mut fields.rank, name, value);
                }
                continue;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            };
            let value = map.next_value::<Scalar>()?;
            if problem.is_some() {
                continue; // keep parsing, so a syntax error later in the line still wins
            }
            if let Some(name) = rank {
                // The rank field is also the id or text field.
                problem = rank_value(&mut fields.rank, name, value.clone());
                if problem.is_some() {
                    continue;
                }
            }
            if slot.is_some() {
                problem = Some((name, "appears twice in the object".into()));
                continue;
            }
            match value {
                Scalar::Str(s) => *slot = Some(s),
                Scalar::Num(n) if id => *slot = Some(n),
                Scalar::Num(_) | Scalar::Other(_) if !id => {
                    problem = Some((name, format!("expected a string, found {}", value.kind())));
                }
                _ => {
                    problem = Some((
                        name,
                        format!("expected a string or a number, found {}", value.kind()),
                    ));
                }
            }
        }
        Ok(match problem {
            Some(p) => Err(p),
            None => Ok(fields),
        })
    }
}

/// Stores the rank field's value in `slot`, or says what is wrong with it: a number or a string is a value,
/// null is missing, anything else is refused.
fn rank_value<'a>(
    slot: &mut Option<FieldValue>,
    name: &'a str,
    value: Scalar,
) -> Option<(&'a str, String)> {
    if slot.is_some() {
        return Some((name, "appears twice in the object".into()));
    }
    *slot = Some(match value {
        Scalar::Str(s) => FieldValue::Text(s),
        Scalar::Num(n) => match n.parse::<f64>() {
            Ok(x) if x.is_finite() => FieldValue::Number(x),
            _ => return Some((name, format!("the number {n} is out of range"))),
        },
        Scalar::Other("null") => FieldValue::Missing,
        Scalar::Other(kind) => {
            return Some((
                name,
                format!("a survivor value must be a number or a string, found {kind}"),
            ));
        }
    });
    None
}

/// An object key, borrowed from the line unless it contains escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The value of the id or text field: a string (copied once), a number (as its decimal text), or the kind
/// of anything else.
#[derive(Clone)]
enum Scalar {
    Str(String),
    Num(String),
    Other(&'static str),
}

impl Scalar {
    fn kind(&self) -> &'static str {
        match self {
            Scalar::Str(_) => "a string",
            Scalar::Num(_) => "a number",
            Scalar::Other(k) => k,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess};
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar::Str(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Num(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Num(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Num(v.to_string()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
                Ok(Scalar::Other("a boolean"))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other("null"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other("an array"))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other("an object"))
            }
        }
        d.deserialize_any(V)
    }
}

// ---------------------------------------------------------------------------------------------------------
// CSV / TSV

/// Rows of a delimited file, parsed by `csv_core` (RFC 4180 quoting: quoted fields may hold delimiters,
/// doubled quotes and newlines). We drive the parser ourselves rather than through `csv::Reader` so that we
/// can count lines exactly: an error must name the line a record *starts* on, and `csv::Reader`'s positions
/// are off after blank lines and for CRLF files.
struct RowReader {
    src: Source,
    core: csv_core::Reader,
    /// The current row's field bytes, concatenated, and the end offset of each field.
    fields: Vec<u8>,
    ends: Vec<usize>,
    len: usize,
    /// Newlines consumed so far, so the next unread byte sits on line `newlines + 1`.
    newlines: u64,
    /// The current row's raw bytes, kept to tell a row ended by the end of the file from an unterminated
    /// quoted field (which `csv_core` also ends at the end of the file).
    raw: Vec<u8>,
    delimiter: u8,
    /// The current row ended at the end of the file inside a quoted field.
    unterminated: bool,
    /// The most field bytes a row may hold; a longer row stops reading with `too_long` set.
    max_bytes: u64,
    too_long: bool,
}

/// Whether `raw` (one row's bytes, ended by the end of the file) leaves a quoted field open, by RFC 4180 as
/// `csv_core` reads it: a quote opens a quoted field only at the start of a field, `""` inside one is a quote,
/// and a lone quote closes it.
fn quote_left_open(raw: &[u8], delimiter: u8) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum S {
        FieldStart,
        Unquoted,
        Quoted,
        QuoteInQuoted,
    }
    let mut state = S::FieldStart;
    for &b in raw {
        state = match (state, b) {
            (S::FieldStart, b'"') => S::Quoted,
            (S::Quoted, b'"') => S::QuoteInQuoted,
            (S::Quoted, _) => S::Quoted,
            (S::QuoteInQuoted, b'"') => S::Quoted,
            (_, b'\n' | b'\r') => S::FieldStart,
            (_, d) if d == delimiter => S::FieldStart,
            _ => S::Unquoted,
        };
    }
    state == S::Quoted
}

impl RowReader {
    fn new(src: Source, delimiter: u8) -> RowReader {
        RowReader {
            src,
            core: csv_core::ReaderBuilder::new().delimiter(delimiter).build(),
            fields: vec![0; 1 << 12],
            ends: vec![0; 64],
            len: 0,
            newlines: 0,
            raw: Vec::new(),
            delimiter,
            unterminated: false,
            max_bytes: DEFAULT_MAX_RECORD_BYTES,
            too_long: false,
        }
    }

    /// Reads the next row, returning the 1-based line it starts on, or `None` at the end of the input.
    /// Blank lines between rows are skipped, as `csv_core` would skip them too. A row that ends at the end of
    /// the file inside a quoted field sets `unterminated`.
    fn next_row(&mut self) -> std::io::Result<Option<u64>> {
        loop {
            let input = self.src.fill_buf()?;
            if input.is_empty() {
                break;
            }
            let skip = input
                .iter()
                .position(|&b| b != b'\n' && b != b'\r')
                .unwrap_or(input.len());
            self.newlines += memchr::memchr_iter(b'\n', &input[..skip]).count() as u64;
            let all = skip == input.len();
            self.src.consume(skip);
            if !all {
                break;
            }
        }
        let start = self.newlines + 1;
        let (mut nout, mut nend) = (0, 0);
        self.raw.clear();
        loop {
            let input = self.src.fill_buf()?;
            let at_end = input.is_empty();
            let (res, nin, out, end) =
                self.core
                    .read_record(input, &mut self.fields[nout..], &mut self.ends[nend..]);
            self.newlines += memchr::memchr_iter(b'\n', &input[..nin]).count() as u64;
            self.raw.extend_from_slice(&input[..nin]);
            self.src.consume(nin);
            nout += out;
            nend += end;
            match res {
                csv_core::ReadRecordResult::InputEmpty => {}
                csv_core::ReadRecordResult::OutputFull => {
                    let n = self.fields.len();
                    if n as u64 > self.max_bytes {
                        self.too_long = true;
                        return Ok(Some(start));
                    }
                    self.fields.resize(n * 2, 0);
                }
                csv_core::ReadRecordResult::OutputEndsFull => {
                    let n = self.ends.len();
                    self.ends.resize(n * 2, 0);
                }
                csv_core::ReadRecordResult::Record => {
                    self.unterminated = at_end && quote_left_open(&self.raw, self.delimiter);
                    self.len = nend;
                    return Ok(Some(start));
                }
                csv_core::ReadRecordResult::End => return Ok(None),
            }
        }
    }

    /// Bytes of field data in the current row.
    fn fields_len(&self) -> usize {
        if self.len == 0 {
            0
        } else {
            self.ends[self.len - 1]
        }
    }

    /// The number of fields in the current row.
    fn len(&self) -> usize {
        self.len
    }

    fn field(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.fields[start..self.ends[i]]
    }
}

/// A record longer than `--max-record-bytes` (always stops the run: the rest of it is not read).
fn too_long(file: &Path, line: u64, limit: u64) -> ReadError {
    ReadError::Malformed {
        file: file.to_path_buf(),
        line,
        field: String::new(),
        reason: format!("record longer than {limit} bytes (the limit, --max-record-bytes)"),
    }
}

fn unterminated_reason() -> String {
    "unterminated quote: a quoted field is still open at the end of the file".into()
}

fn open_delimited(
    path: &Path,
    src: Source,
    delimiter: u8,
    options: &ReaderOptions,
) -> Result<Inner, ReadError> {
    let mut rows = RowReader::new(src, delimiter);
    rows.max_bytes = options.max_record_bytes;
    let header_line = rows
        .next_row()
        .map_err(|cause| ReadError::Io {
            file: path.to_path_buf(),
            cause,
        })?
        .ok_or_else(|| ReadError::Malformed {
            file: path.to_path_buf(),
            line: 1,
            field: String::new(),
            reason: "empty file: expected a header row".into(),
        })?;
    if rows.too_long {
        return Err(too_long(path, header_line, options.max_record_bytes));
    }
    if rows.unterminated {
        return Err(ReadError::Malformed {
            file: path.to_path_buf(),
            line: header_line,
            field: String::new(),
            reason: format!("header row: {}", unterminated_reason()),
        });
    }
    // `csv_core` strips a leading UTF-8 byte-order mark, which spreadsheet exports often write.
    let header: Vec<String> = (0..rows.len())
        .map(|i| String::from_utf8_lossy(rows.field(i)).into_owned())
        .collect();
    let find = |name: &str| -> Result<(usize, String), ReadError> {
        header
            .iter()
            .position(|h| h == name)
            .map(|i| (i, name.to_string()))
            .ok_or_else(|| ReadError::Malformed {
                file: path.to_path_buf(),
                line: header_line,
                field: name.to_string(),
                reason: format!("no such column; the header has: {}", header.join(", ")),
            })
    };
    let text_col = find(options.text_column.as_deref().unwrap_or("text"))?;
    let id_col = options.id_column.as_deref().map(find).transpose()?;
    let rank_col = options.rank_field.as_deref().map(find).transpose()?;
    Ok(Inner::Delimited {
        width: header.len(),
        header: rows.raw.clone(),
        rows: Box::new(rows),
        text_col,
        id_col,
        rank_col,
    })
}

// ---------------------------------------------------------------------------------------------------------
// Directories

/// Collects the regular files under `root/rel` (recursively). Symbolic links to files are followed; links to
/// directories are not, so a link cycle cannot make the walk endless; a link that resolves to nothing (dangling,
/// or a loop of links) is an error naming it. Devices, FIFOs and sockets are not documents and are passed over.
fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<(), ReadError> {
    let dir = root.join(rel);
    let io_err = |cause| ReadError::Io {
        file: dir.clone(),
        cause,
    };
    for entry in std::fs::read_dir(&dir).map_err(io_err)? {
        let entry = entry.map_err(io_err)?;
        let kind = entry.file_type().map_err(io_err)?;
        let child = rel.join(entry.file_name());
        if kind.is_dir() {
            walk(root, &child, out)?;
        } else if kind.is_file() {
            out.push(child);
        } else if kind.is_symlink() {
            // A link to a file is a document; a link to a directory is not followed; a dangling link or a link
            // loop is an error, not a silently dropped document.
            match std::fs::metadata(entry.path()) {
                Ok(meta) if meta.is_file() => out.push(child),
                Ok(_) => {}
                Err(cause) => {
                    return Err(ReadError::Io {
                        file: entry.path(),
                        cause,
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// An endless stream of bytes that records when it is dropped (which the reading thread does as it ends).
    struct Endless(Arc<AtomicBool>);

    impl Read for Endless {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            out.fill(b'a');
            Ok(out.len())
        }
    }

    impl Drop for Endless {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn dropping_a_read_ahead_ends_its_thread_before_returning() {
        for _ in 0..20 {
            let ended = Arc::new(AtomicBool::new(false));
            let Ok(mut ahead) = ReadAhead::spawn(Box::new(Endless(Arc::clone(&ended)))) else {
                panic!("the reading thread did not start");
            };
            let mut first = [0u8; 16];
            ahead.read_exact(&mut first).unwrap();
            assert_eq!(first, [b'a'; 16]);
            // The thread is now blocked on a full channel (or decompressing the next chunk).
            drop(ahead);
            assert!(
                ended.load(Ordering::SeqCst),
                "the reading thread was still running after its reader was dropped"
            );
        }
    }
}
