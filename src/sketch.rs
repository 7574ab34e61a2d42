//! Signatures of a corpus to files: read a corpus, shingle and sign every document, write the signatures as CSV,
//! NPY or (feature `parquet`) Parquet (`lshbench sketch` is the command-line front end, in `cli::sketch`).
//!
//! Output order equals input order and the bytes written do not depend on the thread count (the work runs on the
//! current rayon pool) or the instruction set. Memory holds one batch of text plus, for `.npy`, the n x k
//! signature matrix (NPY needs the row count in its header), and for `.parquet` at most one row group.

use crate::arch::Isa;
use crate::corpus::{CorpusReader, ReadError, ReadStats};
use crate::exec::Progress;
use crate::kernel::Kernel;
use crate::output::{AtomicFile, OutputError};
use crate::pipeline::{SignedBatch, sketch_corpus};
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
        slots: Vec<u32>,
        /// Below 32: write the slots packed, `crate::kernel::bbit::pack`'s layout, as an n x words uint64 array.
        bits: u32,
    },
    #[cfg(feature = "parquet")]
    Parquet(parquet::ParquetSink),
}

/// Where [`sketch`] writes the signatures: a `.csv` file, a `.npy` file with its `.ids.csv` beside it, or a
/// `.parquet` file. An empty document's row is all 4294967295 (`u32::MAX`).
pub struct SignatureWriter {
    path: PathBuf,
    num_perm: usize,
    sink: Sink,
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

/// Flushes a CSV writer and renames its file into place.
fn csv_commit(w: CsvOut, path: &Path) -> Result<(), SketchError> {
    let file = w.into_inner().map_err(|e| OutputError::Write {
        path: path.to_path_buf(),
        cause: e.into_error(),
    })?;
    Ok(file.commit()?)
}

impl SignatureWriter {
    /// Creates the output for signatures of `num_perm` slots at `path` (format by extension, see
    /// [`SignatureFormat`]) and writes its header. For `.npy` the ids file is created now and the array itself
    /// when the writer finishes.
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
                Sink::Npy {
                    ids_path,
                    ids,
                    rows: 0,
                    slots: Vec::new(),
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
        })
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
                slots,
                ..
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
                slots.extend_from_slice(&batch.signatures);
            }
            #[cfg(feature = "parquet")]
            Sink::Parquet(sink) => sink.write(batch).map_err(|cause| OutputError::Write {
                path: self.path.clone(),
                cause,
            })?,
        }
        Ok(())
    }

    /// Flushes the CSV, or writes the `.npy` array (and flushes its ids file).
    pub fn finish(self) -> Result<(), SketchError> {
        let (path, num_perm) = (self.path, self.num_perm);
        match self.sink {
            Sink::Csv(w) => csv_commit(w, &path),
            Sink::Npy {
                ids_path,
                ids,
                rows,
                slots,
                bits,
            } => {
                use npyz::WriterBuilder;
                let mut out = AtomicFile::create(&path)?;
                let write = |out: &mut AtomicFile| -> std::io::Result<()> {
                    if bits < 32 {
                        use crate::kernel::bbit;
                        let mut packed =
                            Vec::with_capacity(rows as usize * bbit::words(num_perm, bits));
                        for sig in slots.chunks(num_perm.max(1)) {
                            bbit::pack(sig, bits, &mut packed);
                        }
                        let mut writer = npyz::WriteOptions::new()
                            .default_dtype()
                            .shape(&[rows, bbit::words(num_perm, bits) as u64])
                            .writer(&mut *out)
                            .begin_nd()?;
                        writer.extend(packed)?;
                        writer.finish()?;
                    } else {
                        // npyz writes the header; the slots follow as one run of little-endian u32 (npyz's
                        // own writer takes them one call per slot, several ms for SpamAssassin's 774,000).
                        let dtype = npyz::DType::Plain("<u4".parse().expect("a valid type string"));
                        npyz::WriteOptions::new_header_only()
                            .dtype(dtype)
                            .shape(&[rows, num_perm as u64])
                            .writer(&mut *out)
                            .write_header_only()?;
                        let mut bytes = Vec::with_capacity(1 << 16);
                        for chunk in slots.chunks(1 << 14) {
                            bytes.clear();
                            bytes.extend(chunk.iter().flat_map(|s| s.to_le_bytes()));
                            out.write_all(&bytes)?;
                        }
                    }
                    out.flush()
                };
                write(&mut out).map_err(|cause| out.write_error(cause))?;
                // The ids first, then the array: a reader that finds the array finds its ids too.
                csv_commit(ids, &ids_path)?;
                Ok(out.commit()?)
            }
            #[cfg(feature = "parquet")]
            Sink::Parquet(sink) => Ok(sink.finish(&path)?),
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

impl SketchReport {
    /// The run summary `lshbench sketch` prints on stderr (one line per fact, newline-terminated).
    pub fn summary(&self) -> String {
        format!(
            "{}\nsketched {} documents, {} of them empty (their rows are all 4294967295)\n\
             kernel {} on {}, k = {}, seed {}, shingle {}, {} threads: {:.3} s, {:.1} MB/s of text\nwrote {}\n",
            self.read.report(),
            self.documents,
            self.empty,
            self.kernel,
            self.isa,
            self.num_perm,
            self.seed,
            self.shingle,
            self.threads,
            self.seconds,
            self.bytes as f64 / self.seconds / 1e6,
            self.output.display()
        )
    }
}

/// Reads the whole corpus, signs every document with `kernel` over `shingler`'s windows, and writes the
/// signatures to `output` in input order, on the current rayon pool. `progress` counts documents.
pub fn sketch(
    reader: &mut CorpusReader,
    shingler: &Shingler,
    kernel: &dyn Kernel,
    mut output: SignatureWriter,
    progress: &dyn Progress,
) -> Result<SketchReport, SketchError> {
    let started = Instant::now();
    let (mut documents, mut empty, mut bytes) = (0u64, 0u64, 0u64);
    sketch_corpus(reader, shingler, kernel, |batch| {
        documents += batch.docs.len() as u64;
        empty += batch.empty.iter().filter(|&&e| e).count() as u64;
        bytes += batch.docs.iter().map(|d| d.text.len() as u64).sum::<u64>();
        progress.inc(batch.docs.len() as u64);
        output.write_batch(batch)
    })?;
    let path = output.path.clone();
    output.finish()?;
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
