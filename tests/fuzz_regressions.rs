//! Inputs the fuzz targets (`fuzz/`) found crashing, replayed through the same public API the target used, so
//! each fixed bug stays fixed. Each file in `tests/fuzz_regressions/` is the fuzz input as the target got it
//! (leading option bytes included).

use lshbench_core::corpus::{CorpusReader, InputFormat, OnError, ReaderOptions};
use std::path::Path;

fn input(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_regressions")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Opens the Parquet fuzz input `name` (its two option bytes dropped) with every column choice the target makes
/// and reads it to the end: documents or errors naming the file, never a panic.
fn read_parquet_input(name: &str) {
    let data = input(name);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.parquet");
    std::fs::write(&path, &data[2..]).unwrap();
    for text in ["text", "id", "body", "key"] {
        for id in [None, Some("text"), Some("id")] {
            for on_error in [OnError::Fail, OnError::Skip] {
                let options = ReaderOptions {
                    format: InputFormat::Parquet,
                    text_column: Some(text.into()),
                    id_column: id.map(String::from),
                    on_error,
                    ..Default::default()
                };
                match CorpusReader::open(&path, &options) {
                    Ok(reader) => {
                        for item in reader {
                            if let Err(e) = item {
                                assert!(e.to_string().contains("in.parquet"), "{e}");
                            }
                        }
                    }
                    Err(e) => assert!(e.to_string().contains("in.parquet"), "{e}"),
                }
            }
        }
    }
}

/// Opens the Parquet fuzz input `name` (its two option bytes dropped) as `in.parquet` with the text column `text`
/// and returns the error it must be refused with when the file is opened.
fn refused_input(name: &str, text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.parquet");
    std::fs::write(&path, &input(name)[2..]).unwrap();
    let options = ReaderOptions {
        format: InputFormat::Parquet,
        text_column: Some(text.into()),
        ..Default::default()
    };
    match CorpusReader::open(&path, &options) {
        Err(e) => e.to_string(),
        Ok(reader) => panic!("{name} was not refused ({} records read)", reader.count()),
    }
}

/// fuzz/reader_parquet: a column chunk whose footer gives a negative offset made the parquet crate's
/// `byte_range` assertion panic. The reader now refuses such a footer as a damaged file.
#[test]
fn parquet_with_a_negative_column_offset_is_an_error() {
    read_parquet_input("reader_parquet_negative_column_offset");
}

/// fuzz/reader_parquet: a footer whose embedded Arrow schema (`ARROW:schema`) names a float of unknown
/// precision made arrow-ipc panic while the file was opened (an abort in the release CLI). The reader now
/// ignores the embedded Arrow schema; the file must open or fail with an error naming it, never panic.
#[test]
fn parquet_with_a_malformed_embedded_arrow_schema_is_an_error_or_documents() {
    read_parquet_input("reader_parquet_arrow_schema_float_precision");
}

/// `reader_gzip` found a UTF-16 byte-order mark split across two gzip members (`FF` in the first, `FE ...` in
/// the second) read as text, where the same bytes uncompressed are refused: the check looked only at the first
/// member's bytes.
#[test]
fn gzip_utf16_mark_split_across_members_is_refused() {
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use std::io::Write;
    let member = |bytes: &[u8]| {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    };
    let mut gz = member(&[0xFF]);
    gz.extend(member(&[0xFE, b'r', b'\n']));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("split.gz");
    std::fs::write(&path, &gz).unwrap();
    let options = ReaderOptions {
        format: InputFormat::Text,
        ..Default::default()
    };
    let err = match CorpusReader::open(&path, &options) {
        Err(e) => e.to_string(),
        Ok(reader) => match reader.into_iter().find_map(Result::err) {
            Some(e) => e.to_string(),
            None => panic!("a UTF-16 mark split across gzip members was read as text"),
        },
    };
    assert!(err.contains("UTF-16") && err.contains("split.gz"), "{err}");
}

/// fuzz/reader_parquet: a byte-array page holding value bytes but, by its header, no value (here read as the
/// text column `id`) made the parquet crate divide by zero while decoding it (`byte_array.rs:391`), a panic (an
/// abort in the release CLI). The reader now walks the pages of the columns it reads when it opens the file and
/// refuses such a page, naming the row group and the column.
#[test]
fn parquet_byte_array_page_with_bytes_but_no_values_is_refused() {
    read_parquet_input("reader_parquet_byte_array_divide_by_zero");
    let err = refused_input("reader_parquet_byte_array_divide_by_zero", "id");
    assert!(
        err.contains("in.parquet") && err.contains("row group ") && err.contains("column `id`"),
        "{err}"
    );
}

/// The other page the parquet crate divides by zero on (found by reading its code, next to the fuzzed one): a
/// PLAIN v2 data page whose header says every value is null (`num_nulls == num_values`) but which holds value
/// bytes. Made here from a valid file of two rows, `"abc"` and null, by raising the page header's `num_nulls`
/// from 1 to 2 (one byte of its thrift encoding); the reader must refuse it when it opens the file, naming the
/// row group and column, and read the valid file as before.
#[test]
fn parquet_v2_page_of_all_nulls_holding_value_bytes_is_refused() {
    use arrow_array::{RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, Encoding};
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use std::sync::Arc;
    let batch = RecordBatch::try_from_iter([(
        "text",
        Arc::new(StringArray::from(vec![Some("abc"), None])) as _,
    )])
    .unwrap();
    let props = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_dictionary_enabled(false)
        .set_encoding(Encoding::PLAIN)
        .set_compression(Compression::UNCOMPRESSED)
        .build();
    let mut good = Vec::new();
    let mut w = ArrowWriter::try_new(&mut good, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = ReaderOptions {
        format: InputFormat::Parquet,
        on_error: OnError::Skip,
        ..Default::default()
    };
    // The valid file: one document, one null text rejected.
    let path = dir.path().join("good.parquet");
    std::fs::write(&path, &good).unwrap();
    let docs: Vec<_> = CorpusReader::open(&path, &options)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].text, "abc");
    // DataPageHeaderV2 in thrift compact encoding starts: num_values 2, num_nulls 1, num_rows 2 (i32 fields,
    // zigzag varints). Exactly one such place in the file.
    let header = [0x15, 0x04, 0x15, 0x02, 0x15, 0x04];
    let at: Vec<usize> = good
        .windows(header.len())
        .enumerate()
        .filter(|(_, w)| *w == header)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "the v2 page header, once: {at:?}");
    let mut bad = good.clone();
    bad[at[0] + 3] = 0x04;
    let path = dir.path().join("bad.parquet");
    std::fs::write(&path, &bad).unwrap();
    let err = match CorpusReader::open(&path, &options) {
        Err(e) => e.to_string(),
        // Without the check, reading on divides by zero inside the parquet crate (a panic here).
        Ok(reader) => panic!(
            "a v2 page of all nulls holding value bytes was not refused ({} records read)",
            reader.count()
        ),
    };
    assert!(
        err.contains("bad.parquet")
            && err.contains("row group 0, column `text`")
            && err.contains("all of them null"),
        "{err}"
    );
}

/// Opens `bytes` as the Parquet corpus `name` (text column `text`) and returns the error it must be refused with.
fn refused(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let options = ReaderOptions {
        format: InputFormat::Parquet,
        on_error: OnError::Skip,
        ..Default::default()
    };
    match CorpusReader::open(&path, &options) {
        Err(e) => e.to_string(),
        // Without the check, reading on panics inside the parquet crate here.
        Ok(reader) => panic!("{name} was not refused ({} records read)", reader.count()),
    }
}

/// A one-row-group file of the column `text` (nullable), dictionary-encoded, uncompressed, with the given page
/// format, and the documents it reads as.
fn dictionary_file(
    texts: &[Option<&str>],
    version: parquet::file::properties::WriterVersion,
) -> (Vec<u8>, Vec<String>) {
    use arrow_array::{RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;
    let batch =
        RecordBatch::try_from_iter([("text", Arc::new(StringArray::from(texts.to_vec())) as _)])
            .unwrap();
    let props = WriterProperties::builder()
        .set_writer_version(version)
        .set_dictionary_enabled(true)
        .set_compression(Compression::UNCOMPRESSED)
        .set_statistics_enabled(parquet::file::properties::EnabledStatistics::None)
        .build();
    let mut bytes = Vec::new();
    let mut w = ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.parquet");
    std::fs::write(&path, &bytes).unwrap();
    let options = ReaderOptions {
        format: InputFormat::Parquet,
        on_error: OnError::Skip,
        ..Default::default()
    };
    let docs = CorpusReader::open(&path, &options)
        .unwrap()
        .map(|d| d.unwrap().text.to_string())
        .collect();
    (bytes, docs)
}

/// fuzz/reader_parquet: a dictionary-encoded byte-array data page whose values section starts with a bit width
/// over 32 (here 37, read as the text column `id`) made the parquet crate's `BitReader::get_batch` assertion
/// fail (`bit_util.rs`), a panic. The reader now refuses such a page when it opens the file.
#[test]
fn parquet_dictionary_page_with_indices_over_32_bits_is_refused() {
    read_parquet_input("reader_parquet_rle_bit_width_over_32");
    let err = refused_input("reader_parquet_rle_bit_width_over_32", "id");
    assert!(
        err.contains("in.parquet") && err.contains("column `id`") && err.contains("37 bits wide"),
        "{err}"
    );
}

/// The same bit width, made from valid files: in a dictionary-encoded page of eight rows over two distinct texts,
/// the values section ends the column chunk as [bit width 1, one bit-packed run header 0x03, one byte of eight
/// 1-bit indices]. Raising the width byte to 33 must be refused for v1 pages (whose levels come first, behind a
/// 4-byte length) and v2 pages (whose levels the header sizes), and the valid files read as before. So must a v2
/// page whose levels, by its header, take the whole page, leaving no bit-width byte.
#[test]
fn parquet_dictionary_index_width_over_32_is_refused_in_v1_and_v2_pages() {
    use parquet::file::properties::WriterVersion;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let texts = [
        Some("a"),
        Some("b"),
        None,
        Some("a"),
        Some("b"),
        Some("b"),
        Some("a"),
        Some("a"),
        Some("b"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
        let (good, docs) = dictionary_file(&texts, version);
        let expected: Vec<String> = texts.iter().flatten().map(|t| t.to_string()).collect();
        assert_eq!(docs, expected);
        let path = dir.path().join("good.parquet");
        std::fs::write(&path, &good).unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let column = reader.metadata().row_group(0).column(0);
        let end = (column.dictionary_page_offset().unwrap() + column.compressed_size()) as usize;
        // Eight non-null indices 0,1,0,1,1,0,0,1 (the null has none), packed least significant bit first.
        assert_eq!(good[end - 3..end], [0x01, 0x03, 0b1001_1010], "{version:?}");
        let mut bad = good.clone();
        bad[end - 3] = 33;
        let err = refused(dir.path(), "bad.parquet", &bad);
        assert!(
            err.contains("bad.parquet")
                && err.contains("row group 0, column `text`")
                && err.contains("33 bits wide"),
            "{version:?}: {err}"
        );
        if version == WriterVersion::PARQUET_2_0 {
            // DataPageHeaderV2: num_values 9, num_nulls 1, num_rows 9, encoding RLE_DICTIONARY (8), then the
            // definition levels' byte length. Growing it by the 3 bytes of the values section leaves that
            // section empty: the crate indexes its first byte unchecked.
            let at: Vec<usize> = good
                .windows(12)
                .enumerate()
                .filter(|(_, w)| {
                    w[..9] == [0x15, 0x12, 0x15, 0x02, 0x15, 0x12, 0x15, 0x10, 0x15]
                        && w[10..] == [0x15, 0x00]
                })
                .map(|(i, _)| i)
                .collect();
            assert_eq!(at.len(), 1, "the v2 page header, once: {at:?}");
            let levels = good[at[0] + 9] / 2;
            let mut bad = good.clone();
            bad[at[0] + 9] = (levels + 3) * 2;
            let err = refused(dir.path(), "empty.parquet", &bad);
            assert!(
                err.contains("empty.parquet")
                    && err.contains("row group 0, column `text`")
                    && err.contains("without its bit-width byte"),
                "{err}"
            );
        }
    }
}

/// A v1 data page whose definition levels are declared `BIT_PACKED` (a deprecated level encoding) but would run
/// past the page: the parquet crate slices that many bytes unchecked (`parse_v1_level`), a panic. Made from a
/// valid file of 10,000 equal texts (one row null, so the column has definition levels), whose page is a few
/// bytes: bit-packed, 10,000 one-bit levels need 1,250. The page header's level encoding RLE (3, zigzag 0x06)
/// becomes BIT_PACKED (4, 0x08).
#[test]
fn parquet_v1_page_with_bit_packed_levels_past_its_end_is_refused() {
    use parquet::file::properties::WriterVersion;
    let mut texts = vec![Some("same text"); 10_000];
    texts[17] = None;
    let (good, docs) = dictionary_file(&texts, WriterVersion::PARQUET_1_0);
    assert_eq!(docs.len(), 9_999);
    // DataPageHeader (thrift compact): num_values 10,000 (zigzag varint A0 9C 01), encoding, then the
    // definition and repetition level encodings, both RLE.
    let at: Vec<usize> = good
        .windows(10)
        .enumerate()
        .filter(|(_, w)| {
            w[..5] == [0x15, 0xA0, 0x9C, 0x01, 0x15] && w[6..] == [0x15, 0x06, 0x15, 0x06]
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "the data page header, once: {at:?}");
    let mut bad = good.clone();
    bad[at[0] + 7] = 0x08;
    let dir = tempfile::tempdir().unwrap();
    let err = refused(dir.path(), "bad.parquet", &bad);
    assert!(
        err.contains("bad.parquet")
            && err.contains("row group 0, column `text`")
            && err.contains("bit-packed definition levels need 1250 bytes"),
        "{err}"
    );
}

/// Each Parquet fuzz input `name` reads to an end without a panic ([`read_parquet_input`]), and opened with the
/// text column `text` it is refused with a message naming the file and holding `what`.
fn assert_refused(cases: &[(&str, &str, &str)]) {
    for &(name, text, what) in cases {
        read_parquet_input(name);
        let err = refused_input(name, text);
        assert!(
            err.contains("in.parquet") && err.contains(what),
            "{name}: {err}"
        );
    }
}

/// fuzz/reader_parquet, slow units: a footer holding a map of 1,837,069,619 entries of boolean keys and values
/// in a field the parquet crate does not know, and a page header holding a set of 507,279,601 booleans. The
/// crate skips each element of such a container without reading a byte (a boolean element, to it, holds none):
/// 7.8 s and 2 s of CPU for these files of about 1 KB, and nesting multiplies it without bound. A third (698 s
/// in the fuzz build, this session's long run) has a page header of nested sets that runs past its column chunk:
/// the crate reads on to the end of the file, where its skip of fixed-size values (doubles) reads nothing and
/// does not fail. The reader now walks the footer and the page headers of the columns it reads first, and
/// refuses a container of booleans or a page header that does not end within its chunk.
#[test]
fn parquet_footers_and_page_headers_the_crate_would_loop_on_are_refused() {
    assert_refused(&[
        (
            "reader_parquet_footer_map_of_booleans",
            "text",
            "its footer holds a map of 1837069619 entries with boolean keys or values",
        ),
        (
            "reader_parquet_page_header_set_of_booleans",
            "id",
            "row group 0, column `id`, page 0: its header holds a set of 507279601 booleans",
        ),
        (
            "reader_parquet_page_header_past_its_chunk",
            "id",
            "row group 0, column `id`, page 0: its header runs past the end of the column chunk",
        ),
    ]);
}

/// The footer case made from a valid file: a field the crate does not know (id 100, long form) holding a map
/// of 2^31 - 1 boolean entries, inserted before the footer's stop byte (its length updated). The valid file
/// reads; the altered one is refused at once, where the crate alone loops about 8 s before failing.
#[test]
fn parquet_footer_with_an_unknown_map_of_booleans_is_refused() {
    let texts = [Some("a"), Some("b")];
    let (good, docs) = dictionary_file(
        &texts,
        parquet::file::properties::WriterVersion::PARQUET_1_0,
    );
    assert_eq!(docs, ["a", "b"]);
    let n = good.len();
    assert_eq!(&good[n - 4..], b"PAR1");
    let meta_len = u32::from_le_bytes(good[n - 8..n - 4].try_into().unwrap()) as usize;
    let stop = n - 9;
    assert_eq!(good[stop], 0, "FileMetaData ends with its stop byte");
    // Field header: type map (11), long form (delta 0); id 100 (zigzag 200 = c8 01); size 2^31 - 1
    // (ff ff ff ff 07); key and value types bool (0x11).
    let field = [0x0b, 0xc8, 0x01, 0xff, 0xff, 0xff, 0xff, 0x07, 0x11];
    let mut bad = good[..stop].to_vec();
    bad.extend_from_slice(&field);
    bad.push(0);
    bad.extend_from_slice(&((meta_len + field.len()) as u32).to_le_bytes());
    bad.extend_from_slice(b"PAR1");
    let dir = tempfile::tempdir().unwrap();
    let err = refused(dir.path(), "bad.parquet", &bad);
    assert!(
        err.contains("bad.parquet")
            && err.contains(
                "its footer holds a map of 2147483647 entries with boolean keys or values"
            ),
        "{err}"
    );
}

/// fuzz/reader_parquet (CI's 30-second run): a 1-KB file whose column read made arrow-buffer's bit-chunk
/// iterator panic (`bit_chunk_iterator.rs:224`).
#[test]
fn parquet_arrow_bit_chunks_is_an_error_or_documents() {
    read_parquet_input("reader_parquet_arrow_bit_chunks");
    let err = refused_input("reader_parquet_arrow_bit_chunks", "id");
    assert!(
        err.contains("in.parquet")
            && err.contains("column `id`")
            && err.contains("bit-packed run of 4 levels at byte 1 runs past their end at byte 1"),
        "{err}"
    );
}

/// The same run, made from valid files: in a flat optional column the crate copies RLE definition levels of
/// width 1 straight into a null mask, and a bit-packed run that reaches past the levels' bytes made that copy
/// panic. Sixteen rows, the third null: the writer encodes the levels in four bytes, a bit-packed run of one group
/// (header 0x03, then 1,1,0,1,1,1,1,1 least significant bit first) and a repeated run of eight 1s (0x10, 0x01).
/// Raising the page's count of values to 32 and the first run to four groups (0x09) makes that run 32 levels
/// long, of which the three bytes after its header hold 24: the file must be refused (v1 and v2 pages), and the
/// valid one reads as before.
#[test]
fn parquet_null_mask_levels_past_their_bytes_are_refused_in_v1_and_v2_pages() {
    use parquet::file::properties::WriterVersion;
    let mut texts = vec![Some("a"); 16];
    texts[2] = None;
    let dir = tempfile::tempdir().unwrap();
    for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
        let (good, docs) = dictionary_file(&texts, version);
        assert_eq!(docs.len(), 15, "{version:?}");
        let find = |pattern: &[u8]| -> usize {
            let at: Vec<usize> = good
                .windows(pattern.len())
                .enumerate()
                .filter(|(_, w)| *w == pattern)
                .map(|(i, _)| i)
                .collect();
            assert_eq!(at.len(), 1, "{version:?}: {pattern:02x?} once: {at:?}");
            at[0]
        };
        let run = find(&[0x03, 0b1111_1011, 0x10, 0x01]);
        // The data page header's num_values (field 1, i32 16, zigzag 0x20), then (v1) the encoding
        // RLE_DICTIONARY (8, 0x10) and the two level encodings RLE (3, 0x06), or (v2) num_nulls 1, num_rows 16
        // and the encoding.
        let count = if version == WriterVersion::PARQUET_1_0 {
            find(&[0x15, 0x20, 0x15, 0x10, 0x15, 0x06, 0x15, 0x06])
        } else {
            find(&[0x15, 0x20, 0x15, 0x02, 0x15, 0x20, 0x15, 0x10])
        };
        let mut bad = good.clone();
        bad[count + 1] = 0x40;
        bad[run] = 0x09;
        let err = refused(dir.path(), "bad.parquet", &bad);
        assert!(
            err.contains("bad.parquet")
                && err.contains("row group 0, column `text`")
                && err.contains(
                    "bit-packed run of 32 levels at byte 1 runs past their end at byte 4"
                ),
            "{version:?}: {err}"
        );
    }
}

/// fuzz/reader_parquet, slow units of session 7's hour (677 s and 246 s for one file of about 1 KB): page
/// headers the chunk walk took as well formed within their chunks, which the crate read on past the end of the
/// file, where its skip of a fixed-size or binary Thrift value reads nothing and does not fail. The page walk now
/// hands the crate a reader for which the end of the file is an error, and refuses the file. (Since session 9
/// the chunk walk reads varints as the crate does, any length and 32-bit sizes truncated, and it refuses
/// the first header itself, as running past its chunk; since session 10 it reads page headers field by field as
/// the crate's typed decoder does, and refuses the second the same way. The strict reader stays behind it.)
#[test]
fn parquet_page_headers_read_past_the_end_of_the_file_are_refused() {
    for (name, why) in [
        (
            "reader_parquet_page_header_skip_past_eof",
            "its header runs past the end of the column chunk",
        ),
        (
            "reader_parquet_page_header_skip_past_eof_2",
            "its header runs past the end of the column chunk",
        ),
    ] {
        read_parquet_input(name);
        let err = refused_input(name, "id");
        assert!(
            err.contains("in.parquet") && err.contains(why),
            "{name}: {err}"
        );
    }
}

/// fuzz/reader_parquet (session 9's run): a 1.4-KB file whose dictionary page declares 1,491,075,072 bytes
/// uncompressed from 12 compressed took 1.4 GB and 2.5 s: the parquet crate allocates, and for Snappy zeroes, a
/// buffer of the declared size before it decompresses. (Its varint is 5 bytes whose value exceeds 32 bits; the
/// crate keeps the low 32 bits of it, as the walk now does.) The reader refuses a page whose declared size is
/// more than its compressed bytes can expand to under its codec.
#[test]
fn parquet_page_declaring_more_than_its_codec_can_expand_to_is_refused() {
    let name = "reader_parquet_page_size_past_its_codec";
    read_parquet_input(name);
    let err = refused_input(name, "id");
    assert!(
        err.contains("in.parquet")
            && err.contains(
                "page 0: its header declares 1491075072 bytes uncompressed from 12 compressed, \
                 more than Snappy can expand to (64/3 per byte at most)"
            ),
        "{err}"
    );
}

/// The expansion bound on valid files at the codecs' limits, and one byte past it: two documents of 1.2 MB of one
/// letter each (Snappy's longest copies, deflate's and Zstandard's best case) in one uncompressed-plain data page
/// read back as written with each codec; the same file with the page's declared uncompressed size raised to one
/// byte more than the bound allows (rewritten in the same 4 bytes of varint) is refused when it is opened.
#[test]
fn parquet_page_sizes_are_bounded_by_their_codec_and_valid_files_at_the_limit_read() {
    use arrow_array::{RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, GzipLevel, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::sync::Arc;
    let texts = ["a".repeat(1_200_000), "b".repeat(1_200_000)];
    let dir = tempfile::tempdir().unwrap();
    for (codec, (num, den), name) in [
        (Compression::SNAPPY, (64u64, 3u64), "Snappy"),
        (
            Compression::GZIP(GzipLevel::try_new(9).unwrap()),
            (1032, 1),
            "gzip",
        ),
        (
            Compression::ZSTD(ZstdLevel::try_new(19).unwrap()),
            (32768, 1),
            "Zstandard",
        ),
    ] {
        let batch = RecordBatch::try_from_iter([(
            "text",
            Arc::new(StringArray::from(texts.to_vec())) as _,
        )])
        .unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_compression(codec)
            .set_statistics_enabled(parquet::file::properties::EnabledStatistics::None)
            .build();
        let mut good = Vec::new();
        let mut w = ArrowWriter::try_new(&mut good, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let path = dir.path().join("good.parquet");
        std::fs::write(&path, &good).unwrap();
        let options = ReaderOptions {
            format: InputFormat::Parquet,
            ..Default::default()
        };
        let docs: Vec<String> = CorpusReader::open(&path, &options)
            .unwrap()
            .map(|d| d.unwrap().text.to_string())
            .collect();
        assert_eq!(docs, texts, "{name}");
        // The data page header at the chunk's start: field 1 (type DATA_PAGE, 0), then field 2 (the uncompressed
        // size, a 4-byte varint here), then field 3 (the compressed size).
        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let at = reader.metadata().row_group(0).column(0).data_page_offset() as usize;
        assert_eq!(&good[at..at + 3], &[0x15, 0x00, 0x15], "{name}");
        let varint = |bytes: &[u8]| -> (u64, usize) {
            let (mut v, mut n) = (0u64, 0);
            loop {
                v |= u64::from(bytes[n] & 0x7f) << (7 * n);
                n += 1;
                if bytes[n - 1] & 0x80 == 0 {
                    return (v, n);
                }
            }
        };
        let (unpacked, width) = varint(&good[at + 3..]);
        assert_eq!(width, 4, "{name}");
        assert_eq!(good[at + 3 + width], 0x15, "{name}");
        let (packed, _) = varint(&good[at + 3 + width + 1..]);
        let (unpacked, packed) = (unpacked / 2, packed / 2);
        // Every valid page is within the bound; this one at most a few times inside it.
        assert!(
            unpacked * den <= packed * num,
            "{name}: {unpacked} from {packed}"
        );
        let over = packed * num / den + 1;
        let zigzag = over * 2;
        assert!(zigzag < 1 << 28, "{name}: {over} fits 4 bytes");
        let mut bad = good.clone();
        for i in 0..4 {
            bad[at + 3 + i] = ((zigzag >> (7 * i)) & 0x7f) as u8 | if i < 3 { 0x80 } else { 0 };
        }
        let err = refused(dir.path(), "bad.parquet", &bad);
        let expected = format!(
            "row group 0, column `text`, page 0: its header declares {over} bytes uncompressed from \
             {packed} compressed, more than {name} can expand to"
        );
        assert!(
            err.contains("bad.parquet") && err.contains(&expected),
            "{name}: {err}"
        );
    }
}

/// fuzz/reader_parquet (session 9, on b020002), slow units the boolean-container walk passed: a footer (1.5 s on
/// the release CLI, any column) and a page header (11.6 s, text column `id`), where the crate's
/// `skip_till_depth` spent the time. The crate's typed decoder reads a field it knows by its id as the format's
/// type, whatever the type nibble of its header says: the footer opens with field 1, `version`, marked as a
/// set, which the crate reads as an i32 where a nibble-following walk read a set and, a few bytes on, the
/// struct's stop byte. Read the crate's way, both lead into skipped containers of booleans (the page header's
/// then runs past its column chunk). The walk now follows the crate's decoders field by field.
#[test]
fn parquet_footers_and_page_headers_are_walked_as_the_crates_typed_decoder_reads_them() {
    assert_refused(&[
        (
            "reader_parquet_footer_typed_decode_1s",
            "text",
            "its footer holds a map of 33 entries with boolean keys or values",
        ),
        (
            "reader_parquet_footer_typed_decode_1s",
            "id",
            "its footer holds a map of 33 entries with boolean keys or values",
        ),
        (
            "reader_parquet_page_header_typed_decode_11s",
            "id",
            "row group 0, column `id`, page 0: its header runs past the end of the column chunk",
        ),
    ]);
}

/// fuzz/reader_parquet (CI's 30-second run under ASan, on 0f4b83e): a 910-byte file whose footer gives a
/// schema element 457,127,231 children in a schema of 6 elements. The parquet crate reserves a pointer per
/// child before it finds the elements missing, a 3.7 GB allocation: ASan's malloc limit stopped the fuzz run,
/// and under a memory limit (`ulimit -v`) the release CLI aborted on the failed allocation. The walk refuses a
/// count of children at or above the schema's size.
#[test]
fn parquet_schema_element_with_more_children_than_the_schema_is_refused() {
    assert_refused(&[(
        "reader_parquet_schema_children_alloc",
        "id",
        "its footer declares a schema element of 457127231 children in a schema of 6 elements, which the \
         parquet crate would allocate memory for before reading",
    )]);
}

/// The other size the crate reserves for before reading, found by reading its footer decoder next to the fuzzed
/// one: the list of row groups (`Vec::with_capacity` of the declared size, where every other list the crate reads
/// is first checked against the bytes left). A hand-made footer: version 1, a schema of one empty root, no rows,
/// and a list that claims 2^31 - 1 row groups in the 1 byte after its header. Without the check the crate asks
/// for hundreds of gigabytes and the process aborts.
#[test]
fn parquet_footer_claiming_two_billion_row_groups_is_refused() {
    let footer: &[u8] = &[
        0x15, 0x02, // field 1 (i32) version = 1
        0x19, 0x1c, // field 2 (list): 1 struct, the root
        0x48, 0x01, b'r', // its field 4 (binary) name "r"
        0x15, 0x00, // its field 5 (i32) num_children = 0
        0x00, // its stop
        0x16, 0x00, // field 3 (i64) num_rows = 0
        0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, // field 4 (list): 2^31 - 1 structs
        0x00, // what follows: one byte
    ];
    let mut file = b"PAR1".to_vec();
    file.extend_from_slice(footer);
    file.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    file.extend_from_slice(b"PAR1");
    let dir = tempfile::tempdir().unwrap();
    let err = refused(dir.path(), "rowgroups.parquet", &file);
    assert!(
        err.contains("rowgroups.parquet")
            && err
                .contains("its footer declares a list of 2147483647 elements in its last 1 bytes"),
        "{err}"
    );
}
