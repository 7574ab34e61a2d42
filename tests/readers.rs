//! The corpus readers on small files written for each case: every format, gzip, ids, malformed records,
//! invalid UTF-8, skip-mode counts, directory order, and the shipped SpamAssassin corpus.

use lshbench::cli::args::ReaderArgs;
use lshbench_core::corpus::{
    CorpusReader, Document, InputFormat, OnError, ReadError, ReaderOptions,
};
use std::io::Write;
use std::path::{Path, PathBuf};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

fn write_gz(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    write(dir, name, &enc.finish().unwrap())
}

/// Reads everything, returning the documents, the errors (in order) and the final stats.
fn read_all(
    path: &Path,
    options: &ReaderOptions,
) -> (
    Vec<Document>,
    Vec<ReadError>,
    lshbench_core::corpus::ReadStats,
) {
    let mut reader = CorpusReader::open(path, options).expect("open");
    let mut docs = Vec::new();
    let mut errs = Vec::new();
    for item in reader.by_ref() {
        match item {
            Ok(d) => docs.push(d),
            Err(e) => errs.push(e),
        }
    }
    (docs, errs, reader.stats().clone())
}

fn ok_docs(path: &Path, options: &ReaderOptions) -> Vec<Document> {
    let (docs, errs, stats) = read_all(path, options);
    assert!(errs.is_empty(), "unexpected errors: {errs:?}");
    assert_eq!(stats.documents, docs.len() as u64);
    assert_eq!(stats.records, docs.len() as u64);
    assert_eq!(stats.rejected, 0);
    docs
}

fn pairs(docs: &[Document]) -> Vec<(String, String)> {
    docs.iter()
        .map(|d| (d.id.clone(), d.text.clone()))
        .collect()
}

fn skip() -> ReaderOptions {
    ReaderOptions {
        on_error: OnError::Skip,
        ..Default::default()
    }
}

fn malformed(err: &ReadError) -> (&Path, u64, &str, &str) {
    match err {
        ReadError::Malformed {
            file,
            line,
            field,
            reason,
        } => (file.as_path(), *line, field.as_str(), reason.as_str()),
        other => panic!("expected a malformed-record error, got {other:?}"),
    }
}

const JSONL: &str = "{\"id\":\"a\",\"text\":\"first doc\"}\n\
                     {\"text\":\"no id here\",\"other\":[1,{\"x\":2}]}\n\
                     \n\
                     {\"id\":42,\"text\":\"numeric \\\"id\\\" \\u00e9\"}\r\n\
                     {\"id\":\"d\",\"text\":\"\"}";

fn jsonl_expected() -> Vec<(String, String)> {
    vec![
        ("a".into(), "first doc".into()),
        ("1".into(), "no id here".into()),
        ("42".into(), "numeric \"id\" \u{e9}".into()),
        ("d".into(), "".into()),
    ]
}

#[test]
fn jsonl_reads_string_numeric_and_missing_ids_and_skips_blank_lines() {
    let dir = tempfile::tempdir().unwrap();
    for path in [
        write(dir.path(), "c.jsonl", JSONL.as_bytes()),
        write_gz(dir.path(), "c.jsonl.gz", JSONL.as_bytes()),
    ] {
        let docs = ok_docs(&path, &ReaderOptions::default());
        assert_eq!(pairs(&docs), jsonl_expected(), "{}", path.display());
        assert_eq!(
            docs.iter().map(|d| d.index).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
    }
}

#[test]
fn jsonl_custom_fields_and_missing_id_field_uses_record_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.ndjson",
        b"{\"key\":7,\"body\":\"x\",\"id\":\"ignored\"}\n{\"body\":\"y\"}\n{\"key\":-3,\"body\":\"z\"}\n",
    );
    let options = ReaderOptions {
        id_field: Some("key".into()),
        text_field: "body".into(),
        ..Default::default()
    };
    let docs = ok_docs(&path, &options);
    assert_eq!(
        pairs(&docs),
        vec![
            ("7".into(), "x".into()),
            ("1".into(), "y".into()),
            ("-3".into(), "z".into())
        ]
    );
}

#[test]
fn jsonl_malformed_records_name_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("{\"id\":\"a\",\"text\":\"ok\"", "", "not a JSON object"),
        ("[1,2]", "", "not a JSON object"),
        ("{\"id\":\"a\"}", "text", "missing"),
        (
            "{\"id\":\"a\",\"text\":5}",
            "text",
            "expected a string, found a number",
        ),
        (
            "{\"id\":\"a\",\"text\":null}",
            "text",
            "expected a string, found null",
        ),
        (
            "{\"id\":[1],\"text\":\"x\"}",
            "id",
            "expected a string or a number, found an array",
        ),
        ("{\"text\":\"x\",\"text\":\"y\"}", "text", "appears twice"),
        (
            "{\"id\":\"a\",\"text\":\"x\"} trailing",
            "",
            "not a JSON object",
        ),
    ];
    for (i, (bad, field, reason)) in cases.iter().enumerate() {
        let body =
            format!("{{\"id\":\"good\",\"text\":\"fine\"}}\n\n{bad}\n{{\"text\":\"after\"}}\n");
        let path = write(dir.path(), &format!("bad{i}.jsonl"), body.as_bytes());
        // Fail: one document, then the error, then nothing.
        let (docs, errs, stats) = read_all(&path, &ReaderOptions::default());
        assert_eq!(docs.len(), 1, "case {bad}");
        assert_eq!(errs.len(), 1, "case {bad}");
        let (file, line, f, r) = malformed(&errs[0]);
        assert_eq!((file, line, f), (path.as_path(), 3, *field), "case {bad}");
        assert!(r.contains(reason), "case {bad}: reason {r:?}");
        let msg = errs[0].to_string();
        assert!(
            msg.starts_with(&format!("{}:3: ", path.display())),
            "case {bad}: {msg}"
        );
        if !field.is_empty() {
            assert!(msg.contains(&format!("field `{field}`")), "{msg}");
        }
        assert_eq!((stats.records, stats.documents, stats.rejected), (2, 1, 1));
        // Skip: both good documents, the bad one counted; ids stay tied to the record index.
        let (docs, errs, stats) = read_all(&path, &skip());
        assert!(errs.is_empty());
        assert_eq!(
            pairs(&docs),
            vec![("good".into(), "fine".into()), ("2".into(), "after".into())]
        );
        assert_eq!((stats.records, stats.documents, stats.rejected), (3, 2, 1));
        assert_eq!(stats.first_rejections, vec![msg]);
    }
}

#[test]
fn skip_mode_counts_every_rejection_but_keeps_only_the_first_twenty_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = String::new();
    for i in 0..50 {
        if i % 2 == 0 {
            body.push_str(&format!("{{\"text\":\"doc {i}\"}}\n"));
        } else {
            body.push_str("not json\n");
        }
    }
    let path = write(dir.path(), "many.jsonl", body.as_bytes());
    let (docs, errs, stats) = read_all(&path, &skip());
    assert!(errs.is_empty());
    assert_eq!(docs.len(), 25);
    assert_eq!(
        (stats.records, stats.documents, stats.rejected),
        (50, 25, 25)
    );
    assert_eq!(stats.first_rejections.len(), 20);
    assert!(stats.first_rejections[0].contains(":2: "));
    assert!(stats.first_rejections[19].contains(":40: "));
    let report = lshbench::cli::report::read_stats(&stats);
    assert!(report.starts_with("read 50 records: 25 documents, 25 rejected"));
    assert!(report.contains("and 5 more rejected records"), "{report}");
}

#[test]
fn invalid_utf8_is_replaced_and_counted_or_rejected_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = b"{\"id\":\"a\",\"text\":\"caf".to_vec();
    body.extend_from_slice(b"\xff\xfe\"}\n{\"id\":\"b\",\"text\":\"clean\",\"junk\":\"\xc3\"}\n");
    body.extend_from_slice(b"{\"id\":\"c\xff\",\"text\":\"t\"}\n");
    let path = write(dir.path(), "u.jsonl", &body);

    let (docs, errs, stats) = read_all(&path, &ReaderOptions::default());
    assert!(errs.is_empty());
    assert_eq!(docs[0].text, "caf\u{fffd}\u{fffd}");
    assert_eq!(docs[1].text, "clean");
    assert_eq!(docs[2].id, "c\u{fffd}");
    // The bad byte in an ignored field changes no document, so it is not counted as a replacement.
    assert_eq!((stats.documents, stats.utf8_replaced), (3, 2));

    let strict = ReaderOptions {
        strict_utf8: true,
        on_error: OnError::Skip,
        ..Default::default()
    };
    let (docs, _, stats) = read_all(&path, &strict);
    assert!(docs.is_empty());
    assert_eq!((stats.rejected, stats.utf8_replaced), (3, 0));
    assert!(stats.first_rejections[0].contains(":1: field `text`: invalid UTF-8"));
    assert!(stats.first_rejections[1].contains(":2: invalid UTF-8"));
    assert!(stats.first_rejections[2].contains(":3: field `id`: invalid UTF-8"));

    // Text and CSV formats too.
    let text = write(dir.path(), "u.txt", b"ok\nbad \xe2\x82\n");
    let (docs, _, stats) = read_all(&text, &ReaderOptions::default());
    assert_eq!(docs[1].text, "bad \u{fffd}");
    assert_eq!(stats.utf8_replaced, 1);
    let (docs, errs, _) = read_all(
        &text,
        &ReaderOptions {
            strict_utf8: true,
            ..Default::default()
        },
    );
    assert_eq!(docs.len(), 1);
    assert_eq!(malformed(&errs[0]).1, 2);

    let csv = write(dir.path(), "u.csv", b"id,text\n1,fine\n2,\"bad\xff\"\n");
    let (docs, _, stats) = read_all(&csv, &ReaderOptions::default());
    assert_eq!(docs[1].text, "bad\u{fffd}");
    assert_eq!(stats.utf8_replaced, 1);
    let (_, errs, _) = read_all(
        &csv,
        &ReaderOptions {
            strict_utf8: true,
            ..Default::default()
        },
    );
    let (_, line, field, _) = malformed(&errs[0]);
    assert_eq!((line, field), (3, "text"));
}

const CSV: &str = "Id,Title,FullDescription\n\
                   10,plain,A simple description\n\
                   11,quoted,\"Spans\nthree\nlines, with \"\"quotes\"\"\"\n\
                   12,after,Back to one line\n";

#[test]
fn csv_reads_quoted_multiline_fields_and_ids_from_a_column() {
    let dir = tempfile::tempdir().unwrap();
    let options = ReaderOptions {
        id_column: Some("Id".into()),
        text_column: Some("FullDescription".into()),
        ..Default::default()
    };
    for path in [
        write(dir.path(), "ads.csv", CSV.as_bytes()),
        write_gz(dir.path(), "ads.csv.gz", CSV.as_bytes()),
    ] {
        let docs = ok_docs(&path, &options);
        assert_eq!(
            pairs(&docs),
            vec![
                ("10".into(), "A simple description".into()),
                ("11".into(), "Spans\nthree\nlines, with \"quotes\"".into()),
                ("12".into(), "Back to one line".into()),
            ]
        );
    }
    // Without an id column the ids are record indices.
    let path = write(dir.path(), "ads2.csv", CSV.as_bytes());
    let docs = ok_docs(
        &path,
        &ReaderOptions {
            text_column: Some("FullDescription".into()),
            ..Default::default()
        },
    );
    assert_eq!(
        docs.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["0", "1", "2"]
    );
}

#[test]
fn csv_row_of_wrong_width_names_its_start_line_even_after_multiline_fields() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!("{CSV}13,too,many,fields\n14,last,ok\n");
    let path = write(dir.path(), "w.csv", body.as_bytes());
    let options = ReaderOptions {
        text_column: Some("FullDescription".into()),
        ..Default::default()
    };
    let (docs, errs, _) = read_all(&path, &options);
    assert_eq!(docs.len(), 3);
    let (_, line, field, reason) = malformed(&errs[0]);
    // Header 1, row 10 on 2, row 11 on 3-5, row 12 on 6: the bad row starts on line 7.
    assert_eq!((line, field), (7, ""));
    assert!(reason.contains("expected 3 fields"), "{reason}");
    assert!(errs[0].to_string().contains("w.csv:7: expected 3 fields"));

    let (docs, _, stats) = read_all(
        &path,
        &ReaderOptions {
            on_error: OnError::Skip,
            ..options
        },
    );
    assert_eq!(docs.len(), 4);
    assert_eq!(docs[3].id, "4");
    assert_eq!((stats.records, stats.rejected), (5, 1));
}

#[test]
fn csv_unknown_column_lists_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "h.csv", CSV.as_bytes());
    for options in [
        ReaderOptions {
            text_column: Some("Description".into()),
            ..Default::default()
        },
        ReaderOptions::default(), // no column named "text"
        ReaderOptions {
            text_column: Some("FullDescription".into()),
            id_column: Some("AdId".into()),
            ..Default::default()
        },
    ] {
        let err = CorpusReader::open(&path, &options).err().expect("an error");
        let msg = err.to_string();
        assert!(
            msg.contains("h.csv:1: field `")
                && msg.contains("the header has: Id, Title, FullDescription"),
            "{msg}"
        );
    }
    let empty = write(dir.path(), "empty.csv", b"");
    assert!(CorpusReader::open(&empty, &ReaderOptions::default()).is_err());
}

#[test]
fn tsv_with_header_and_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let body = "\u{feff}name\ttext\nx\tone\ny\ttwo words\n";
    for path in [
        write(dir.path(), "t.tsv", body.as_bytes()),
        write_gz(dir.path(), "t.tsv.gz", body.as_bytes()),
    ] {
        let docs = ok_docs(
            &path,
            &ReaderOptions {
                id_column: Some("name".into()),
                ..Default::default()
            },
        );
        assert_eq!(
            pairs(&docs),
            vec![("x".into(), "one".into()), ("y".into(), "two words".into())]
        );
    }
}

#[test]
fn text_is_one_document_per_line_and_blank_lines_are_empty_documents() {
    let dir = tempfile::tempdir().unwrap();
    let body = "first line\r\n\nthird line\nno newline at end";
    for path in [
        write(dir.path(), "t.txt", body.as_bytes()),
        write_gz(dir.path(), "t.txt.gz", body.as_bytes()),
    ] {
        let docs = ok_docs(&path, &ReaderOptions::default());
        assert_eq!(
            pairs(&docs),
            vec![
                ("0".into(), "first line".into()),
                ("1".into(), "".into()),
                ("2".into(), "third line".into()),
                ("3".into(), "no newline at end".into()),
            ]
        );
    }
}

#[test]
fn gzip_is_detected_by_magic_bytes_and_concatenated_members_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(b"{\"text\":\"one\"}\n").unwrap();
    let mut bytes = enc.finish().unwrap();
    let first_member = bytes.len();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(b"{\"text\":\"two\"}\n").unwrap();
    bytes.extend(enc.finish().unwrap());
    // No .gz in the name: the magic bytes decide.
    let path = write(dir.path(), "members.jsonl", &bytes);
    let docs = ok_docs(&path, &ReaderOptions::default());
    assert_eq!(
        docs.iter().map(|d| d.text.as_str()).collect::<Vec<_>>(),
        ["one", "two"]
    );
    // A .gz name over plain bytes is an error, not a silent raw read.
    let fake = write(dir.path(), "fake.jsonl.gz", b"{\"text\":\"x\"}\n");
    let err = CorpusReader::open(&fake, &ReaderOptions::default())
        .err()
        .expect("error");
    assert!(err.to_string().contains("not gzip"), "{err}");
    // The cause is in the message once and not also a source, so an error chain does not repeat it.
    assert!(std::error::Error::source(&err).is_none(), "{err:?}");
    let missing = dir.path().join("missing.jsonl");
    let err = CorpusReader::open(&missing, &ReaderOptions::default())
        .err()
        .expect("error");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}: ", missing.display())),
        "{text}"
    );
    assert!(std::error::Error::source(&err).is_none(), "{err:?}");
    // A gzip stream truncated inside either member is an I/O error naming the file.
    for cut in [first_member - 4, first_member + 12] {
        let trunc = write(dir.path(), "trunc.jsonl.gz", &bytes[..cut]);
        let (_, errs, _) = read_all(&trunc, &ReaderOptions::default());
        assert!(
            matches!(errs.last(), Some(ReadError::Io { file, .. }) if file == &trunc),
            "cut at {cut}: {errs:?}"
        );
    }
}

#[test]
fn directory_is_walked_recursively_in_sorted_order_with_relative_ids() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("corpus");
    // Written out of order; `b/` sorts between `a.txt` and `c.txt`, and nested paths keep '/'.
    write(&root, "c.txt", b"see");
    write(&root, "b/z.txt", b"bee zed");
    write(&root, "a.txt", b"ay");
    write(&root, "b/a/deep.txt", b"deep");
    write_gz(&root, "d.txt.gz", b"compressed");
    write(&root, "e.txt", b"bad \xff byte\nsecond \xfe");
    let docs = ok_docs(&root, &ReaderOptions::default());
    assert_eq!(
        pairs(&docs),
        vec![
            ("a.txt".into(), "ay".into()),
            ("b/a/deep.txt".into(), "deep".into()),
            ("b/z.txt".into(), "bee zed".into()),
            ("c.txt".into(), "see".into()),
            ("d.txt.gz".into(), "compressed".into()),
            ("e.txt".into(), "bad \u{fffd} byte\nsecond \u{fffd}".into()),
        ]
    );
    // Under strict, the error names the file inside the directory and the line of the first bad byte.
    let (docs, errs, _) = read_all(
        &root,
        &ReaderOptions {
            strict_utf8: true,
            ..Default::default()
        },
    );
    assert_eq!(docs.len(), 5);
    let (file, line, _, _) = malformed(&errs[0]);
    assert_eq!((file, line), (root.join("e.txt").as_path(), 1));
}

#[test]
fn explicit_format_overrides_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "data.log", b"{\"text\":\"json in a .log\"}\n");
    let as_text = ok_docs(&path, &ReaderOptions::default());
    assert_eq!(as_text[0].text, "{\"text\":\"json in a .log\"}");
    let as_json = ok_docs(
        &path,
        &ReaderOptions {
            format: InputFormat::Jsonl,
            ..Default::default()
        },
    );
    assert_eq!(as_json[0].text, "json in a .log");
}

#[test]
fn reader_args_parse_into_options() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        reader: ReaderArgs,
    }
    let cli = Cli::try_parse_from([
        "x",
        "--input",
        "ads.csv.gz",
        "--format",
        "csv",
        "--text-column",
        "FullDescription",
        "--id-column",
        "Id",
        "--on-error",
        "skip",
        "--strict",
    ])
    .unwrap();
    let o = cli.reader.options();
    assert_eq!(o.format, InputFormat::Csv);
    assert_eq!(o.text_column.as_deref(), Some("FullDescription"));
    assert_eq!(o.id_column.as_deref(), Some("Id"));
    assert_eq!(o.on_error, OnError::Skip);
    assert!(o.strict_utf8);
    let cli = Cli::try_parse_from(["x", "--input", "c.jsonl"]).unwrap();
    let o = cli.reader.options();
    assert_eq!(
        (o.format, o.text_field.as_str(), o.on_error, o.strict_utf8),
        (InputFormat::Auto, "text", OnError::Fail, false)
    );
}

#[test]
fn shipped_spamassassin_corpus_reads_completely() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/spamassassin.jsonl.gz");
    let mut reader = CorpusReader::open(&path, &ReaderOptions::default()).unwrap();
    let mut groups = std::collections::BTreeMap::<String, u64>::new();
    let mut bytes = 0u64;
    for doc in reader.by_ref() {
        let doc = doc.unwrap();
        let (group, number) = doc.id.split_once('/').expect("id is group/number");
        assert!(
            !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()),
            "{}",
            doc.id
        );
        *groups.entry(group.to_string()).or_default() += 1;
        bytes += doc.text.len() as u64;
    }
    let stats = reader.stats();
    assert_eq!(
        (stats.records, stats.documents, stats.rejected),
        (6046, 6046, 0)
    );
    assert_eq!(bytes, 21_163_476);
    let expect: Vec<(String, u64)> = [
        ("easy-ham-1", 2500),
        ("easy-ham-2", 1400),
        ("hard-ham-1", 250),
        ("spam-1", 500),
        ("spam-2", 1396),
    ]
    .iter()
    .map(|(g, n)| (g.to_string(), *n))
    .collect();
    assert_eq!(groups.into_iter().collect::<Vec<_>>(), expect);
}

#[test]
fn csv_line_numbers_survive_blank_lines_crlf_and_a_missing_final_newline() {
    let dir = tempfile::tempdir().unwrap();
    // Rows (1-based lines): header 1, blanks 2-3, good 4, bad 5, quoted CRLF field 6-7, bad 8 (no newline).
    let body = b"id,text\r\n\r\n\n1,a\r\n2,b,extra\r\n3,\"x\r\ny\"\r\n4,c,extra";
    let path = write(dir.path(), "lines.csv", body);
    let (docs, _, stats) = read_all(&path, &skip());
    assert_eq!(
        pairs(&docs),
        vec![("0".into(), "a".into()), ("2".into(), "x\r\ny".into())]
    );
    assert_eq!((stats.records, stats.rejected), (4, 2));
    assert!(stats.first_rejections[0].contains("lines.csv:5: expected 2 fields"));
    assert!(stats.first_rejections[1].contains("lines.csv:8: expected 2 fields"));
}

#[test]
fn decodes_says_whether_reading_also_decompresses() {
    // `sketch` writes on a thread of its own only when reading does not also decode (see `sketch::sketch`).
    let dir = tempfile::tempdir().unwrap();
    let opts = ReaderOptions::default();
    let body = b"{\"text\":\"one\"}\n";
    let csv = b"text\none\n";
    write(dir.path(), "d/one.txt", b"one");
    for (path, decodes) in [
        (write(dir.path(), "a.jsonl", body), false),
        (write(dir.path(), "a.txt", b"one\n"), false),
        (write(dir.path(), "a.csv", csv), false),
        (write_gz(dir.path(), "b.jsonl.gz", body), true),
        (write_gz(dir.path(), "b.txt.gz", b"one\n"), true),
        (write_gz(dir.path(), "b.csv.gz", csv), true),
        // Gzip without the extension: the magic bytes decide, as for reading.
        (write_gz(dir.path(), "c.jsonl", body), true),
        (dir.path().join("d"), false),
    ] {
        let reader = CorpusReader::open(&path, &opts).expect("open");
        assert_eq!(reader.decodes(), decodes, "{}", path.display());
    }
}
