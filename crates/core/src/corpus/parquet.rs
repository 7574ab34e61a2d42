//! Parquet corpora (`--format parquet`, feature `parquet`): a text column and an optional id column, read
//! batch by batch through the arrow-rs reader, so memory holds one batch of rows and the pages being decoded,
//! never the file.
//!
//! Only the one or two columns asked for are read (a projection), whatever else the file holds. The text column
//! may be a string (`Utf8`, `LargeUtf8`, `Utf8View`), binary (`Binary`, `LargeBinary`, `BinaryView`: decoded as
//! UTF-8 under the reader's `--strict` rule) or dictionary-encoded column of those; the id column may also be an
//! integer column (its values rendered in decimal, as the JSONL reader renders numeric ids). A row is a record:
//! the `line` of a rejected row's message is its 1-based row number in the file, and a row without an id column
//! gets its 0-based row index as id, as a CSV record gets its record index.

use super::record::{Bad, FieldValue, Parsed, ReadError, ReaderOptions, decode};
use super::thrift_guard;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowPrimitiveType, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::column::page::Page;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::schema::types::ColumnDescriptor;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Rows per decoded batch: small enough that a batch of long documents stays a few megabytes, large enough
/// that the per-batch overhead vanishes.
const BATCH_ROWS: usize = 1024;

/// A column we can take text or an id from. `Dict` holds the keys resolved to value positions.
enum Cells {
    Utf8(arrow_array::StringArray),
    LargeUtf8(arrow_array::LargeStringArray),
    Utf8View(arrow_array::StringViewArray),
    Binary(arrow_array::BinaryArray),
    LargeBinary(arrow_array::LargeBinaryArray),
    BinaryView(arrow_array::BinaryViewArray),
    /// Integers widened to i128 (which holds every i64 and u64), with their validity.
    Int(Vec<i128>, Option<arrow_buffer::NullBuffer>),
    Dict {
        keys: Vec<usize>,
        nulls: Option<arrow_buffer::NullBuffer>,
        values: Box<Cells>,
    },
}

/// One cell's value.
enum Cell<'a> {
    Null,
    Str(&'a str),
    Bytes(&'a [u8]),
    Int(i128),
}

/// Whether a column of type `dt` can give text (`ints`: or an id, which may be an integer).
fn supported(dt: &DataType, ints: bool) -> bool {
    match dt {
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView => true,
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => ints,
        DataType::Dictionary(_, values) => supported(values, ints),
        _ => false,
    }
}

/// Whether a column of type `dt` can rank survivors as numbers: integers, floats, decimals, dates and
/// timestamps (strings and binary rank as text, through [`supported`]).
fn rankable(dt: &DataType) -> bool {
    let value_type = match dt {
        DataType::Dictionary(_, v) => v.as_ref(),
        dt => dt,
    };
    if value_type.is_temporal() {
        arrow_cast::can_cast_types(dt, &DataType::Int64)
    } else {
        value_type.is_numeric() && arrow_cast::can_cast_types(dt, &DataType::Float64)
    }
}

/// A batch's survivor values: text for string and binary columns (invalid UTF-8 replaced), numbers for
/// integer, float, decimal, date and timestamp columns (dates and timestamps as their integer value in the
/// column's unit); null and NaN are missing.
fn rank_values(a: &ArrayRef) -> Vec<FieldValue> {
    if supported(a.data_type(), false) {
        let cells = Cells::new(a);
        return (0..a.len())
            .map(|i| match cells.get(i) {
                Cell::Null => FieldValue::Missing,
                Cell::Str(s) => FieldValue::Text(s.to_string()),
                Cell::Bytes(b) => FieldValue::Text(String::from_utf8_lossy(b).into_owned()),
                Cell::Int(v) => FieldValue::Number(v as f64),
            })
            .collect();
    }
    let value_type = match a.data_type() {
        DataType::Dictionary(_, v) => v.as_ref().clone(),
        dt => dt.clone(),
    };
    // Temporal values go through their integer representation (arrow casts timestamps to floats only that
    // way); every numeric type casts to Float64.
    let numbers = if value_type.is_temporal() {
        arrow_cast::cast(a, &DataType::Int64).and_then(|i| arrow_cast::cast(&i, &DataType::Float64))
    } else {
        arrow_cast::cast(a, &DataType::Float64)
    };
    match numbers {
        Ok(f) => {
            let f = f.as_primitive::<arrow_array::types::Float64Type>();
            (0..f.len())
                .map(|i| {
                    let x = f.value(i);
                    if f.is_null(i) || x.is_nan() {
                        FieldValue::Missing
                    } else {
                        FieldValue::Number(x)
                    }
                })
                .collect()
        }
        // `rankable` admitted only types arrow says it casts; a cast that fails anyway leaves the values
        // missing (ranked last) rather than stopping the run.
        Err(_) => vec![FieldValue::Missing; a.len()],
    }
}

fn widen<T: ArrowPrimitiveType>(a: &ArrayRef) -> Cells
where
    T::Native: Into<i128>,
{
    let a = a.as_primitive::<T>();
    Cells::Int(
        a.values().iter().map(|&v| v.into()).collect(),
        a.nulls().cloned(),
    )
}

impl Cells {
    /// The accessor for `a`, whose type [`supported`] accepted.
    fn new(a: &ArrayRef) -> Cells {
        match a.data_type() {
            DataType::Utf8 => Cells::Utf8(a.as_string::<i32>().clone()),
            DataType::LargeUtf8 => Cells::LargeUtf8(a.as_string::<i64>().clone()),
            DataType::Utf8View => Cells::Utf8View(a.as_string_view().clone()),
            DataType::Binary => Cells::Binary(a.as_binary::<i32>().clone()),
            DataType::LargeBinary => Cells::LargeBinary(a.as_binary::<i64>().clone()),
            DataType::BinaryView => Cells::BinaryView(a.as_binary_view().clone()),
            DataType::Int8 => widen::<Int8Type>(a),
            DataType::Int16 => widen::<Int16Type>(a),
            DataType::Int32 => widen::<Int32Type>(a),
            DataType::Int64 => widen::<Int64Type>(a),
            DataType::UInt8 => widen::<UInt8Type>(a),
            DataType::UInt16 => widen::<UInt16Type>(a),
            DataType::UInt32 => widen::<UInt32Type>(a),
            DataType::UInt64 => widen::<UInt64Type>(a),
            DataType::Dictionary(_, _) => {
                let dict = a.as_any_dictionary();
                Cells::Dict {
                    keys: dict.normalized_keys(),
                    nulls: dict.keys().nulls().cloned(),
                    values: Box::new(Cells::new(dict.values())),
                }
            }
            other => unreachable!("type {other} was refused when the file was opened"),
        }
    }

    fn get(&self, i: usize) -> Cell<'_> {
        match self {
            Cells::Utf8(a) if a.is_valid(i) => Cell::Str(a.value(i)),
            Cells::LargeUtf8(a) if a.is_valid(i) => Cell::Str(a.value(i)),
            Cells::Utf8View(a) if a.is_valid(i) => Cell::Str(a.value(i)),
            Cells::Binary(a) if a.is_valid(i) => Cell::Bytes(a.value(i)),
            Cells::LargeBinary(a) if a.is_valid(i) => Cell::Bytes(a.value(i)),
            Cells::BinaryView(a) if a.is_valid(i) => Cell::Bytes(a.value(i)),
            Cells::Int(v, nulls) if nulls.as_ref().is_none_or(|n| n.is_valid(i)) => Cell::Int(v[i]),
            Cells::Dict {
                keys,
                nulls,
                values,
            } if nulls.as_ref().is_none_or(|n| n.is_valid(i)) => values.get(keys[i]),
            _ => Cell::Null,
        }
    }
}

/// The rows of one Parquet file, as records.
pub(super) struct ParquetRows {
    batches: ParquetRecordBatchReader,
    text: Column,
    id: Option<Column>,
    /// The batch being read: the text cells, the id cells, its length and the next row in it.
    batch: Option<(Cells, Option<Cells>, usize)>,
    /// The survivor column ([`ReaderOptions::rank_field`]) and its values in the current batch.
    rank: Option<Column>,
    rank_values: Vec<FieldValue>,
    pos: usize,
    /// Rows read so far (the 1-based number of the last row read).
    row: u64,
}

/// A requested column: its name and its position among the columns the projection reads.
struct Column {
    name: String,
    position: usize,
}

/// An error about the file as a whole (not a Parquet file, a missing column), as an I/O error naming it.
fn file_error(path: &Path, kind: std::io::ErrorKind, message: String) -> ReadError {
    ReadError::Io {
        file: path.to_path_buf(),
        cause: std::io::Error::new(kind, message),
    }
}

/// A second handle on the file, for [`check_pages`].
fn file_for_scan(path: &Path) -> Result<Arc<File>, ReadError> {
    File::open(path)
        .map(Arc::new)
        .map_err(|cause| ReadError::Io {
            file: path.to_path_buf(),
            cause,
        })
}

/// Why a container of booleans is refused, in the messages.
const LOOPS: &str = "which the parquet crate would loop over without reading input";

/// `len` bytes of `file` from `offset` (fewer at the end of the file).
fn read_at(mut file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::with_capacity(len);
    file.take(len as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Refuses a footer holding a container of booleans where the parquet crate would skip it, which could take it
/// minutes or hours, or a size the crate reserves memory for before reading what it sizes (a list of row groups,
/// a schema element's children) larger than the footer could hold, which could abort the process on a failed
/// allocation of gigabytes ([`thrift_guard`], which reads the footer as the crate's `FileMetaData` decoder does),
/// before the crate parses it. A file too short for a footer, or without the `PAR1`
/// magic, or whose footer length does not fit, is left to the crate, which reports it.
fn check_footer(path: &Path, file: &File) -> Result<(), ReadError> {
    let io = |cause| ReadError::Io {
        file: path.to_path_buf(),
        cause,
    };
    let len = file.metadata().map_err(io)?.len();
    if len < 12 {
        return Ok(());
    }
    let tail = read_at(file, len - 8, 8).map_err(io)?;
    if tail.len() < 8 || &tail[4..] != b"PAR1" {
        return Ok(());
    }
    let meta_len = u64::from(u32::from_le_bytes(tail[..4].try_into().expect("4 bytes")));
    if meta_len + 8 > len {
        return Ok(());
    }
    let meta = read_at(file, len - 8 - meta_len, meta_len as usize).map_err(io)?;
    match thrift_guard::Walker::new(&meta).read(thrift_guard::FILE_META_DATA, &mut |_, _| {}) {
        Err(thrift_guard::Stop::Booleans(what)) => Err(file_error(
            path,
            std::io::ErrorKind::InvalidData,
            format!("not a readable Parquet file (its footer holds {what}, {LOOPS})"),
        )),
        Err(thrift_guard::Stop::Oversized(what)) => Err(file_error(
            path,
            std::io::ErrorKind::InvalidData,
            format!(
                "not a readable Parquet file (its footer declares {what}, which the parquet crate would \
                 allocate memory for before reading)"
            ),
        )),
        _ => Ok(()),
    }
}

/// The most bytes a page compressed with `codec` can expand to per compressed byte, as a fraction (numerator,
/// denominator), and the codec's name; `None` where no buffer is sized from the declared size (no compression)
/// or the crate refuses the codec by itself (those not built in: LZ4, Brotli, LZO).
/// - Snappy: its longest copy, 64 bytes, takes a 3-byte element (literals expand nothing): 64/3.
/// - Gzip (deflate): a length of 258 and a distance in one bit each of a dynamic Huffman block: 258 bytes from 2
///   bits, 1032.
/// - Zstandard: a block regenerates at most 128 KiB, and the smallest block (an RLE block) takes 4 bytes: 32768.
///
/// Headers and trailers only add compressed bytes, so a page's `uncompressed_page_size` above its
/// `compressed_page_size` times this is a lie about its size.
fn expansion_bound(codec: parquet::basic::Compression) -> Option<(u64, u64, &'static str)> {
    use parquet::basic::Compression;
    match codec {
        Compression::SNAPPY => Some((64, 3, "Snappy")),
        Compression::GZIP(_) => Some((1032, 1, "gzip")),
        Compression::ZSTD(_) => Some((32768, 1, "Zstandard")),
        _ => None,
    }
}

/// The first page header of the column chunk at `start..start + length` that the parquet crate could spend
/// unbounded time or memory on: one holding a container of booleans ([`thrift_guard`]), one running past the end
/// of the chunk, or one whose `uncompressed_page_size` (field 2) is more than its `compressed_page_size` (field
/// 3) can expand to under `bound` ([`expansion_bound`]): the crate allocates (and, for Snappy, zeroes) a buffer of
/// the declared size before it decompresses, so 1.4 KB of fuzzed file once took 1.4 GB. Its index and why. Each
/// header is walked from a short read (longer when it does not fit), its `compressed_page_size` leads to the
/// next; a header the walk finds otherwise malformed ends the walk, and the crate's page reader reports it.
fn hostile_page_header(
    file: &File,
    start: u64,
    length: u64,
    bound: Option<(u64, u64, &'static str)>,
) -> std::io::Result<Option<(usize, String)>> {
    let end = start.saturating_add(length);
    let mut pos = start;
    let mut page = 0usize;
    while pos < end {
        let mut want = 256u64;
        let (header, body, unpacked) = loop {
            let asked = want.min(end - pos);
            let buf = read_at(file, pos, asked as usize)?;
            let mut walker = thrift_guard::Walker::new(&buf);
            let (mut body, mut unpacked) = (None, None);
            // Both sizes are Thrift i32s, which the crate takes as the low 32 bits of the zigzag-decoded varint.
            match walker.read(thrift_guard::PAGE_HEADER, &mut |id, v| match id {
                2 => unpacked = Some(v as i32),
                3 => body = Some(v as i32),
                _ => {}
            }) {
                Ok(()) => break (walker.position() as u64, body, unpacked),
                Err(thrift_guard::Stop::Booleans(what)) => {
                    return Ok(Some((page, format!("its header holds {what}, {LOOPS}"))));
                }
                // Short of the chunk's end, and the file gave all that was asked: read more.
                // (A page header holds no list the walk reads by shape, so no size it would call oversized.)
                Err(thrift_guard::Stop::End | thrift_guard::Stop::Oversized(_))
                    if asked < end - pos && buf.len() as u64 == asked =>
                {
                    want = want.saturating_mul(4)
                }
                // The crate reads a page header on past the chunk, and past the end of the file its skip of a
                // fixed-size value (a double, a UUID) reads nothing and does not fail: a list of two billion
                // doubles there is two billion reads. A valid header lies within its chunk (and the file).
                Err(thrift_guard::Stop::End | thrift_guard::Stop::Oversized(_)) => {
                    return Ok(Some((
                        page,
                        "its header runs past the end of the column chunk".to_string(),
                    )));
                }
                Err(thrift_guard::Stop::Malformed) => return Ok(None),
            }
        };
        let Some(body) = body.and_then(|b| u64::try_from(b).ok()) else {
            return Ok(None);
        };
        if let (Some((num, den, codec)), Some(unpacked)) =
            (bound, unpacked.and_then(|u| u64::try_from(u).ok()))
            && u128::from(unpacked) * u128::from(den) > u128::from(body) * u128::from(num)
        {
            let ratio = if den == 1 {
                num.to_string()
            } else {
                format!("{num}/{den}")
            };
            return Ok(Some((
                page,
                format!(
                    "its header declares {unpacked} bytes uncompressed from {body} compressed, more than \
                     {codec} can expand to ({ratio} per byte at most)"
                ),
            )));
        }
        pos = pos.saturating_add(header).saturating_add(body);
        page += 1;
    }
    Ok(None)
}

/// What makes `page` of a column `descr` one the parquet crate (59.3.2, and 60.1.0 the same) panics on while
/// decoding it, instead of returning an error; `None` for a page it decodes or refuses by itself. fuzz/reader_parquet
/// covers each case:
/// - a byte-array page holding value bytes but, by its header, no value: a dictionary page of 0 values, or a PLAIN
///   v2 data page whose values are all null (`num_nulls == num_values`). The crate divides by that count of
///   values (`arrow/array_reader/byte_array.rs`, `ByteArrayDecoderPlain::read`);
/// - a dictionary-encoded byte-array data page whose values section is empty or starts with a bit width over 32.
///   The crate's Arrow decoders read that byte unchecked (`arrow/decoder/dictionary_index.rs`,
///   `byte_array_dictionary.rs`: an index out of bounds on an empty section) and later assert the width fits an
///   `i32` (`util/bit_util.rs`, `BitReader::get_batch`). Its non-Arrow dictionary decoder checks both;
/// - a v1 data page whose levels are `BIT_PACKED` and would run past the page's end: the crate slices that many
///   bytes from the page unchecked (`column/reader.rs`, `parse_v1_level`), any column type;
/// - in a flat optional column (definition levels 0 and 1, no repetition), RLE definition levels whose bit-packed
///   run reaches past the levels' bytes within the page's count of values: the crate reads such levels straight
///   into a null mask (`arrow/record_reader/definition_levels.rs`, `PackedDecoder`), whose bit copy asserts the
///   range is in its buffer (arrow-buffer's `bit_chunk_iterator.rs`).
fn unreadable_page(page: &Page, descr: &ColumnDescriptor) -> Option<String> {
    // The crate's null-mask path (`packed_null_mask`).
    let null_mask =
        descr.max_def_level() == 1 && descr.max_rep_level() == 0 && descr.self_type().is_optional();
    let byte_array = descr.physical_type() == PhysicalType::BYTE_ARRAY;
    let dictionary = |encoding: &Encoding| {
        byte_array
            && matches!(
                encoding,
                Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY
            )
    };
    // A dictionary-encoded values section: its first byte is the bit width of the indices that follow.
    let indices = |values: &[u8]| match values.first() {
        None => Some("a dictionary-encoded data page without its bit-width byte".to_string()),
        Some(&width) if width > 32 => Some(format!(
            "a dictionary-encoded data page whose indices are {width} bits wide (at most 32)"
        )),
        Some(_) => None,
    };
    match page {
        Page::DictionaryPage {
            buf, num_values, ..
        } => (byte_array && *num_values == 0 && !buf.is_empty())
            .then(|| "a dictionary page of 0 values holds value bytes".to_string()),
        Page::DataPageV2 {
            buf,
            num_values,
            num_nulls,
            encoding,
            def_levels_byte_len,
            rep_levels_byte_len,
            ..
        } => {
            // The page reader has checked that the levels fit in the page.
            let levels = *def_levels_byte_len as usize + *rep_levels_byte_len as usize;
            if null_mask {
                let definition = buf.get(*rep_levels_byte_len as usize..levels)?;
                let overrun = mask_levels_overrun(definition, *num_values as usize);
                if overrun.is_some() {
                    return overrun;
                }
            }
            let values = buf.get(levels..)?;
            if byte_array
                && *encoding == Encoding::PLAIN
                && num_nulls == num_values
                && !values.is_empty()
            {
                return Some(format!(
                    "a data page of {num_values} values, all of them null (num_nulls {num_nulls}), holds value bytes"
                ));
            }
            dictionary(encoding).then(|| indices(values)).flatten()
        }
        Page::DataPage {
            buf,
            num_values,
            encoding,
            def_level_encoding,
            rep_level_encoding,
            ..
        } => {
            // The levels as the crate walks them: repetition, then definition, each only when the column has them.
            let mut offset = 0usize;
            for (max_level, level_encoding, what) in [
                (descr.max_rep_level(), rep_level_encoding, "repetition"),
                (descr.max_def_level(), def_level_encoding, "definition"),
            ] {
                if max_level <= 0 {
                    continue;
                }
                let rest = buf.get(offset..)?;
                offset += match level_encoding {
                    // A 4-byte length, then the runs; the crate refuses a length past the end by itself.
                    Encoding::RLE => {
                        let length = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?);
                        let end = 4usize.checked_add(usize::try_from(length as i32).ok()?)?;
                        if end > rest.len() {
                            return None;
                        }
                        if null_mask && what == "definition" {
                            let overrun = mask_levels_overrun(&rest[4..end], *num_values as usize);
                            if overrun.is_some() {
                                return overrun;
                            }
                        }
                        end
                    }
                    #[allow(deprecated)]
                    Encoding::BIT_PACKED => {
                        let width = 64 - (max_level as u64).leading_zeros() as usize;
                        let bytes = (*num_values as usize * width).div_ceil(8);
                        if bytes > rest.len() {
                            return Some(format!(
                                "a data page whose bit-packed {what} levels need {bytes} bytes, {} left",
                                rest.len()
                            ));
                        }
                        bytes
                    }
                    // Any other level encoding the crate refuses by itself.
                    _ => return None,
                };
            }
            dictionary(encoding)
                .then(|| indices(buf.get(offset..)?))
                .flatten()
        }
    }
}

/// Walks RLE/bit-packed definition levels of width 1 as the crate's null-mask decoder does, for the first
/// `count` levels, and says where a bit-packed run would be copied from past the end of `levels`. What the decoder
/// refuses by itself (a header or run value cut by the end, an over-long header) ends the walk with `None`.
fn mask_levels_overrun(levels: &[u8], count: usize) -> Option<String> {
    let mut pos = 0usize;
    let mut left = count;
    while left > 0 && pos < levels.len() {
        // The run header: a varint of at most 10 bytes, read into an i64 as the decoder reads it.
        let mut header = 0i64;
        let mut len = 0;
        loop {
            let byte = *levels.get(pos + len)?;
            header |= i64::from(byte & 0x7F) << (len * 7);
            len += 1;
            if byte & 0x80 == 0 {
                break;
            }
            if len == 10 {
                return None;
            }
        }
        pos += len;
        let run = (header >> 1) as usize;
        if header & 1 == 1 {
            // `run` groups of eight 1-bit levels, copied bit by bit from `pos`.
            let bits = run.wrapping_mul(8);
            let taken = bits.min(left);
            if taken > (levels.len() - pos) * 8 {
                return Some(format!(
                    "definition levels whose bit-packed run of {taken} levels at byte {pos} runs past \
                     their end at byte {}",
                    levels.len()
                ));
            }
            left -= taken;
            pos = pos.saturating_add(bits / 8);
        } else {
            // A repeated level: one value byte.
            levels.get(pos)?;
            pos += 1;
            left = left.saturating_sub(run);
        }
    }
    None
}

/// The file as the page walk hands it to the crate: a read at the end of the file is an error, and flagged,
/// where a `File` gives 0 bytes. The crate's skip of a Thrift value of fixed size (a double, a UUID) or of a
/// binary's bytes takes 0 bytes as done, so a page header that declares a list of two billion such values and
/// runs past the end of the file cost two billion reads of nothing: fuzz/reader_parquet's slow units of 246 and
/// 677 s, whose headers the chunk walk ([`hostile_page_header`]) found well formed within their chunks (the
/// crate read them differently). A valid page never reads past the end of its file.
struct StrictFile {
    file: Arc<File>,
    past_end: Arc<AtomicBool>,
}

impl parquet::file::reader::Length for StrictFile {
    fn len(&self) -> u64 {
        parquet::file::reader::Length::len(self.file.as_ref())
    }
}

impl parquet::file::reader::ChunkReader for StrictFile {
    type T = StrictRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<StrictRead> {
        Ok(StrictRead {
            inner: self.file.get_read(start)?,
            past_end: Arc::clone(&self.past_end),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        self.file.get_bytes(start, length)
    }
}

/// A reader of a [`StrictFile`].
struct StrictRead {
    inner: std::io::BufReader<File>,
    past_end: Arc<AtomicBool>,
}

impl std::io::Read for StrictRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.past_end.store(true, Ordering::Relaxed);
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "a page read past the end of the file",
            ));
        }
        Ok(n)
    }
}

/// Refuses a file holding a page the parquet crate would panic on ([`unreadable_page`]): a panic in a library
/// call, an abort in the release CLI. The pages of the columns read (those under `roots`) are walked once here,
/// before the reader decodes any: their headers are parsed and their bytes decompressed, no value is decoded. A
/// page the walk cannot read ends the walk of its column chunk: the reader meets the same page and reports it,
/// after the rows before it, as before this check.
fn check_pages(
    path: &Path,
    file: Arc<File>,
    metadata: &ParquetMetaData,
    roots: &[usize],
) -> Result<(), ReadError> {
    let schema = metadata.file_metadata().schema_descr();
    let rows = usize::try_from(metadata.file_metadata().num_rows()).unwrap_or(0);
    for (g, group) in metadata.row_groups().iter().enumerate() {
        for (leaf, column) in group.columns().iter().enumerate() {
            if leaf >= schema.num_columns() || !roots.contains(&schema.get_column_root_idx(leaf)) {
                continue;
            }
            let descr = schema.column(leaf);
            let refuse = |p: usize, what: &str| {
                file_error(
                    path,
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "not a readable Parquet file (row group {g}, column `{}`, page {p}: {what})",
                        column.column_path().string()
                    ),
                )
            };
            let (start, length) = column.byte_range();
            if let Some((p, what)) =
                hostile_page_header(&file, start, length, expansion_bound(column.compression()))
                    .map_err(|cause| ReadError::Io {
                        file: path.to_path_buf(),
                        cause,
                    })?
            {
                return Err(refuse(p, &what));
            }
            let strict = Arc::new(StrictFile {
                file: Arc::clone(&file),
                past_end: Arc::new(AtomicBool::new(false)),
            });
            let Ok(pages) = SerializedPageReader::new(Arc::clone(&strict), column, rows, None)
            else {
                continue;
            };
            for (p, page) in pages.enumerate() {
                let page = match page {
                    Ok(page) => page,
                    Err(_) if strict.past_end.load(Ordering::Relaxed) => {
                        return Err(refuse(p, "its header runs past the end of the file"));
                    }
                    Err(_) => break,
                };
                if let Some(what) = unreadable_page(&page, &descr) {
                    return Err(refuse(p, &what));
                }
            }
        }
    }
    Ok(())
}

/// A reader builder over `path` once its footer passed the checks every reader of this module makes
/// ([`check_footer`], no negative offset or length).
fn checked_builder(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, ReadError> {
    let file = File::open(path).map_err(|cause| ReadError::Io {
        file: path.to_path_buf(),
        cause,
    })?;
    check_footer(path, &file)?;
    // The Arrow schema a writer may embed (the `ARROW:schema` footer metadata) is not used: arrow-ipc panics on
    // some malformed ones (an unknown float precision, a case fuzz/reader_parquet covers) instead of returning an
    // error, and the Parquet schema alone gives every column type this reader takes.
    let arrow_options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file, arrow_options)
        .map_err(|e| {
            file_error(
                path,
                std::io::ErrorKind::InvalidData,
                format!("not a readable Parquet file ({e})"),
            )
        })?;
    // The parquet crate asserts (panics) when it reads a column chunk whose footer gives a negative offset or
    // length (a case fuzz/reader_parquet covers): refuse such a footer here, as a damaged file.
    for (g, group) in builder.metadata().row_groups().iter().enumerate() {
        for column in group.columns() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or(column.data_page_offset());
            if start < 0 || column.compressed_size() < 0 {
                return Err(file_error(
                    path,
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "not a readable Parquet file (row group {g}, column `{}`: negative offset or length)",
                        column.column_path().string()
                    ),
                ));
            }
        }
    }
    Ok(builder)
}

/// Every column of a Parquet file, for a copy of its rows (`dedup --kept`).
pub(crate) struct AllColumns {
    /// Batches of [`BATCH_ROWS`] rows, in file order.
    pub(crate) batches: ParquetRecordBatchReader,
    /// The Arrow schema the Parquet schema gives (the embedded `ARROW:schema` is not decoded, see
    /// [`ParquetRows::open`]).
    pub(crate) schema: arrow_schema::SchemaRef,
    /// The file's key-value metadata as stored (the embedded `ARROW:schema` included, undecoded).
    pub(crate) key_value: Vec<parquet::file::metadata::KeyValue>,
    /// The codec of the first column chunk, if the file has one.
    pub(crate) compression: Option<parquet::basic::Compression>,
}

/// Opens every column of `path`, with the checks of [`ParquetRows::open`] applied to all of them.
pub(crate) fn open_all_columns(path: &Path) -> Result<AllColumns, ReadError> {
    let builder = checked_builder(path)?;
    let roots: Vec<usize> =
        (0..builder.parquet_schema().root_schema().get_fields().len()).collect();
    check_pages(path, file_for_scan(path)?, builder.metadata(), &roots)?;
    let schema = builder.schema().clone();
    let meta = builder.metadata();
    let key_value = meta
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default();
    let compression = meta
        .row_groups()
        .first()
        .and_then(|g| g.columns().first())
        .map(|c| c.compression());
    let batches = builder.with_batch_size(BATCH_ROWS).build().map_err(|e| {
        file_error(
            path,
            std::io::ErrorKind::InvalidData,
            format!("cannot read the Parquet file ({e})"),
        )
    })?;
    Ok(AllColumns {
        batches,
        schema,
        key_value,
        compression,
    })
}

impl ParquetRows {
    /// Opens `path`, checks that the text column (and the id column, if one is named) exist with a usable type,
    /// and prepares a reader of just those columns.
    pub(super) fn open(path: &Path, options: &ReaderOptions) -> Result<ParquetRows, ReadError> {
        let builder = checked_builder(path)?;
        let schema = builder.schema().clone();
        let scan = file_for_scan(path)?;
        let find = |name: &str, ints: bool| -> Result<usize, ReadError> {
            let Some(i) = schema.fields().iter().position(|f| f.name() == name) else {
                let columns: Vec<String> = schema
                    .fields()
                    .iter()
                    .map(|f| format!("{} ({})", f.name(), f.data_type()))
                    .collect();
                return Err(file_error(
                    path,
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "field `{name}`: no such column; the file has: {}",
                        columns.join(", ")
                    ),
                ));
            };
            let dt = schema.field(i).data_type();
            if !supported(dt, ints) {
                let expected = if ints {
                    "a string, binary or integer column (or one of those dictionary-encoded)"
                } else {
                    "a string or binary column (or one of those dictionary-encoded)"
                };
                return Err(file_error(
                    path,
                    std::io::ErrorKind::InvalidInput,
                    format!("field `{name}`: the column holds {dt}; expected {expected}"),
                ));
            }
            Ok(i)
        };
        let text_name = options.text_column.as_deref().unwrap_or("text");
        let text_root = find(text_name, false)?;
        let id_root = options
            .id_column
            .as_deref()
            .map(|name| find(name, true).map(|i| (name, i)))
            .transpose()?;
        let rank_root = options
            .rank_field
            .as_deref()
            .map(|name| -> Result<(&str, usize), ReadError> {
                let i = find(name, true).or_else(|e| {
                    match schema.fields().iter().position(|f| f.name() == name) {
                        Some(i) if rankable(schema.field(i).data_type()) => Ok(i),
                        Some(i) => Err(file_error(
                            path,
                            std::io::ErrorKind::InvalidInput,
                            format!(
                                "field `{name}`: the column holds {}; a survivor column must hold numbers, \
                                 dates, timestamps or text",
                                schema.field(i).data_type()
                            ),
                        )),
                        None => Err(e),
                    }
                })?;
                Ok((name, i))
            })
            .transpose()?;
        // The projection yields the chosen root columns in file order, once each.
        let mut roots = vec![text_root];
        roots.extend(id_root.map(|(_, i)| i));
        roots.extend(rank_root.map(|(_, i)| i));
        roots.sort_unstable();
        roots.dedup();
        let position = |root: usize| roots.iter().position(|&r| r == root).expect("projected");
        check_pages(path, scan, builder.metadata(), &roots)?;
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
        let batches = builder
            .with_projection(mask)
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| {
                file_error(
                    path,
                    std::io::ErrorKind::InvalidData,
                    format!("cannot read the Parquet file ({e})"),
                )
            })?;
        Ok(ParquetRows {
            batches,
            text: Column {
                name: text_name.to_string(),
                position: position(text_root),
            },
            id: id_root.map(|(name, root)| Column {
                name: name.to_string(),
                position: position(root),
            }),
            batch: None,
            rank: rank_root.map(|(name, root)| Column {
                name: name.to_string(),
                position: position(root),
            }),
            rank_values: Vec::new(),
            pos: 0,
            row: 0,
        })
    }

    /// The next row: `Ok(None)` at the end, `Ok(Some(Err(bad)))` for a row with a null text or id (or invalid
    /// UTF-8 in a binary column under `strict`). A page that cannot be decoded is an `Err` (the file is damaged).
    /// Rows read so far, rejected ones included.
    pub(super) fn rows_read(&self) -> u64 {
        self.row
    }

    pub(super) fn next_record(
        &mut self,
        strict: bool,
    ) -> Result<Option<Result<Parsed, Bad>>, std::io::Error> {
        loop {
            if let Some((_, _, len)) = &self.batch
                && self.pos < *len
            {
                break;
            }
            match self.batches.next() {
                None => {
                    self.batch = None;
                    return Ok(None);
                }
                Some(Err(e)) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "after row {}: cannot decode the Parquet data ({e})",
                            self.row
                        ),
                    ));
                }
                Some(Ok(batch)) => {
                    self.batch = Some(self.cells(&batch));
                    if let Some(col) = &self.rank {
                        self.rank_values = rank_values(batch.column(col.position));
                    }
                    self.pos = 0;
                }
            }
        }
        let (text_cells, id_cells, _) = self.batch.as_ref().expect("a batch with rows left");
        let i = self.pos;
        self.pos += 1;
        self.row += 1;
        let line = self.row;
        let mut replaced = false;
        let mut take = |cell: Cell<'_>, name: &str| -> Result<String, Bad> {
            match cell {
                Cell::Null => Err(Bad::new(line, name, "null".into())),
                Cell::Str(s) => Ok(s.to_string()),
                Cell::Int(v) => Ok(v.to_string()),
                Cell::Bytes(b) => match decode(b, strict) {
                    Ok((s, r)) => {
                        replaced |= r;
                        Ok(s.into_owned())
                    }
                    Err(reason) => Err(Bad::new(line, name, reason)),
                },
            }
        };
        let text = match take(text_cells.get(i), &self.text.name) {
            Ok(t) => t,
            Err(bad) => return Ok(Some(Err(bad))),
        };
        let id = match (id_cells, &self.id) {
            (Some(cells), Some(col)) => match take(cells.get(i), &col.name) {
                Ok(id) => Some(id),
                Err(bad) => return Ok(Some(Err(bad))),
            },
            _ => None,
        };
        let rank = if self.rank.is_some() {
            std::mem::take(&mut self.rank_values[i])
        } else {
            FieldValue::Missing
        };
        Ok(Some(Ok(Parsed {
            id,
            text,
            replaced,
            rank,
        })))
    }

    fn cells(&self, batch: &RecordBatch) -> (Cells, Option<Cells>, usize) {
        let text = Cells::new(batch.column(self.text.position));
        let id = self
            .id
            .as_ref()
            .map(|c| Cells::new(batch.column(c.position)));
        (text, id, batch.num_rows())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The null-mask level walk: runs that fit pass, a bit-packed run is charged only the levels the page needs,
    /// and what the crate refuses by itself (a cut header or run value, an over-long header) is left to it.
    #[test]
    fn mask_levels_overrun_follows_the_decoder() {
        let overrun = |levels: &[u8], count| mask_levels_overrun(levels, count).is_some();
        // One group of eight, its byte present.
        assert!(!overrun(&[0x03, 0xFF], 8));
        assert!(overrun(&[0x03], 8));
        assert!(overrun(&[0x03], 1));
        assert!(!overrun(&[0x03], 0));
        // Two groups declared, one byte left: fine while the page needs at most eight levels.
        assert!(!overrun(&[0x05, 0xFF], 8));
        assert!(overrun(&[0x05, 0xFF], 9));
        // A repeated run of eight, then a bit-packed run with no byte behind it.
        assert!(!overrun(&[0x10, 0x01, 0x03], 8));
        assert!(overrun(&[0x10, 0x01, 0x03], 9));
        // A repeated run without its value byte, a header of ten continuation bytes: the crate's own errors.
        assert!(!overrun(&[0x10], 9));
        assert!(!overrun(&[0xFF; 10], 9));
        // A header whose groups overflow when counted in bits (the decoder wraps; so does the walk).
        let mut huge = vec![0xFF; 9];
        huge.push(0x01);
        assert!(overrun(&huge, 5));
        // The data ends exactly at a run's end: the decoder stops there, short of the count.
        assert!(!overrun(&[0x03, 0xFF], 100));
    }

    /// The typed walk reads what the crate writes to the end: footers and page headers of files using every
    /// struct of the shapes the writer produces (each codec, v1 and v2 pages, page and chunk statistics, page
    /// header statistics, dictionary pages, several row groups, sorting columns, key-value metadata, logical
    /// types with fields: string, integer, decimal, timestamp, date), each walked to its last byte with no
    /// stop. A shape that disagreed with the crate's decoder would end early or report a malformed value.
    #[test]
    fn valid_footers_and_page_headers_walk_to_their_end() {
        use arrow_array::{Date32Array, Decimal128Array, Int8Array, StringArray};
        use arrow_array::{Int64Array, TimestampMicrosecondArray};
        use parquet::arrow::ArrowWriter;
        use parquet::basic::{Compression, GzipLevel, ZstdLevel};
        use parquet::file::metadata::{KeyValue, SortingColumn};
        use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
        use parquet::file::reader::{FileReader, SerializedFileReader};

        let n = 3000;
        let text: StringArray = (0..n)
            .map(|i| (i % 7 != 0).then(|| format!("document {} of {}", i % 50, i)))
            .collect();
        let batch = RecordBatch::try_from_iter([
            ("text", Arc::new(text) as ArrayRef),
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef,
            ),
            (
                "small",
                Arc::new(Int8Array::from_iter_values((0..n).map(|i| (i % 100) as i8))),
            ),
            (
                "price",
                Arc::new(
                    Decimal128Array::from_iter_values((0..n).map(|i| i as i128 * 3))
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
            (
                "at",
                Arc::new(
                    TimestampMicrosecondArray::from_iter_values((0..n).map(|i| i as i64 * 1000))
                        .with_timezone("UTC"),
                ),
            ),
            ("day", Arc::new(Date32Array::from_iter_values(0..n))),
        ])
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let codecs = [
            Compression::UNCOMPRESSED,
            Compression::SNAPPY,
            Compression::GZIP(GzipLevel::default()),
            Compression::ZSTD(ZstdLevel::default()),
        ];
        let mut walked_pages = 0;
        for (c, codec) in codecs.into_iter().enumerate() {
            for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
                let path = dir.path().join(format!("valid-{c}-{version:?}.parquet"));
                let props = WriterProperties::builder()
                    .set_compression(codec)
                    .set_writer_version(version)
                    .set_statistics_enabled(EnabledStatistics::Page)
                    .set_write_page_header_statistics(true)
                    .set_data_page_row_count_limit(500)
                    .set_write_batch_size(250)
                    .set_max_row_group_row_count(Some(1200))
                    .set_sorting_columns(Some(vec![SortingColumn {
                        column_idx: 1,
                        descending: false,
                        nulls_first: true,
                    }]))
                    .set_key_value_metadata(Some(vec![
                        KeyValue::new("source".into(), "test".to_string()),
                        KeyValue::new("empty".into(), None),
                    ]))
                    .build();
                let file = File::create(&path).unwrap();
                let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
                w.write(&batch).unwrap();
                w.close().unwrap();

                let bytes = std::fs::read(&path).unwrap();
                let meta_len =
                    u32::from_le_bytes(bytes[bytes.len() - 8..][..4].try_into().unwrap()) as usize;
                let footer = &bytes[bytes.len() - 8 - meta_len..bytes.len() - 8];
                let mut walker = thrift_guard::Walker::new(footer);
                assert_eq!(
                    walker.read(thrift_guard::FILE_META_DATA, &mut |_, _| {}),
                    Ok(()),
                    "{path:?}"
                );
                assert_eq!(
                    walker.position(),
                    meta_len,
                    "{path:?}: the footer's last byte"
                );

                let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
                let metadata = reader.metadata();
                assert!(metadata.num_row_groups() >= 3);
                for group in metadata.row_groups() {
                    for column in group.columns() {
                        let (start, length) = column.byte_range();
                        let (mut pos, end) = (start as usize, (start + length) as usize);
                        while pos < end {
                            let mut walker = thrift_guard::Walker::new(&bytes[pos..end]);
                            let mut body = None;
                            assert_eq!(
                                walker.read(thrift_guard::PAGE_HEADER, &mut |id, v| {
                                    if id == 3 {
                                        body = Some(v as usize)
                                    }
                                }),
                                Ok(()),
                                "{path:?}: page header at {pos}"
                            );
                            pos += walker.position() + body.unwrap();
                            walked_pages += 1;
                        }
                        assert_eq!(pos, end, "{path:?}: the pages fill the chunk");
                        assert_eq!(
                            hostile_page_header(
                                &File::open(&path).unwrap(),
                                start,
                                length,
                                expansion_bound(column.compression())
                            )
                            .unwrap(),
                            None
                        );
                    }
                }
            }
        }
        // Six columns, three row groups or more, and more than one page in the text chunks, in eight files.
        assert!(walked_pages > 8 * 6 * 3 * 2, "{walked_pages} pages");
    }

    /// The reader the page walk hands the crate: a read at the end of the file fails and is flagged (a `File`
    /// would give 0 bytes, which the crate's skips take as done).
    #[test]
    fn a_strict_read_fails_at_the_end_of_the_file_and_flags_it() {
        use parquet::file::reader::ChunkReader;
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("three.bin");
        std::fs::write(&path, b"abc").unwrap();
        let strict = StrictFile {
            file: Arc::new(File::open(&path).unwrap()),
            past_end: Arc::new(AtomicBool::new(false)),
        };
        let mut read = strict.get_read(1).unwrap();
        let mut two = [0u8; 2];
        read.read_exact(&mut two).unwrap();
        assert_eq!(&two, b"bc");
        assert!(!strict.past_end.load(Ordering::Relaxed));
        let err = read.read(&mut two).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(strict.past_end.load(Ordering::Relaxed));
    }

    /// A column chunk that claims more bytes than the file holds, ending inside a page header: the walk reads
    /// what there is, refuses the header, and stops (it once asked for ever more bytes of a file that had no
    /// more).
    #[test]
    fn a_page_header_cut_by_the_end_of_the_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.parquet");
        // "PAR1", then a page header cut short: field 1 (i32) = 0, field 2 (i32), no value.
        std::fs::write(&path, b"PAR1\x15\x00\x15").unwrap();
        let file = File::open(&path).unwrap();
        for length in [3, 4, 300, 1 << 20, u64::MAX - 4] {
            let got = hostile_page_header(&file, 4, length, None).unwrap();
            assert_eq!(
                got,
                Some((
                    0,
                    "its header runs past the end of the column chunk".to_string()
                )),
                "length {length}"
            );
        }
    }
}
