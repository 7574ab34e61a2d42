//! Signatures to Parquet (`sketch --output sigs.parquet`, feature `parquet`): one row per document, in input
//! order, with columns `id` (utf8), `signature` (fixed-size list of k uint32) and `empty` (bool: the document had
//! no shingles and its slots are all 4294967295).
//!
//! Rows go out batch by batch into row groups of at most [`ROW_GROUP_BYTES`] of slots, so memory stays flat
//! whatever the corpus size. The file is written under a temporary name beside the target and renamed into place
//! when complete, so a failed run never leaves a file that looks whole.

use crate::output::{AtomicFile, OutputError};
use crate::pipeline::SignedBatch;
use arrow_array::{
    ArrayRef, BooleanArray, FixedSizeListArray, RecordBatch, StringArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// The largest row group, in bytes of signature slots (k x 4 bytes a row): 32 MiB, 65,536 rows at k = 128.
pub const ROW_GROUP_BYTES: usize = 32 << 20;

/// The Arrow schema of a signature file with `num_perm` slots per row.
pub fn schema(num_perm: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new(
            "signature",
            DataType::FixedSizeList(slot_field(), num_perm as i32),
            false,
        ),
        Field::new("empty", DataType::Boolean, false),
    ]))
}

fn slot_field() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::UInt32, false))
}

/// The writer properties of every Parquet file lshbench writes: snappy pages, `dictionary` encoding or not, row
/// groups of at most `max_rows` rows. Nothing in them varies between runs (no timestamp): the bytes written
/// depend only on the data and the parquet crate's version, which `created_by` names.
pub fn writer_properties(dictionary: bool, max_rows: usize) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(dictionary)
        .set_max_row_group_row_count(Some(max_rows.max(1)))
        .build()
}

/// A Parquet error as an I/O error (an I/O failure underneath comes back as itself).
pub fn to_io(e: parquet::errors::ParquetError) -> io::Error {
    match e {
        parquet::errors::ParquetError::External(inner) => match inner.downcast::<io::Error>() {
            Ok(io) => *io,
            Err(other) => io::Error::other(other),
        },
        other => io::Error::other(other),
    }
}

/// Writes `batch` (a whole table) to `path` with `props`, under a temporary name renamed into place.
pub fn write_record_batch(
    path: &Path,
    batch: &RecordBatch,
    props: WriterProperties,
) -> Result<(), OutputError> {
    let out = AtomicFile::create(path)?;
    let write_err = |cause| OutputError::Write {
        path: path.to_path_buf(),
        cause,
    };
    let mut writer =
        ArrowWriter::try_new(out, batch.schema(), Some(props)).map_err(|e| write_err(to_io(e)))?;
    writer.write(batch).map_err(|e| write_err(to_io(e)))?;
    let out = writer.into_inner().map_err(|e| write_err(to_io(e)))?;
    out.commit()
}

/// An open signature file. Dropped before [`ParquetSink::finish`], it removes its temporary file.
pub(super) struct ParquetSink {
    writer: ArrowWriter<AtomicFile>,
    schema: SchemaRef,
    num_perm: usize,
}

impl ParquetSink {
    /// Creates the temporary file beside `path`.
    pub(super) fn create(path: &Path, num_perm: usize) -> Result<ParquetSink, OutputError> {
        let out = AtomicFile::create(path)?;
        let schema = schema(num_perm);
        // Slots are uniform 32-bit hashes: a dictionary would never pay, and ids are unique.
        let props = writer_properties(false, ROW_GROUP_BYTES / (4 * num_perm.max(1)));
        let writer = ArrowWriter::try_new(out, schema.clone(), Some(props)).map_err(|e| {
            OutputError::Write {
                path: path.to_path_buf(),
                cause: to_io(e),
            }
        })?;
        Ok(ParquetSink {
            writer,
            schema,
            num_perm,
        })
    }

    /// Appends one batch of rows.
    pub(super) fn write(&mut self, batch: &SignedBatch) -> io::Result<()> {
        let ids = StringArray::from_iter_values(batch.docs.iter().map(|d| d.id.as_str()));
        let slots = UInt32Array::from(batch.signatures.clone());
        let signatures = FixedSizeListArray::try_new(
            slot_field(),
            self.num_perm as i32,
            Arc::new(slots) as ArrayRef,
            None,
        )
        .map_err(io::Error::other)?;
        let empty = BooleanArray::from(batch.empty.clone());
        let columns: Vec<ArrayRef> = vec![Arc::new(ids), Arc::new(signatures), Arc::new(empty)];
        let record =
            RecordBatch::try_new(self.schema.clone(), columns).map_err(io::Error::other)?;
        self.writer.write(&record).map_err(to_io)
    }

    /// Writes the footer and renames the file into place (exchanging names with `exchange`).
    pub(super) fn finish(self, path: &Path, exchange: bool) -> Result<(), OutputError> {
        let out = self.writer.into_inner().map_err(|e| OutputError::Write {
            path: path.to_path_buf(),
            cause: to_io(e),
        })?;
        out.commit_exchanging(exchange)
    }
}
