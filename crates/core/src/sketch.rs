//! Signatures of a corpus to files: read a corpus, shingle and sign every document, write the signatures as CSV,
//! NPY or (feature `parquet`) Parquet (`lshbench sketch` is the command-line front end, in `cli::sketch`).
//!
//! Output order equals input order and the bytes written do not depend on the thread count (the work runs on the
//! current rayon pool) or the instruction set. Reading and signing each have a thread, and writing a third one
//! where reading only parses ([`sketch`]). Memory holds a few batches of text and signatures, and for `.parquet`
//! at most one row group. A `.npy` array streams to its file behind a placeholder header, which is
//! rewritten with the row count at the end; only where the output cannot be rewritten (a device or FIFO) is
//! the n x k matrix kept in memory until then.

use crate::arch::Isa;
use crate::corpus::{CorpusReader, Document, ReadError, ReadStats};
use crate::exec::{Progress, Tuning};
use crate::kernel::Kernel;
use crate::output::{AtomicFile, OutputError};
use crate::pipeline::{SignedBatch, sketch_corpus_on};
use crate::shingle::{ShingleKind, Shingler};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[cfg(feature = "parquet")]
pub mod parquet;

/// Why sketching a corpus failed.
#[derive(Debug, thiserror::Error)]
pub enum SketchError {
    /// The corpus could not be read (the message names file, line and field).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The output path's extension is not one of the formats of this build (`.csv`, `.npy`, and `.parquet`
    /// with the `parquet` feature).
    #[cfg_attr(
        feature = "parquet",
        error("--output {}: the extension must be .csv, .npy or .parquet", path.display())
    )]
    #[cfg_attr(
        not(feature = "parquet"),
        error("--output {}: the extension must be .csv or .npy (.parquet needs the `parquet` feature)", path.display())
    )]
    Extension {
        /// The refused output path.
        path: PathBuf,
    },
    /// An output file could not be created, written or renamed into place (the message names it).
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// The file format of a [`SignatureWriter`], decided by the output's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureFormat {
    /// `.csv`: a header `id,h0,...,h{k-1}`, then one row per document.
    Csv,
    /// `.npy`: an n x k uint32 array, with the ids in `<stem>.ids.csv` beside it (columns `row,id,empty`).
    Npy,
    /// `.parquet` (feature `parquet`): columns `id` (utf8), `signature` (fixed-size list of k uint32) and
    /// `empty` (bool), one row per document; see [`parquet`].
    #[cfg(feature = "parquet")]
    Parquet,
}

impl SignatureFormat {
    /// The format `path`'s extension names, if any.
    pub fn of(path: &Path) -> Option<SignatureFormat> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => Some(SignatureFormat::Csv),
            Some("npy") => Some(SignatureFormat::Npy),
            #[cfg(feature = "parquet")]
            Some("parquet") => Some(SignatureFormat::Parquet),
            _ => None,
        }
    }
}

/// `sigs.npy` -> `sigs.ids.csv`.
pub fn ids_path(npy: &Path) -> PathBuf {
    npy.with_extension("ids.csv")
}

type CsvOut = csv::Writer<AtomicFile>;

enum Sink {
    Csv(CsvOut),
    Npy {
        ids_path: PathBuf,
        ids: CsvOut,
        rows: u64,
        array: NpyArray,
        /// Below 32: write the slots packed, `crate::kernel::bbit::pack`'s layout, as an n x words uint64 array.
        bits: u32,
    },
    #[cfg(feature = "parquet")]
    Parquet(parquet::ParquetSink),
}

/// Where the `.npy` array goes while the batches come.
enum NpyArray {
    /// A regular file: the array streams to its temporary file after a placeholder header of the final header's
    /// size (see [`npy_header`]); `bytes` is the reused buffer a batch's slots are encoded in.
    Streamed {
        out: AtomicFile,
        placeholder: usize,
        bytes: Vec<u8>,
    },
    /// A device or FIFO, which cannot be rewritten: the encoded array is kept and written after the header at
    /// the end.
    Kept { out: AtomicFile, body: Vec<u8> },
}

/// The `.npy` header (format version 1.0) of a C-order `rows` x `cols` array of `dtype` (`<u4` or `<u8`), as
/// npyz writes it. Its size does not depend on `rows`: the magic string, version, length and dictionary come to
/// 70 bytes plus the digits of `rows` and `cols`, and npyz pads the whole to a multiple of 64 bytes, so every
/// shape whose element count fits a `u64` (at most 20 digits each) gives 128 bytes
/// (`npy_header_size_does_not_depend_on_rows`).
fn npy_header(rows: u64, cols: u64, dtype: &str) -> std::io::Result<Vec<u8>> {
    use npyz::WriterBuilder;
    let dtype = npyz::DType::Plain(dtype.parse().map_err(std::io::Error::other)?);
    let mut header = Vec::with_capacity(128);
    npyz::WriteOptions::new_header_only()
        .dtype(dtype)
        .shape(&[rows, cols])
        .writer(&mut header)
        .write_header_only()?;
    Ok(header)
}

/// The `.npy` dtype and columns of signatures of `num_perm` slots at `bits` bits per slot.
fn npy_layout(num_perm: usize, bits: u32) -> (&'static str, u64) {
    if bits < 32 {
        ("<u8", crate::kernel::bbit::words(num_perm, bits) as u64)
    } else {
        ("<u4", num_perm as u64)
    }
}

/// Appends the little-endian bytes of `sigs` (whole signatures of `num_perm` slots) to `bytes`: the slots as
/// `u32`, or below 32 bits each signature packed ([`crate::kernel::bbit::pack`]) into `u64` words.
fn npy_encode(sigs: &[u32], num_perm: usize, bits: u32, bytes: &mut Vec<u8>) {
    if bits < 32 {
        use crate::kernel::bbit;
        let mut packed = Vec::with_capacity(bbit::words(num_perm, bits));
        for sig in sigs.chunks(num_perm.max(1)) {
            packed.clear();
            bbit::pack(sig, bits, &mut packed);
            bytes.extend(packed.iter().flat_map(|w| w.to_le_bytes()));
        }
    } else {
        bytes.extend(sigs.iter().flat_map(|s| s.to_le_bytes()));
    }
}

/// Where [`sketch`] writes the signatures: a `.csv` file, a `.npy` file with its `.ids.csv` beside it, or a
/// `.parquet` file. An empty document's row is all 4294967295 (`u32::MAX`).
pub struct SignatureWriter {
    path: PathBuf,
    num_perm: usize,
    sink: Sink,
    /// Replace an existing file by exchanging names ([`AtomicFile::commit_exchanging`]).
    exchange: bool,
}

fn csv_create(path: &Path) -> Result<CsvOut, SketchError> {
    Ok(csv::Writer::from_writer(AtomicFile::create(path)?))
}

fn write_err(path: &Path) -> impl Fn(csv::Error) -> SketchError + '_ {
    |e| {
        SketchError::Output(OutputError::Write {
            path: path.to_path_buf(),
            cause: e.into(),
        })
    }
}

/// Flushes a CSV writer and renames its file into place (exchanging names with `exchange`).
fn csv_commit(w: CsvOut, path: &Path, exchange: bool) -> Result<(), SketchError> {
    let file = w.into_inner().map_err(|e| OutputError::Write {
        path: path.to_path_buf(),
        cause: e.into_error(),
    })?;
    Ok(file.commit_exchanging(exchange)?)
}

impl SignatureWriter {
    /// Creates the output for signatures of `num_perm` slots at `path` (format by extension, see
    /// [`SignatureFormat`]) and writes its header. For `.npy` both files are created now, the array with a
    /// placeholder header that [`SignatureWriter::finish`] rewrites with the row count.
    pub fn create(path: &Path, num_perm: usize) -> Result<SignatureWriter, SketchError> {
        SignatureWriter::create_bits(path, num_perm, 32)
    }

    /// As [`SignatureWriter::create`], for signatures cut to `bits` bits per slot (`--bits`): CSV holds the
    /// b-bit values; below 32 bits `.npy` holds an n x `ceil(k b / 64)` uint64 array of packed signatures
    /// (layout in [`crate::kernel::bbit`]).
    pub fn create_bits(
        path: &Path,
        num_perm: usize,
        bits: u32,
    ) -> Result<SignatureWriter, SketchError> {
        let sink = match SignatureFormat::of(path) {
            Some(SignatureFormat::Csv) => {
                let mut w = csv_create(path)?;
                let mut row = Vec::with_capacity(num_perm + 1);
                row.push("id".to_string());
                row.extend((0..num_perm).map(|i| format!("h{i}")));
                w.write_record(&row).map_err(write_err(path))?;
                Sink::Csv(w)
            }
            Some(SignatureFormat::Npy) => {
                let ids_path = ids_path(path);
                let mut ids = csv_create(&ids_path)?;
                ids.write_record(["row", "id", "empty"])
                    .map_err(write_err(&ids_path))?;
                let mut out = AtomicFile::create(path)?;
                let array = if out.in_place() {
                    NpyArray::Kept {
                        out,
                        body: Vec::new(),
                    }
                } else {
                    let (dtype, cols) = npy_layout(num_perm, bits);
                    let placeholder = npy_header(0, cols, dtype)
                        .and_then(|h| out.write_all(&h).map(|()| h.len()))
                        .map_err(|cause| out.write_error(cause))?;
                    NpyArray::Streamed {
                        out,
                        placeholder,
                        bytes: Vec::new(),
                    }
                };
                Sink::Npy {
                    ids_path,
                    ids,
                    rows: 0,
                    array,
                    bits,
                }
            }
            #[cfg(feature = "parquet")]
            Some(SignatureFormat::Parquet) => {
                Sink::Parquet(parquet::ParquetSink::create(path, num_perm)?)
            }
            None => {
                return Err(SketchError::Extension {
                    path: path.to_path_buf(),
                });
            }
        };
        Ok(SignatureWriter {
            path: path.to_path_buf(),
            num_perm,
            sink,
            exchange: false,
        })
    }

    /// This writer with the file tuning `tuning` opts into ([`Tuning::exchange_rename`]).
    pub fn tuned(mut self, tuning: &Tuning) -> SignatureWriter {
        self.exchange = tuning.exchange_rename;
        self
    }

    /// The signature file's path (for `.npy`, the array; the ids are at [`ids_path`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one signed batch, in order.
    pub fn write_batch(&mut self, batch: &SignedBatch) -> Result<(), SketchError> {
        let num_perm = self.num_perm;
        match &mut self.sink {
            Sink::Csv(w) => {
                let mut buf = itoa::Buffer::new();
                let mut row = || -> csv::Result<()> {
                    for (i, doc) in batch.docs.iter().enumerate() {
                        w.write_field(&doc.id)?;
                        for &slot in batch.signature(i, num_perm) {
                            w.write_field(buf.format(slot))?;
                        }
                        w.write_record(None::<&[u8]>)?;
                    }
                    Ok(())
                };
                row().map_err(write_err(&self.path))?;
            }
            Sink::Npy {
                ids_path,
                ids,
                rows,
                array,
                bits,
            } => {
                for (i, doc) in batch.docs.iter().enumerate() {
                    ids.write_record([
                        rows.to_string().as_str(),
                        &doc.id,
                        if batch.empty[i] { "1" } else { "0" },
                    ])
                    .map_err(write_err(ids_path))?;
                    *rows += 1;
                }
                match array {
                    NpyArray::Streamed { out, bytes, .. } => {
                        bytes.clear();
                        npy_encode(&batch.signatures, num_perm, *bits, bytes);
                        out.write_all(bytes)
                            .map_err(|cause| out.write_error(cause))?;
                    }
                    NpyArray::Kept { body, .. } => {
                        npy_encode(&batch.signatures, num_perm, *bits, body)
                    }
                }
            }
            #[cfg(feature = "parquet")]
            Sink::Parquet(sink) => sink.write(batch).map_err(|cause| OutputError::Write {
                path: self.path.clone(),
                cause,
            })?,
        }
        Ok(())
    }

    /// Flushes the CSV, or completes the `.npy` array (its header rewritten with the row count, or on a device
    /// or FIFO the whole array written) and its ids file; then renames the files into place, the ids first.
    pub fn finish(self) -> Result<(), SketchError> {
        let (path, num_perm, exchange) = (self.path, self.num_perm, self.exchange);
        match self.sink {
            Sink::Csv(w) => csv_commit(w, &path, exchange),
            Sink::Npy {
                ids_path,
                ids,
                rows,
                array,
                bits,
            } => {
                let (dtype, cols) = npy_layout(num_perm, bits);
                let header = npy_header(rows, cols, dtype);
                let out = match array {
                    NpyArray::Streamed {
                        mut out,
                        placeholder,
                        ..
                    } => {
                        let rewrite = |out: &mut AtomicFile| -> std::io::Result<()> {
                            let header = header?;
                            if header.len() != placeholder {
                                // Not reached (see npy_header); an error, not a corrupt file, if it were.
                                return Err(std::io::Error::other(format!(
                                    "the .npy header grew from {placeholder} to {} bytes",
                                    header.len()
                                )));
                            }
                            out.overwrite_start(&header)?;
                            out.flush()
                        };
                        rewrite(&mut out).map_err(|cause| out.write_error(cause))?;
                        out
                    }
                    NpyArray::Kept { mut out, body } => {
                        let write = |out: &mut AtomicFile| -> std::io::Result<()> {
                            out.write_all(&header?)?;
                            out.write_all(&body)?;
                            out.flush()
                        };
                        write(&mut out).map_err(|cause| out.write_error(cause))?;
                        out
                    }
                };
                // The ids first, then the array: a reader that finds the array finds its ids too.
                csv_commit(ids, &ids_path, exchange)?;
                Ok(out.commit_exchanging(exchange)?)
            }
            #[cfg(feature = "parquet")]
            Sink::Parquet(sink) => Ok(sink.finish(&path, exchange)?),
        }
    }
}

/// What [`sketch`] did.
#[derive(Clone, Debug)]
pub struct SketchReport {
    /// Documents sketched (one output row each).
    pub documents: u64,
    /// Documents whose shingle set was empty (their rows are all `u32::MAX`).
    pub empty: u64,
    /// Bytes of text read.
    pub bytes: u64,
    /// Wall-clock seconds of reading, signing and writing.
    pub seconds: f64,
    /// Worker threads of the rayon pool the work ran on.
    pub threads: usize,
    /// The kernel's registry name.
    pub kernel: &'static str,
    /// The instruction set the kernel ran on.
    pub isa: Isa,
    /// k, slots per signature.
    pub num_perm: usize,
    /// The shingle kind.
    pub shingle: ShingleKind,
    /// The shingle hash seed (the kernel's seed too, when built from the same flags).
    pub seed: u64,
    /// The reader's counts (records, rejections, UTF-8 repairs).
    pub read: ReadStats,
    /// The signature file written.
    pub output: PathBuf,
}

/// Groups of signed batches queued for the writing thread of [`sketch`], at most.
const WRITE_QUEUE: usize = 2;
/// Signed batches per group sent to the writing thread: one wake-up of that thread per group rather than per
/// batch (a wake-up is an interrupt between cores, a few microseconds of the signing thread's time).
const WRITE_GROUP: usize = 4;

/// Why [`sketch`]'s signing stopped early.
enum Stop {
    /// Reading failed.
    Read(ReadError),
    /// Writing on the signing thread failed.
    Write(SketchError),
    /// The writing thread stopped (on an error it reports).
    Writer,
}

impl From<ReadError> for Stop {
    fn from(e: ReadError) -> Stop {
        Stop::Read(e)
    }
}

/// Where [`sketch`] writes the signed batches: on the signing thread, or through a channel to a writing thread.
enum Writing<'scope> {
    Here(Box<SignatureWriter>),
    Thread {
        tx: std::sync::mpsc::SyncSender<Vec<SignedBatch>>,
        writer: std::thread::ScopedJoinHandle<'scope, Result<SignatureWriter, SketchError>>,
        /// Batches not yet sent, fewer than `WRITE_GROUP`.
        group: Vec<SignedBatch>,
    },
}

/// What a signed batch needs to be written (ids, signatures, empty flags), taken out of it; the texts stay, to
/// go back to the reading thread and be freed there.
fn detach(batch: &mut SignedBatch) -> SignedBatch {
    let docs = batch
        .docs
        .iter_mut()
        .map(|d| Document {
            index: d.index,
            id: std::mem::take(&mut d.id),
            text: String::new(),
        })
        .collect();
    SignedBatch {
        docs,
        signatures: std::mem::take(&mut batch.signatures),
        empty: std::mem::take(&mut batch.empty),
    }
}

/// Reads the whole corpus, signs every document with `kernel` over `shingler`'s windows, and writes the
/// signatures to `output` in input order. Reading runs on a thread of its own
/// ([`crate::pipeline::sketch_corpus`]) and signing on the current rayon pool. Where reading only parses (a
/// plain file: its thread leaves part of a core idle), writing runs on a third thread, at most `WRITE_QUEUE`
/// (2) groups of `WRITE_GROUP` (4) batches behind signing, so that the signing thread only signs; where reading
/// also decodes (gzip, Parquet: its threads keep their cores busy), a third thread would take time from them,
/// and the signing thread writes each batch itself. With a plain file and exactly one CPU beside the signing
/// threads and [`Tuning::bind_helpers`], the reading and writing threads are bound to that CPU, so that
/// neither takes time from signing, and poll their channels for up to 2 ms before
/// sleeping on them, so that the signing thread seldom has a sleeping thread to wake. Both threads are scoped
/// to the call: none is left running when it returns. A failed write stops reading and signing and is the error
/// returned. `progress` counts documents as they are signed.
pub fn sketch(
    reader: &mut CorpusReader,
    shingler: &Shingler,
    kernel: &dyn Kernel,
    output: SignatureWriter,
    progress: &dyn Progress,
    tuning: &Tuning,
) -> Result<SketchReport, SketchError> {
    let started = Instant::now();
    let (mut documents, mut empty, mut bytes) = (0u64, 0u64, 0u64);
    let path = output.path.clone();
    // Reading and writing together take less than a core here: with one CPU to spare beside the signing
    // threads, both may go to it (Tuning::helper_cpu).
    let helper = if reader.decodes() {
        None
    } else {
        tuning.helper_cpu(rayon::current_num_threads())
    };
    std::thread::scope(|scope| -> Result<(), SketchError> {
        let mut writing = if reader.decodes() {
            Writing::Here(Box::new(output))
        } else {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<SignedBatch>>(WRITE_QUEUE);
            let mut output = output;
            Writing::Thread {
                tx,
                writer: scope.spawn(move || -> Result<SignatureWriter, SketchError> {
                    // Bound, it polls for the next group rather than sleep (exec::recv_polling).
                    let poll = helper.is_some_and(crate::exec::bind_current_thread);
                    while let Ok(group) = crate::exec::recv_polling(&rx, poll) {
                        for batch in &group {
                            output.write_batch(batch)?;
                        }
                    }
                    Ok(output)
                }),
                group: Vec::with_capacity(WRITE_GROUP),
            }
        };
        let signed = sketch_corpus_on(reader, shingler, kernel, helper, |batch| {
            documents += batch.docs.len() as u64;
            empty += batch.empty.iter().filter(|&&e| e).count() as u64;
            bytes += batch.docs.iter().map(|d| d.text.len() as u64).sum::<u64>();
            progress.inc(batch.docs.len() as u64);
            match &mut writing {
                Writing::Here(output) => output.write_batch(batch).map_err(Stop::Write),
                // A send fails only when the writer stopped on an error, which its join below reports.
                Writing::Thread { tx, group, .. } => {
                    group.push(detach(batch));
                    if group.len() < WRITE_GROUP {
                        return Ok(());
                    }
                    let full = std::mem::replace(group, Vec::with_capacity(WRITE_GROUP));
                    tx.send(full).map_err(|_| Stop::Writer)
                }
            }
        });
        let written = match writing {
            Writing::Here(output) => Ok(*output),
            Writing::Thread { tx, writer, group } => {
                // The last batches. A failed send means the writer stopped on an error, which its join reports.
                if !group.is_empty() {
                    let _ = tx.send(group);
                }
                // Closing the channel ends the writer's loop.
                drop(tx);
                writer
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }
        };
        match (signed, written) {
            // The writer's error is the cause of a failed send, and comes first otherwise too.
            (_, Err(e)) => Err(e),
            (Err(Stop::Read(e)), Ok(_)) => Err(e.into()),
            (Err(Stop::Write(e)), Ok(_)) => Err(e),
            (Err(Stop::Writer), Ok(_)) => unreachable!("the writer stopped without an error"),
            (Ok(()), Ok(output)) => output.finish(),
        }
    })?;
    Ok(SketchReport {
        documents,
        empty,
        bytes,
        seconds: started.elapsed().as_secs_f64(),
        threads: rayon::current_num_threads(),
        kernel: kernel.name(),
        isa: kernel.isa(),
        num_perm: kernel.num_perm(),
        shingle: shingler.kind,
        seed: shingler.seed,
        read: reader.stats().clone(),
        output: path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of `n` documents with signatures of `k` slots drawn from `seed`.
    fn batch(first: u64, n: usize, k: usize, seed: u64) -> SignedBatch {
        use rand_xoshiro::Xoshiro256PlusPlus;
        use rand_xoshiro::rand_core::{Rng, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        SignedBatch {
            docs: (0..n as u64)
                .map(|i| Document {
                    index: first + i,
                    id: format!("doc-{}", first + i),
                    text: String::new(),
                })
                .collect(),
            signatures: (0..n * k).map(|_| rng.next_u32()).collect(),
            empty: (0..n).map(|i| i % 5 == 3).collect(),
        }
    }

    /// What the writer wrote before the array streamed: npyz's own writer over the whole matrix (the `u32`
    /// slots, or below 32 bits each signature packed into `u64` words).
    fn npyz_reference(slots: &[u32], rows: u64, k: usize, bits: u32) -> Vec<u8> {
        use npyz::WriterBuilder;
        let mut out = Vec::new();
        if bits < 32 {
            let mut packed = Vec::new();
            for sig in slots.chunks(k.max(1)) {
                crate::kernel::bbit::pack(sig, bits, &mut packed);
            }
            let words = crate::kernel::bbit::words(k, bits) as u64;
            let mut w = npyz::WriteOptions::new()
                .default_dtype()
                .shape(&[rows, words])
                .writer(&mut out)
                .begin_nd()
                .unwrap();
            w.extend(packed).unwrap();
            w.finish().unwrap();
        } else {
            let mut w = npyz::WriteOptions::new()
                .default_dtype()
                .shape(&[rows, k as u64])
                .writer(&mut out)
                .begin_nd()
                .unwrap();
            w.extend(slots.iter().copied()).unwrap();
            w.finish().unwrap();
        }
        out
    }

    /// The streamed `.npy` (placeholder header, batches written as they come, header rewritten at the end) is
    /// byte for byte what npyz writes from the whole matrix, for 32-bit and packed slots, no rows, one row and
    /// rows past the file buffer's size; the ids file lists every row.
    #[test]
    fn streamed_npy_equals_npyz_over_the_whole_matrix() {
        let dir = tempfile::tempdir().unwrap();
        for (k, bits) in [(128, 32), (7, 32), (128, 8), (100, 2), (33, 16), (1, 1)] {
            for sizes in [vec![], vec![1], vec![3, 0, 250, 1], vec![2048, 2048, 17]] {
                let path = dir.path().join("sigs.npy");
                let mut w = SignatureWriter::create_bits(&path, k, bits).unwrap();
                let (mut slots, mut first) = (Vec::new(), 0u64);
                for (b, &n) in sizes.iter().enumerate() {
                    let batch = batch(first, n, k, b as u64 * 31 + k as u64);
                    w.write_batch(&batch).unwrap();
                    slots.extend_from_slice(&batch.signatures);
                    first += n as u64;
                }
                w.finish().unwrap();
                let got = std::fs::read(&path).unwrap();
                let want = npyz_reference(&slots, first, k, bits);
                assert!(got == want, "k {k}, bits {bits}, batches {sizes:?}");
                let ids = std::fs::read_to_string(ids_path(&path)).unwrap();
                assert_eq!(
                    ids.lines().count() as u64,
                    first + 1,
                    "k {k}, batches {sizes:?}"
                );
            }
        }
    }

    /// The header's size does not depend on the row count (what the placeholder rests on), for every number of
    /// row digits an array of `u64` elements can have (npyz multiplies rows by columns).
    #[test]
    fn npy_header_size_does_not_depend_on_rows() {
        for (dtype, cols) in [("<u4", 1u64), ("<u4", 128), ("<u8", 3), ("<u4", 1 << 40)] {
            let size = npy_header(0, cols, dtype).unwrap().len();
            assert_eq!(size, 128);
            let most = u64::MAX / cols;
            // 1, 10, 100, ... up to `most`, and one less than each.
            let powers = std::iter::successors(Some(1u64), |r| r.checked_mul(10));
            for rows in powers.take_while(|&r| r <= most) {
                assert_eq!(npy_header(rows, cols, dtype).unwrap().len(), size);
                assert_eq!(npy_header(rows - 1, cols, dtype).unwrap().len(), size);
            }
            assert_eq!(npy_header(most, cols, dtype).unwrap().len(), size);
        }
    }

    /// To a FIFO, which cannot be rewritten, the array is kept and written whole at the end: the bytes read
    /// from the FIFO are those of a regular file.
    #[cfg(target_os = "linux")]
    #[test]
    fn npy_to_a_fifo_equals_npy_to_a_file() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let (file, fifo) = (dir.path().join("file.npy"), dir.path().join("fifo.npy"));
        let name = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        for (path, bits) in [(&fifo, 4), (&file, 4)] {
            let mut w = SignatureWriter::create_bits(path, 64, bits).unwrap();
            w.write_batch(&batch(0, 300, 64, 5)).unwrap();
            w.write_batch(&batch(300, 9, 64, 6)).unwrap();
            w.finish().unwrap();
        }
        let through_fifo = reader.join().unwrap();
        assert_eq!(through_fifo, std::fs::read(&file).unwrap());
        assert_eq!(
            through_fifo,
            npyz_reference(
                &[
                    batch(0, 300, 64, 5).signatures,
                    batch(300, 9, 64, 6).signatures
                ]
                .concat(),
                309,
                64,
                4
            )
        );
    }
}
