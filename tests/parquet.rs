//! Parquet in and out, on the shipped SpamAssassin corpus converted to Parquet here (with the arrow-rs writer,
//! in a temporary folder): Parquet in gives the same documents, the same `sketch` bytes and the same `dedup`
//! pairs and groups as JSONL in, for string, large string, string view, binary and dictionary-encoded text
//! columns, many row groups and every codec the build reads; nulls are counted rejects (`--on-error skip`) or
//! stop the run (`fail`); a missing column, a column of the wrong type and a file that is not Parquet are clear
//! errors. Parquet out, read back, equals the CSV and NPY outputs of the same run.

use arrow_array::builder::StringDictionaryBuilder;
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, FixedSizeListArray, Float64Array, Int64Array,
    LargeStringArray, RecordBatch, StringArray, StringViewArray, UInt32Array,
};
use arrow_schema::{DataType, Field};
use lshbench_core::corpus::{CorpusReader, Document, OnError, ReadError, ReaderOptions};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/spamassassin.jsonl.gz");

/// The shipped corpus as (id, text), read once through the JSONL reader.
fn corpus() -> &'static [(String, String)] {
    static DOCS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    DOCS.get_or_init(|| {
        let docs = read_ok(Path::new(CORPUS), &ReaderOptions::default());
        assert_eq!(docs.len(), 6046);
        docs.into_iter().map(|d| (d.id, d.text)).collect()
    })
}

fn read_ok(path: &Path, options: &ReaderOptions) -> Vec<Document> {
    let reader = CorpusReader::open(path, options).unwrap_or_else(|e| panic!("open: {e}"));
    reader
        .map(|d| d.unwrap_or_else(|e| panic!("read: {e}")))
        .collect()
}

/// How the text column is stored.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Utf8,
    LargeUtf8,
    Utf8View,
    Binary,
    Dictionary,
}

const KINDS: [Kind; 5] = [
    Kind::Utf8,
    Kind::LargeUtf8,
    Kind::Utf8View,
    Kind::Binary,
    Kind::Dictionary,
];

fn text_array(kind: Kind, texts: &[Option<&[u8]>]) -> ArrayRef {
    fn utf8(b: &[u8]) -> &str {
        std::str::from_utf8(b).expect("valid UTF-8 for a string column")
    }
    let strs = || texts.iter().map(|t| t.map(utf8));
    match kind {
        Kind::Utf8 => Arc::new(StringArray::from_iter(strs())),
        Kind::LargeUtf8 => Arc::new(LargeStringArray::from_iter(strs())),
        Kind::Utf8View => Arc::new(StringViewArray::from_iter(strs())),
        Kind::Binary => Arc::new(BinaryArray::from_iter(texts.iter().copied())),
        Kind::Dictionary => {
            let mut b = StringDictionaryBuilder::<Int32Type>::new();
            for t in strs() {
                b.append_option(t);
            }
            Arc::new(b.finish())
        }
    }
}

/// Writes a Parquet file with an `id` column (utf8, or none), a `text` column of `kind`, and a `noise` column
/// the reader must not need, in row groups of `group_rows`.
fn write_parquet(
    path: &Path,
    ids: Option<ArrayRef>,
    kind: Kind,
    texts: &[Option<&[u8]>],
    group_rows: usize,
    compression: Compression,
) {
    let text = text_array(kind, texts);
    let noise: ArrayRef = Arc::new(Int64Array::from_iter_values(0..texts.len() as i64));
    let mut columns = vec![("noise", noise)];
    if let Some(ids) = ids {
        columns.push(("id", ids));
    }
    columns.push(("text", text));
    let batch =
        RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, a)| (n, a, true)))
            .unwrap();
    let props = WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(group_rows))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    let meta = w.close().unwrap();
    assert_eq!(
        meta.num_row_groups(),
        texts.len().div_ceil(group_rows),
        "the file has the row groups the test means"
    );
}

/// The shipped corpus as Parquet: string ids, the text as `kind`.
fn corpus_parquet(path: &Path, kind: Kind, group_rows: usize, compression: Compression) {
    let docs = corpus();
    let ids = StringArray::from_iter_values(docs.iter().map(|d| d.0.as_str()));
    let texts: Vec<Option<&[u8]>> = docs.iter().map(|d| Some(d.1.as_bytes())).collect();
    write_parquet(
        path,
        Some(Arc::new(ids)),
        kind,
        &texts,
        group_rows,
        compression,
    );
}

fn id_column() -> ReaderOptions {
    ReaderOptions {
        id_column: Some("id".into()),
        ..Default::default()
    }
}

#[test]
fn parquet_in_reads_the_same_documents_as_jsonl_for_every_column_kind_and_codec() {
    let dir = tempfile::tempdir().unwrap();
    let expected = corpus();
    let cases = [
        (Kind::Utf8, 6046, Compression::SNAPPY),
        (
            Kind::LargeUtf8,
            1000,
            Compression::ZSTD(ZstdLevel::default()),
        ),
        (Kind::Utf8View, 777, Compression::UNCOMPRESSED),
        (Kind::Binary, 500, Compression::GZIP(GzipLevel::default())),
        // A dictionary per row group, and row groups smaller than a reader batch.
        (Kind::Dictionary, 97, Compression::SNAPPY),
    ];
    for (kind, group_rows, compression) in cases {
        let path = dir.path().join(format!("{kind:?}.parquet"));
        corpus_parquet(&path, kind, group_rows, compression);
        // Parquet decodes as it reads, so `sketch` writes on the signing thread (see `CorpusReader::decodes`).
        assert!(
            CorpusReader::open(&path, &id_column()).unwrap().decodes(),
            "{kind:?}"
        );
        let docs = read_ok(&path, &id_column());
        assert_eq!(docs.len(), expected.len(), "{kind:?}");
        for (i, (doc, (id, text))) in docs.iter().zip(expected).enumerate() {
            assert_eq!(doc.index, i as u64);
            assert!(
                &doc.id == id && &doc.text == text,
                "{kind:?}: row {i} differs"
            );
        }
        // Without an id column a row is named by its 0-based index, as a CSV record is.
        let docs = read_ok(&path, &ReaderOptions::default());
        assert_eq!(docs[0].id, "0");
        assert_eq!(docs[6045].id, "6045");
        assert_eq!(docs[6045].text, expected[6045].1);
    }
}

#[test]
fn integer_and_dictionary_id_columns_and_custom_column_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ints.parquet");
    let texts: Vec<Option<&[u8]>> = vec![Some(b"alpha"), Some(b"beta"), Some(b"gamma")];
    let ids: ArrayRef = Arc::new(Int64Array::from(vec![-7, 0, i64::MAX]));
    write_parquet(&path, Some(ids), Kind::Utf8, &texts, 2, Compression::SNAPPY);
    let docs = read_ok(&path, &id_column());
    let got: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| (d.id.as_str(), d.text.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("-7", "alpha"),
            ("0", "beta"),
            ("9223372036854775807", "gamma")
        ]
    );

    // The id and text columns under other names, the id dictionary-encoded.
    let path = dir.path().join("named.parquet");
    let mut ids = StringDictionaryBuilder::<Int32Type>::new();
    for id in ["x", "y", "x"] {
        ids.append_value(id);
    }
    let batch = RecordBatch::try_from_iter([
        (
            "body",
            Arc::new(StringArray::from(vec!["one", "two", "three"])) as ArrayRef,
        ),
        ("doc_id", Arc::new(ids.finish()) as ArrayRef),
    ])
    .unwrap();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let options = ReaderOptions {
        id_column: Some("doc_id".into()),
        text_column: Some("body".into()),
        ..Default::default()
    };
    let docs = read_ok(&path, &options);
    let got: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| (d.id.as_str(), d.text.as_str()))
        .collect();
    assert_eq!(got, [("x", "one"), ("y", "two"), ("x", "three")]);
}

/// Reads everything: documents, errors in order, final counts.
fn read_all(
    path: &Path,
    options: &ReaderOptions,
) -> (
    Vec<Document>,
    Vec<ReadError>,
    lshbench_core::corpus::ReadStats,
) {
    let mut reader = CorpusReader::open(path, options).expect("open");
    let (mut docs, mut errs) = (Vec::new(), Vec::new());
    for item in reader.by_ref() {
        match item {
            Ok(d) => docs.push(d),
            Err(e) => errs.push(e),
        }
    }
    (docs, errs, reader.stats().clone())
}

#[test]
fn null_texts_and_ids_are_counted_rejects_under_skip_and_stop_the_run_under_fail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nulls.parquet");
    let n = 2500; // three row groups of 1000, and more than one reader batch in each
    let owned: Vec<String> = (0..n).map(|i| format!("document number {i}")).collect();
    let null_text = [3usize, 999, 1000, 2499];
    let texts: Vec<Option<&[u8]>> = owned
        .iter()
        .enumerate()
        .map(|(i, t)| (!null_text.contains(&i)).then_some(t.as_bytes()))
        .collect();
    for kind in KINDS {
        write_parquet(&path, None, kind, &texts, 1000, Compression::SNAPPY);
        let skip = ReaderOptions {
            on_error: OnError::Skip,
            ..Default::default()
        };
        let (docs, errs, stats) = read_all(&path, &skip);
        assert!(errs.is_empty(), "skip yields no errors");
        assert_eq!(
            (stats.records, stats.documents, stats.rejected),
            (n as u64, n as u64 - 4, 4),
            "{kind:?}"
        );
        // Rejected rows keep their index: the ids skip exactly the null rows.
        let ids: Vec<usize> = docs.iter().map(|d| d.id.parse().unwrap()).collect();
        let expected: Vec<usize> = (0..n).filter(|i| !null_text.contains(i)).collect();
        assert_eq!(ids, expected, "{kind:?}");
        assert!(
            docs.iter()
                .all(|d| d.text == owned[d.id.parse::<usize>().unwrap()])
        );
        let shown = path.display().to_string();
        assert_eq!(
            stats.first_rejections,
            null_text
                .iter()
                .map(|i| format!("{shown}:{}: field `text`: null", i + 1))
                .collect::<Vec<_>>(),
            "the message names the file, the 1-based row and the column"
        );

        let (docs, errs, stats) = read_all(&path, &ReaderOptions::default());
        assert_eq!(docs.len(), 3, "fail stops at the first null (row 4)");
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            format!("{shown}:4: field `text`: null")
        );
        assert_eq!((stats.records, stats.rejected), (4, 1));
    }

    // A null id is a malformed record too, naming the id column.
    let ids: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None, Some("c")]));
    let texts: Vec<Option<&[u8]>> = vec![Some(b"x"), Some(b"y"), Some(b"z")];
    write_parquet(
        &path,
        Some(ids),
        Kind::Utf8,
        &texts,
        10,
        Compression::SNAPPY,
    );
    let skip = ReaderOptions {
        on_error: OnError::Skip,
        ..id_column()
    };
    let (docs, _, stats) = read_all(&path, &skip);
    assert_eq!(
        docs.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["a", "c"]
    );
    assert_eq!(stats.rejected, 1);
    assert!(stats.first_rejections[0].ends_with(":2: field `id`: null"));
}

#[test]
fn invalid_utf8_in_a_binary_column_is_replaced_and_counted_or_rejected_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bin.parquet");
    let texts: Vec<Option<&[u8]>> = vec![Some(b"good"), Some(b"bad \xff byte"), Some(b"fine")];
    write_parquet(&path, None, Kind::Binary, &texts, 10, Compression::SNAPPY);
    let (docs, errs, stats) = read_all(&path, &ReaderOptions::default());
    assert!(errs.is_empty());
    assert_eq!(docs[1].text, "bad \u{FFFD} byte");
    assert_eq!(stats.utf8_replaced, 1);
    let strict = ReaderOptions {
        strict_utf8: true,
        on_error: OnError::Skip,
        ..Default::default()
    };
    let (docs, _, stats) = read_all(&path, &strict);
    assert_eq!(docs.len(), 2);
    assert_eq!(stats.rejected, 1);
    assert!(
        stats.first_rejections[0].contains(":2: field `text`: invalid UTF-8 at byte 4"),
        "{:?}",
        stats.first_rejections
    );
}

fn open_err(path: &Path, options: &ReaderOptions) -> String {
    match CorpusReader::open(path, options) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn missing_or_unusable_columns_and_files_that_are_not_parquet_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.parquet");
    let texts: Vec<Option<&[u8]>> = vec![Some(b"a"), Some(b"b")];
    let ids: ArrayRef = Arc::new(StringArray::from(vec!["1", "2"]));
    write_parquet(
        &path,
        Some(ids),
        Kind::Utf8,
        &texts,
        10,
        Compression::SNAPPY,
    );
    let shown = path.display().to_string();
    let options = ReaderOptions {
        text_column: Some("body".into()),
        ..Default::default()
    };
    assert_eq!(
        open_err(&path, &options),
        format!(
            "{shown}: field `body`: no such column; the file has: noise (Int64), id (Utf8), text (Utf8)"
        )
    );
    let options = ReaderOptions {
        id_column: Some("doc".into()),
        ..Default::default()
    };
    assert!(
        open_err(&path, &options).starts_with(&format!("{shown}: field `doc`: no such column"))
    );
    // An integer column holds no text.
    let options = ReaderOptions {
        text_column: Some("noise".into()),
        ..Default::default()
    };
    assert_eq!(
        open_err(&path, &options),
        format!(
            "{shown}: field `noise`: the column holds Int64; expected a string or binary column \
             (or one of those dictionary-encoded)"
        )
    );

    // Not Parquet: JSONL under a .parquet name, an empty file, a file cut short (its footer lost).
    let jsonl = dir.path().join("j.parquet");
    std::fs::write(&jsonl, "{\"id\":\"a\",\"text\":\"x\"}\n").unwrap();
    let empty = dir.path().join("e.parquet");
    std::fs::write(&empty, "").unwrap();
    let cut = dir.path().join("cut.parquet");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() - 20]).unwrap();
    for bad in [&jsonl, &empty, &cut] {
        let msg = open_err(bad, &ReaderOptions::default());
        assert!(
            msg.starts_with(&format!("{}: not a readable Parquet file (", bad.display())),
            "{msg}"
        );
    }
    // --format parquet on a file with another extension is read as Parquet.
    let renamed = dir.path().join("c.data");
    std::fs::copy(&path, &renamed).unwrap();
    let options = ReaderOptions {
        format: lshbench_core::corpus::InputFormat::Parquet,
        ..Default::default()
    };
    assert_eq!(read_ok(&renamed, &options).len(), 2);
}

// ---------------------------------------------------------------------------------------------------------
// The binary

fn lshbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lshbench"))
        .args(args)
        .output()
        .expect("the lshbench binary runs")
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "lshbench failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn sketch(input: &Path, output: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "sketch",
        "--input",
        s(input),
        "--kernel",
        "oph-opt",
        "--num-perm",
        "64",
        "--output",
        s(output),
    ];
    args.extend_from_slice(extra);
    lshbench(&args)
}

fn read_parquet(path: &Path) -> RecordBatch {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    arrow_select_concat(&batches)
}

/// Concatenates batches of one schema (a few lines here rather than a dependency on arrow-select for tests).
fn arrow_select_concat(batches: &[RecordBatch]) -> RecordBatch {
    let schema = batches[0].schema();
    let columns = (0..schema.fields().len())
        .map(|c| {
            let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            concat(&parts)
        })
        .collect();
    RecordBatch::try_new(schema, columns).unwrap()
}

fn concat(parts: &[&dyn Array]) -> ArrayRef {
    use arrow_array::cast::AsArray;
    match parts[0].data_type() {
        DataType::Utf8 => Arc::new(StringArray::from_iter(
            parts.iter().flat_map(|a| a.as_string::<i32>().iter()),
        )),
        DataType::Float64 => {
            Arc::new(Float64Array::from_iter(parts.iter().flat_map(|a| {
                a.as_primitive::<arrow_array::types::Float64Type>().iter()
            })))
        }
        DataType::Int64 => {
            Arc::new(Int64Array::from_iter(parts.iter().flat_map(|a| {
                a.as_primitive::<arrow_array::types::Int64Type>().iter()
            })))
        }
        DataType::Boolean => Arc::new(BooleanArray::from_iter(
            parts.iter().flat_map(|a| a.as_boolean().iter()),
        )),
        DataType::FixedSizeList(field, k) => {
            let values: Vec<&dyn Array> = parts
                .iter()
                .map(|a| a.as_fixed_size_list().values().as_ref())
                .collect();
            Arc::new(FixedSizeListArray::try_new(field.clone(), *k, concat(&values), None).unwrap())
        }
        DataType::UInt32 => {
            Arc::new(UInt32Array::from_iter(parts.iter().flat_map(|a| {
                a.as_primitive::<arrow_array::types::UInt32Type>().iter()
            })))
        }
        other => panic!("no concat for {other}"),
    }
}

/// One cell as the CSV writers render it: floats to 6 decimals, bools as 1/0, null as empty.
fn render(a: &dyn Array, i: usize) -> String {
    use arrow_array::cast::AsArray;
    if a.is_null(i) {
        return String::new();
    }
    match a.data_type() {
        DataType::Utf8 => a.as_string::<i32>().value(i).to_string(),
        DataType::Int64 => a
            .as_primitive::<arrow_array::types::Int64Type>()
            .value(i)
            .to_string(),
        DataType::Float64 => format!(
            "{:.6}",
            a.as_primitive::<arrow_array::types::Float64Type>().value(i)
        ),
        DataType::Boolean => (if a.as_boolean().value(i) { "1" } else { "0" }).to_string(),
        other => panic!("no rendering for {other}"),
    }
}

/// A Parquet table rendered as CSV records (header first), to compare with the CSV output of the same run.
fn as_csv_records(batch: &RecordBatch) -> Vec<Vec<String>> {
    let mut out = vec![
        batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect::<Vec<_>>(),
    ];
    for i in 0..batch.num_rows() {
        out.push(batch.columns().iter().map(|c| render(c, i)).collect());
    }
    out
}

fn csv_records(path: &Path) -> Vec<Vec<String>> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_path(path)
        .unwrap();
    r.records()
        .map(|rec| rec.unwrap().iter().map(str::to_string).collect())
        .collect()
}

#[test]
fn sketch_of_parquet_input_equals_sketch_of_jsonl_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("ref.csv");
    ok(&sketch(Path::new(CORPUS), &reference, &[]));
    let expected = std::fs::read(&reference).unwrap();
    for (kind, group_rows) in [
        (Kind::Utf8, 1000),
        (Kind::LargeUtf8, 6046),
        (Kind::Dictionary, 333),
    ] {
        let input = dir.path().join(format!("{kind:?}.parquet"));
        corpus_parquet(&input, kind, group_rows, Compression::SNAPPY);
        let out = dir.path().join(format!("{kind:?}.csv"));
        ok(&sketch(&input, &out, &["--id-column", "id"]));
        assert!(
            std::fs::read(&out).unwrap() == expected,
            "{kind:?}: signatures differ from JSONL input's"
        );
    }
}

#[test]
fn sketch_parquet_output_equals_the_csv_and_npy_outputs_and_ignores_the_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let corpus_path = Path::new(CORPUS);
    let csv = dir.path().join("s.csv");
    let npy = dir.path().join("s.npy");
    ok(&sketch(corpus_path, &csv, &[]));
    ok(&sketch(corpus_path, &npy, &[]));
    let pq = dir.path().join("s.parquet");
    let out = sketch(corpus_path, &pq, &["--threads", "2"]);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("wrote {}", pq.display())));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(
        left.is_empty(),
        "the temporary file was renamed into place: {left:?}"
    );

    let batch = read_parquet(&pq);
    let names: Vec<&str> = batch
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["id", "signature", "empty"]);
    assert_eq!(
        batch.schema().field(1).data_type(),
        &DataType::FixedSizeList(Arc::new(Field::new("item", DataType::UInt32, false)), 64)
    );
    use arrow_array::cast::AsArray;
    let ids = batch.column(0).as_string::<i32>();
    let sigs = batch.column(1).as_fixed_size_list();
    let slots = sigs
        .values()
        .as_primitive::<arrow_array::types::UInt32Type>()
        .values();
    let empty = batch.column(2).as_boolean();

    let rows = csv_records(&csv);
    assert_eq!(rows.len() - 1, batch.num_rows());
    assert_eq!(batch.num_rows(), 6046);
    for (r, row) in rows[1..].iter().enumerate() {
        assert_eq!(row[0], ids.value(r));
        let from_csv: Vec<u32> = row[1..].iter().map(|v| v.parse().unwrap()).collect();
        assert_eq!(from_csv, slots[r * 64..(r + 1) * 64], "row {r}");
    }
    let npy_slots: Vec<u32> = npyz::NpyFile::new(std::fs::read(&npy).unwrap().as_slice())
        .unwrap()
        .into_vec()
        .unwrap();
    assert_eq!(npy_slots, slots.to_vec());
    let id_rows = csv_records(&lshbench_core::sketch::ids_path(&npy));
    for (r, row) in id_rows[1..].iter().enumerate() {
        assert_eq!(
            (row[1].as_str(), row[2] == "1"),
            (ids.value(r), empty.value(r))
        );
    }

    // The bytes do not depend on the thread count.
    let one = dir.path().join("one.parquet");
    ok(&sketch(corpus_path, &one, &["--threads", "1"]));
    assert!(std::fs::read(&one).unwrap() == std::fs::read(&pq).unwrap());
}

fn dedup(input: &Path, out: &Path, ext: &str, extra: &[&str]) {
    let pairs = out.join(format!("pairs.{ext}"));
    let clusters = out.join(format!("clusters.{ext}"));
    let report = out.join(format!("groups.{ext}"));
    let mut args = vec![
        "dedup",
        "--input",
        s(input),
        "--bands",
        "42",
        "--rows",
        "3",
        "--threshold",
        "0.5",
        "--pairs",
        s(&pairs),
        "--clusters",
        s(&clusters),
        "--group-report",
        s(&report),
    ];
    args.extend_from_slice(extra);
    ok(&lshbench(&args));
}

#[test]
fn dedup_of_parquet_input_and_parquet_output_equal_the_jsonl_and_csv_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (jsonl_csv, pq_csv, jsonl_pq) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    for d in [&jsonl_csv, &pq_csv, &jsonl_pq] {
        std::fs::create_dir(d).unwrap();
    }
    dedup(Path::new(CORPUS), &jsonl_csv, "csv", &[]);
    let input = dir.path().join("corpus.parquet");
    corpus_parquet(
        &input,
        Kind::Dictionary,
        1000,
        Compression::ZSTD(ZstdLevel::default()),
    );
    dedup(&input, &pq_csv, "csv", &["--id-column", "id"]);
    dedup(Path::new(CORPUS), &jsonl_pq, "parquet", &[]);

    for table in ["pairs", "clusters", "groups"] {
        let csv_path = jsonl_csv.join(format!("{table}.csv"));
        let expected = std::fs::read(&csv_path).unwrap();
        assert!(
            std::fs::read(pq_csv.join(format!("{table}.csv"))).unwrap() == expected,
            "{table}: Parquet input gives other results than JSONL input"
        );
        let records = csv_records(&csv_path);
        assert!(
            records.len() > 100,
            "{table}: the corpus has near-duplicates"
        );
        let batch = read_parquet(&jsonl_pq.join(format!("{table}.parquet")));
        assert_eq!(
            as_csv_records(&batch),
            records,
            "{table}: Parquet output differs from the CSV output"
        );
    }
    // Types, not text: the pairs' similarities are float64 (jaccard nullable), the groups' counts int64.
    let pairs = read_parquet(&jsonl_pq.join("pairs.parquet"));
    let schema = pairs.schema();
    assert_eq!(schema.field(2).data_type(), &DataType::Float64);
    assert!(schema.field(3).is_nullable() && !schema.field(2).is_nullable());
    let clusters = read_parquet(&jsonl_pq.join("clusters.parquet"));
    assert_eq!(clusters.schema().field(0).data_type(), &DataType::Int64);
    assert_eq!(clusters.schema().field(4).data_type(), &DataType::Boolean);
}

#[test]
fn the_cli_reports_nulls_and_bad_files_with_a_message_and_a_non_zero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("nulls.parquet");
    let texts: Vec<Option<&[u8]>> = vec![Some(b"one document"), None, Some(b"another one")];
    write_parquet(&input, None, Kind::Utf8, &texts, 10, Compression::SNAPPY);
    let out_path = dir.path().join("s.csv");

    let out = sketch(&input, &out_path, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:2: field `text`: null", input.display())),
        "{err}"
    );

    let out = sketch(&input, &out_path, &["--on-error", "skip"]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("read 3 records: 2 documents, 1 rejected"),
        "{err}"
    );
    let rows = csv_records(&out_path);
    assert_eq!(
        rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        ["id", "0", "2"]
    );

    let not_parquet = dir.path().join("x.parquet");
    std::fs::write(&not_parquet, "id,text\n1,hello\n").unwrap();
    for (args, expected) in [
        (
            vec!["--input", s(&not_parquet)],
            format!("{}: not a readable Parquet file (", not_parquet.display()),
        ),
        (
            vec!["--input", s(&input), "--text-column", "body"],
            format!(
                "{}: field `body`: no such column; the file has: noise (Int64), text (Utf8)",
                input.display()
            ),
        ),
    ] {
        let mut full = vec!["sketch", "--output", s(&out_path)];
        full.extend(args);
        let out = lshbench(&full);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.starts_with(&format!("error: {expected}")), "{err}");
    }
}

#[test]
fn damaged_files_give_errors_or_documents_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let docs = &corpus()[..600];
    let ids = StringArray::from_iter_values(docs.iter().map(|d| d.0.as_str()));
    let texts: Vec<Option<&[u8]>> = docs.iter().map(|d| Some(d.1.as_bytes())).collect();
    let damaged = dir.path().join("damaged.parquet");
    let mut outcomes = [0usize; 3]; // open refused, read stopped by an error, read to the end
    for (kind, compression) in [
        (Kind::Utf8, Compression::UNCOMPRESSED),
        (Kind::Dictionary, Compression::SNAPPY),
    ] {
        let path = dir.path().join("whole.parquet");
        write_parquet(
            &path,
            Some(Arc::new(ids.clone())),
            kind,
            &texts,
            200,
            compression,
        );
        let whole = std::fs::read(&path).unwrap();
        // Damage 4 bytes at 60 positions spread over the pages (data, dictionaries, headers) and 30 spread over
        // the footer (its length is the little-endian u32 before the closing magic bytes).
        let footer = u32::from_le_bytes(whole[whole.len() - 8..whole.len() - 4].try_into().unwrap())
            as usize;
        let footer_start = whole.len() - 8 - footer;
        let pages = (0..60).map(|i| 4 + i * (footer_start - 8) / 60);
        let footer = (0..30).map(|i| footer_start + i * (footer - 4) / 30);
        for (step, at) in pages.chain(footer).enumerate() {
            let mut bytes = whole.clone();
            for (j, b) in bytes[at..at + 4].iter_mut().enumerate() {
                *b ^= 0x5a ^ (step as u8).wrapping_mul(31) ^ j as u8;
            }
            std::fs::write(&damaged, &bytes).unwrap();
            let result =
                std::panic::catch_unwind(|| match CorpusReader::open(&damaged, &id_column()) {
                    Err(_) => 0,
                    Ok(reader) => {
                        let mut stopped = false;
                        for item in reader {
                            stopped |= item.is_err();
                        }
                        if stopped { 1 } else { 2 }
                    }
                });
            match result {
                Ok(outcome) => outcomes[outcome] += 1,
                Err(_) => {
                    panic!("{kind:?}/{compression:?}: damage at byte {at} made the reader panic")
                }
            }
        }
    }
    assert!(
        outcomes[0] > 0 && outcomes[1] > 0,
        "the damage reached both the footer and the pages: {outcomes:?}"
    );
}
