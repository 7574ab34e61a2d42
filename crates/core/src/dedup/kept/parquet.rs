//! The kept pass of a Parquet corpus: a Parquet file (or shards of complete files) holding the input's kept
//! rows with every column, streamed batch by batch.
//!
//! Rows and documents: the corpus reader, reopened in raw-capture mode, reads the text (and id) columns as in the
//! first pass and tells each document's row ordinal ([`RawRecord::Row`]); a row it rejects (a null text, bad
//! UTF-8 under `--strict`, with `--on-error skip`) is no document and is not copied. A second reader decodes
//! every column (`corpus::parquet::open_all_columns`, with the same checks of the file as the corpus
//! reader); each of its batches is filtered (`arrow_select::filter::filter_record_batch`) by the keep flags of
//! the documents whose rows it holds.
//!
//! Schema: the Arrow schema the Parquet schema gives, every column (nested ones included). The file's key-value
//! metadata is copied as stored, the `ARROW:schema` an Arrow writer embeds included (copied, not decoded: it
//! is what a reader applies to the types, such as a time zone or a large string type); so the output read
//! back has the input's Arrow schema and metadata.
//!
//! Compression: the codec of the input's first column chunk when it is Snappy, gzip, Zstandard or none, else
//! (LZ4, Brotli, an input without rows) Zstandard. A row group is closed once it holds [`ROW_GROUP_BYTES`],
//! so memory holds one input batch and at most that much of the output.
//!
//! Shards: a shard is closed after the batch that brings its size (bytes written plus the memory of the row
//! group in progress, an overestimate of the encoded size) to the shard size, so its granularity is one input
//! batch of 1024 rows.

use super::stream::{Docs, Encoded, Staged, finish_shard};
use super::target::{
    KeptError, KeptStats, KeptTarget, create_error, is_directory_target, shard_extension,
    write_error,
};
use crate::corpus::{InputFormat, RawRecord};
use crate::output::AtomicFile;
use arrow_array::BooleanArray;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Bytes of encoded data a row group of the output may buffer before it is written out.
pub const ROW_GROUP_BYTES: usize = 64 << 20;

/// The codec of the output (see the module docs).
fn codec(input: Option<Compression>) -> Compression {
    match input {
        Some(c @ (Compression::UNCOMPRESSED | Compression::SNAPPY | Compression::GZIP(_))) => c,
        Some(Compression::ZSTD(level)) => Compression::ZSTD(level),
        _ => Compression::ZSTD(ZstdLevel::default()),
    }
}

fn parquet_error(path: &Path, e: impl std::fmt::Display) -> KeptError {
    write_error(
        path,
        std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
    )
}

/// One output file being written: the single target, or the current shard.
// Boxed: the writers are large and of unequal size.
enum Out {
    Single(Box<ArrowWriter<Encoded<AtomicFile>>>),
    Shard(Box<ArrowWriter<BufWriter<File>>>, PathBuf),
}

impl Out {
    fn write(&mut self, batch: &arrow_array::RecordBatch) -> parquet::errors::Result<()> {
        match self {
            Out::Single(w) => w.write(batch),
            Out::Shard(w, _) => w.write(batch),
        }
    }

    /// Closes the row group once it holds [`ROW_GROUP_BYTES`] in memory; returns the size of the file so far:
    /// the bytes written plus the memory of the row group in progress (the writer's estimate of its encoded
    /// size counts only finished pages, so a row group of small pages would look empty).
    fn bound(&mut self) -> parquet::errors::Result<u64> {
        fn bound<W: Write + Send>(w: &mut ArrowWriter<W>) -> parquet::errors::Result<u64> {
            if w.memory_size() >= ROW_GROUP_BYTES {
                w.flush()?;
            }
            Ok((w.bytes_written() + w.memory_size()) as u64)
        }
        match self {
            Out::Single(w) => bound(w),
            Out::Shard(w, _) => bound(w),
        }
    }

    /// Writes the footer and closes the file (the single target is renamed into place).
    fn close(self, target: &Path) -> Result<(), KeptError> {
        match self {
            Out::Single(w) => {
                let encoded = (*w).into_inner().map_err(|e| parquet_error(target, e))?;
                let file = encoded
                    .finish()
                    .map_err(|cause| write_error(target, cause))?;
                file.commit()?;
                Ok(())
            }
            Out::Shard(w, path) => {
                let file = (*w).into_inner().map_err(|e| parquet_error(&path, e))?;
                finish_shard(file, &path)
            }
        }
    }
}

/// The kept pass of a Parquet corpus (see the module docs).
pub(super) fn write(mut docs: Docs<'_>, target: &KeptTarget) -> Result<KeptStats, KeptError> {
    let input = docs.reader.path().to_path_buf();
    let all = crate::corpus::parquet::open_all_columns(&input)?;
    let props = WriterProperties::builder()
        .set_compression(codec(all.compression))
        .set_key_value_metadata((!all.key_value.is_empty()).then(|| all.key_value.clone()))
        .build();
    // The embedded `ARROW:schema` is the input's, copied with the rest of the metadata.
    let options = || {
        ArrowWriterOptions::new()
            .with_properties(props.clone())
            .with_skip_arrow_metadata(true)
    };
    let sharded = is_directory_target(&target.path, false);
    let staged = if sharded {
        Some(Staged::new(&target.path)?)
    } else {
        None
    };
    let ext = shard_extension(InputFormat::Parquet, false);
    let mut stats = KeptStats::default();
    let open = |stats: &mut KeptStats| -> Result<Out, KeptError> {
        stats.files += 1;
        match &staged {
            None => {
                let file = AtomicFile::create(&target.path)?;
                let w = Encoded::new(file, crate::corpus::reader::has_gz_extension(&target.path));
                ArrowWriter::try_new_with_options(w, all.schema.clone(), options())
                    .map(|w| Out::Single(Box::new(w)))
                    .map_err(|e| parquet_error(&target.path, e))
            }
            Some(staged) => {
                let path = staged.shard(stats.files - 1, &ext);
                let file = File::create(&path).map_err(|cause| create_error(&path, cause))?;
                ArrowWriter::try_new_with_options(
                    BufWriter::with_capacity(1 << 20, file),
                    all.schema.clone(),
                    options(),
                )
                .map(|w| Out::Shard(Box::new(w), path.clone()))
                .map_err(|e| parquet_error(&path, e))
            }
        }
    };
    let mut out: Option<Out> = None;
    // The document read but not yet placed in a batch: its row and keep flag.
    let mut pending: Option<(u64, bool)> = None;
    let mut first_row = 0u64;
    for batch in all.batches {
        let batch = batch.map_err(|e| crate::corpus::ReadError::Io {
            file: input.clone(),
            cause: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("after row {first_row}: cannot decode the Parquet data ({e})"),
            ),
        })?;
        let rows = batch.num_rows() as u64;
        let mut mask = vec![false; rows as usize];
        loop {
            if pending.is_none() {
                pending = match docs.next()? {
                    Some(keep) => match docs.reader.raw() {
                        Some(RawRecord::Row(row)) => Some((row, keep)),
                        _ => unreachable!("a Parquet reader in capture mode gives the row"),
                    },
                    None => break,
                };
            }
            let (row, keep) = pending.expect("read above");
            if row >= first_row + rows {
                break;
            }
            // Rows come in order in both readers: a row behind this batch cannot happen on an unchanged file.
            if row < first_row {
                return Err(mismatch(&input, row));
            }
            mask[(row - first_row) as usize] = keep;
            pending = None;
        }
        first_row += rows;
        let kept = mask.iter().filter(|&&k| k).count() as u64;
        if kept == 0 {
            continue;
        }
        let filtered = arrow_select::filter::filter_record_batch(&batch, &BooleanArray::from(mask))
            .map_err(|e| parquet_error(&target.path, e))?;
        if out.is_none() {
            out = Some(open(&mut stats)?);
        }
        let w = out.as_mut().expect("opened above");
        w.write(&filtered)
            .map_err(|e| parquet_error(&target.path, e))?;
        stats.kept += kept;
        let written = w.bound().map_err(|e| parquet_error(&target.path, e))?;
        if staged.is_some() && written >= target.shard_size {
            let w = out.take().expect("open");
            stats.bytes += written;
            w.close(&target.path)?;
        }
    }
    if let Some((row, _)) = pending {
        return Err(mismatch(&input, row));
    }
    // Every document must have been placed: the end of the documents is checked by `docs.next`.
    if docs.next()?.is_some() {
        return Err(mismatch(&input, first_row));
    }
    stats.documents = docs.documents();
    if stats.files == 0 {
        out = Some(open(&mut stats)?);
    }
    if let Some(mut w) = out {
        stats.bytes += w.bound().map_err(|e| parquet_error(&target.path, e))?;
        w.close(&target.path)?;
    }
    if let Some(staged) = staged {
        staged.commit()?;
    }
    Ok(stats)
}

fn mismatch(input: &Path, row: u64) -> KeptError {
    KeptError::Mismatch {
        path: input.to_path_buf(),
        detail: format!(
            "row {row} of the text column does not line up with the file's rows (did the file change since it \
             was read?)"
        ),
    }
}
