//! `dedup --kept`: the kept corpus in the input's own form. For every format, a corpus with near-duplicates goes
//! through the CLI, and the kept output must equal the input less exactly the records of the removed documents
//! (the non-centre members of `--clusters`), byte for byte: JSONL (extra fields, odd spacing, `\u` escapes,
//! CRLF, a BOM, blank lines, a rejected line, a last line without a newline), CSV (a header, quoted multi-line
//! fields, CRLF, a rejected row), TSV, text, a directory tree and Parquet (extra columns of several types, a
//! list and a struct column, metadata, a rejected null text). Also gzip in and out, shards (sizes, a header per
//! shard, concatenation equal to the single file), refusals and whole-or-nothing writes, the out-of-core run
//! (the same bytes) and the shipped SpamAssassin corpus.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_lshbench");

/// Runs the CLI; panics with its stderr unless it succeeds.
fn lshbench(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "lshbench {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs the CLI expecting failure; returns its stderr.
fn lshbench_fails(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(!out.status.success(), "lshbench {args:?} succeeded");
    String::from_utf8(out.stderr).unwrap()
}

/// A well-mixed hash, so that distinct documents share few words.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A text of 60 words for document `doc`, with word `edit` replaced when given (a near-duplicate).
fn text(doc: u64, edit: Option<usize>) -> String {
    (0..60)
        .map(|j| {
            if Some(j) == edit {
                format!("edited{doc}")
            } else {
                format!("w{}", splitmix(doc << 16 | j as u64) % 100_000)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The texts of a corpus with near-duplicates: 8 distinct documents, then copies of some with a word changed.
/// `(key, text)`: equal keys are near-duplicates.
fn texts() -> Vec<String> {
    let mut out: Vec<String> = (0..8).map(|d| text(d, None)).collect();
    for (d, e) in [(1, 3), (1, 40), (4, 7), (6, 10), (6, 20), (6, 50)] {
        out.push(text(d, Some(e)));
    }
    // Interleave so removed documents are spread over the file.
    let mut mixed = Vec::new();
    for (i, t) in out.into_iter().enumerate() {
        if i % 2 == 0 {
            mixed.push(t);
        } else {
            mixed.insert(mixed.len() / 2, t);
        }
    }
    mixed
}

/// The ids of the documents a run removed: the non-centre members of its `--clusters` file.
fn removed(clusters: &Path) -> HashSet<String> {
    let mut r = csv::Reader::from_path(clusters).unwrap();
    let out: HashSet<String> = r
        .records()
        .map(|rec| rec.unwrap())
        .filter(|rec| &rec[4] == "0")
        .map(|rec| rec[1].to_string())
        .collect();
    assert!(!out.is_empty(), "the corpus must have near-duplicates");
    out
}

/// Runs dedup on `input` (with `extra` flags) writing `--kept kept` and `--clusters`; returns the removed ids.
fn dedup(dir: &Path, input: &Path, kept: &Path, extra: &[&str]) -> HashSet<String> {
    let clusters = dir.join("clusters.csv");
    let mut args = vec![
        "dedup",
        "--input",
        input.to_str().unwrap(),
        "--kept",
        kept.to_str().unwrap(),
        "--clusters",
        clusters.to_str().unwrap(),
        "--shingle",
        "word:2",
        "--threads",
        "1",
    ];
    args.extend_from_slice(extra);
    lshbench(&args);
    removed(&clusters)
}

/// A JSON string literal with every non-ASCII-letter character as a `\u` escape now and then.
fn odd_json_string(s: &str, i: usize) -> String {
    if i.is_multiple_of(3) {
        // Escape the spaces: `\u0020`.
        format!("\"{}\"", s.replace(' ', "\\u0020"))
    } else {
        serde_json::to_string(s).unwrap()
    }
}

/// A JSONL corpus exercising the byte-for-byte rules; returns its bytes and the expected kept bytes given the
/// removed ids (computed by the caller after the run, hence a closure).
fn jsonl_corpus() -> (Vec<u8>, impl Fn(&HashSet<String>) -> Vec<u8>) {
    // (line bytes with their end, id or None for a rejected line)
    let mut lines: Vec<(Vec<u8>, Option<String>)> = Vec::new();
    for (i, t) in texts().into_iter().enumerate() {
        let id = format!("doc-{i}");
        let body = match i % 4 {
            0 => format!(
                "{{\"id\":\"{id}\",\"text\":{},\"lang\":\"en\",\"n\":[1,2,{{\"x\":null}}]}}",
                odd_json_string(&t, i)
            ),
            1 => format!(
                "{{  \"meta\" : {{\"a\": 1.50e3}} ,  \"text\" :  {} , \"id\" : \"{id}\" }}  ",
                odd_json_string(&t, i)
            ),
            2 => format!(
                "{{\"id\":\"{id}\",\"text\":{},\"note\":\"caf\\u00e9 \\ud83d\\ude00\"}}",
                odd_json_string(&t, i)
            ),
            _ => format!("{{\"text\":{},\"id\":\"{id}\"}}", odd_json_string(&t, i)),
        };
        let end = if i % 3 == 1 { "\r\n" } else { "\n" };
        lines.push((format!("{body}{end}").into_bytes(), Some(id)));
        if i == 2 {
            // A rejected record (not JSON) and blank lines: not documents, never copied.
            lines.push((b"{not json\n".to_vec(), None));
            lines.push((b"\n".to_vec(), None));
            lines.push((b"   \r\n".to_vec(), None));
        }
    }
    // The last line has no line end.
    let last = lines.last_mut().unwrap();
    while last.0.ends_with(b"\n") || last.0.ends_with(b"\r") {
        last.0.pop();
    }
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    for (l, _) in &lines {
        bytes.extend_from_slice(l);
    }
    let expected = move |removed: &HashSet<String>| {
        let mut out = Vec::new();
        for (l, id) in &lines {
            if let Some(id) = id
                && !removed.contains(id)
            {
                out.extend_from_slice(l);
                if !l.ends_with(b"\n") {
                    out.push(b'\n');
                }
            }
        }
        out
    };
    (bytes, expected)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn jsonl_kept_lines_are_the_input_lines_less_the_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, expected) = jsonl_corpus();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, &bytes).unwrap();
    let kept = dir.path().join("kept.jsonl");
    let removed = dedup(dir.path(), &input, &kept, &["--on-error", "skip"]);
    let got = std::fs::read(&kept).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expected(&removed))
    );
    assert_eq!(got, expected(&removed));

    // gzip in, gzip out (by the target's name) and gzip in, plain out: the same bytes.
    let gz_input = dir.path().join("in.jsonl.gz");
    std::fs::write(&gz_input, gzip(&bytes)).unwrap();
    let kept_gz = dir.path().join("kept.jsonl.gz");
    let removed_gz = dedup(dir.path(), &gz_input, &kept_gz, &["--on-error", "skip"]);
    assert_eq!(removed_gz, removed);
    let raw = std::fs::read(&kept_gz).unwrap();
    assert_eq!(&raw[..2], b"\x1f\x8b", "a .gz target is gzip");
    assert_eq!(gunzip(&raw), expected(&removed));
    let kept_plain = dir.path().join("kept-plain.jsonl");
    dedup(dir.path(), &gz_input, &kept_plain, &["--on-error", "skip"]);
    assert_eq!(std::fs::read(&kept_plain).unwrap(), expected(&removed));
    // Plain in, gzip out.
    let kept_gz2 = dir.path().join("kept2.jsonl.gz");
    dedup(dir.path(), &input, &kept_gz2, &["--on-error", "skip"]);
    assert_eq!(
        gunzip(&std::fs::read(&kept_gz2).unwrap()),
        expected(&removed)
    );
}

/// The shards of a directory target, sorted by name.
fn shards(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    out.sort();
    out
}

#[test]
fn jsonl_shards_concatenate_to_the_single_file() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, expected) = jsonl_corpus();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, &bytes).unwrap();
    let single = dir.path().join("kept.jsonl");
    let removed = dedup(dir.path(), &input, &single, &["--on-error", "skip"]);
    let want = expected(&removed);
    assert_eq!(std::fs::read(&single).unwrap(), want);
    for size in ["1", "900", "2K", "1G"] {
        let target = dir.path().join(format!("shards-{size}/"));
        let flags = ["--on-error", "skip", "--kept-shard-size", size];
        dedup(dir.path(), &input, &target, &flags);
        let parts = shards(&target);
        assert!(!parts.is_empty());
        let limit = external_parse(size);
        let mut all = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(
                p.file_name().unwrap().to_str().unwrap(),
                format!("part-{i:05}.jsonl")
            );
            let b = std::fs::read(p).unwrap();
            assert!(!b.is_empty(), "a shard holds at least one record");
            let records = b.split_inclusive(|&c| c == b'\n').count();
            // Closed once it reaches the size: every shard but the last reaches it, and without its last
            // record it did not.
            let last_len = b
                .split_inclusive(|&c| c == b'\n')
                .next_back()
                .unwrap()
                .len() as u64;
            assert!((b.len() as u64 - last_len) < limit || records == 1);
            if i + 1 < parts.len() {
                assert!(b.len() as u64 >= limit, "shard {i} closed early");
            }
            all.extend_from_slice(&b);
        }
        assert_eq!(all, want, "shards of {size}");
        if size == "1" {
            assert_eq!(parts.len(), want.split_inclusive(|&c| c == b'\n').count());
        }
        if size == "1G" {
            assert_eq!(parts.len(), 1);
        }
    }
    // An existing empty directory is a shard target too; shards of a gzip input are gzip.
    let gz_input = dir.path().join("in.jsonl.gz");
    std::fs::write(&gz_input, gzip(&bytes)).unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    dedup(
        dir.path(),
        &gz_input,
        &empty,
        &["--on-error", "skip", "--kept-shard-size", "900"],
    );
    let mut all = Vec::new();
    for p in shards(&empty) {
        assert!(
            p.to_str().unwrap().ends_with(".jsonl.gz"),
            "{}",
            p.display()
        );
        all.extend(gunzip(&std::fs::read(&p).unwrap()));
    }
    assert_eq!(all, want);
}

fn external_parse(s: &str) -> u64 {
    lshbench_core::dedup::external::parse_size(s).unwrap()
}

/// A CSV (or TSV) corpus: a header, quoted fields with delimiters, quotes and line breaks, a rejected row (wrong
/// field count), and a last row without a terminator. Returns the bytes and each row's bytes without terminator
/// with its id (None when rejected).
/// Rows without their terminator, each with its id (None when rejected).
type Rows = Vec<(Vec<u8>, Option<String>)>;

fn delimited_corpus(delim: u8, term: &str) -> (Vec<u8>, Vec<u8>, Rows) {
    let d = delim as char;
    let header = format!("id{d}text{d}score{d}note");
    let mut rows = Vec::new();
    for (i, t) in texts().into_iter().enumerate() {
        let id = format!("r{i}");
        let text = if delim == b',' && i % 2 == 0 {
            // Quoted, with a delimiter, doubled quotes and a line break inside.
            let (a, b) = t.split_at(t.len() / 2);
            format!("\"{a},\"\"x\"\"\n{b}\"")
        } else {
            t
        };
        let note = if i % 3 == 0 {
            "\"multi\r\nline\""
        } else {
            "plain"
        };
        rows.push((
            format!("{id}{d}{text}{d}{}{d}{note}", i * 10).into_bytes(),
            Some(id),
        ));
        if i == 3 {
            rows.push((format!("bad{d}row").into_bytes(), None));
        }
    }
    let mut bytes = header.clone().into_bytes();
    bytes.extend_from_slice(term.as_bytes());
    for (i, (r, _)) in rows.iter().enumerate() {
        bytes.extend_from_slice(r);
        if i + 1 < rows.len() {
            bytes.extend_from_slice(term.as_bytes());
        }
    }
    (bytes, header.into_bytes(), rows)
}

fn check_delimited(delim: u8, ext: &str, term: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, header, rows) = delimited_corpus(delim, term);
    let input = dir.path().join(format!("in.{ext}"));
    std::fs::write(&input, &bytes).unwrap();
    let kept = dir.path().join(format!("kept.{ext}"));
    let flags = ["--on-error", "skip", "--id-column", "id"];
    let removed = dedup(dir.path(), &input, &kept, &flags);
    let mut want = header.clone();
    want.extend_from_slice(term.as_bytes());
    let mut body = Vec::new();
    for (r, id) in &rows {
        if let Some(id) = id
            && !removed.contains(id)
        {
            body.extend_from_slice(r);
            body.extend_from_slice(term.as_bytes());
        }
    }
    want.extend_from_slice(&body);
    let got = std::fs::read(&kept).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );

    // Shards each start with the header; their bodies concatenate to the single file's.
    let target = dir.path().join("shards/");
    let mut flags = flags.to_vec();
    flags.extend(["--kept-shard-size", "1K"]);
    dedup(dir.path(), &input, &target, &flags);
    let parts = shards(&target);
    assert!(parts.len() > 1);
    let mut bodies = Vec::new();
    for p in &parts {
        assert!(p.to_str().unwrap().ends_with(&format!(".{ext}")));
        let b = std::fs::read(p).unwrap();
        let mut h = header.clone();
        h.extend_from_slice(term.as_bytes());
        assert!(b.starts_with(&h), "{} starts with the header", p.display());
        assert!(b.len() > h.len(), "a shard holds at least one record");
        bodies.extend_from_slice(&b[h.len()..]);
    }
    assert_eq!(bodies, body);
}

#[test]
fn csv_kept_rows_are_the_input_rows_less_the_removed() {
    check_delimited(b',', "csv", "\r\n");
    check_delimited(b',', "csv", "\n");
}

#[test]
fn tsv_kept_rows_are_the_input_rows_less_the_removed() {
    check_delimited(b'\t', "tsv", "\n");
}

#[test]
fn text_kept_lines_are_the_input_lines_less_the_removed() {
    let dir = tempfile::tempdir().unwrap();
    let lines = texts();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let kept = dir.path().join("kept.txt");
    // A text line's id is its 0-based record index.
    let removed = dedup(dir.path(), &input, &kept, &[]);
    let want: String = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| !removed.contains(&i.to_string()))
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), want);
}

#[test]
fn directory_kept_files_are_copied_into_a_tree() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus");
    let mut names = Vec::new();
    for (i, t) in texts().into_iter().enumerate() {
        let rel = format!("sub{}/deeper{}/doc{i}.txt", i % 2, i % 3);
        let path = input.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // Bytes the reader would alter if it rewrote them: CRLF, no final newline.
        std::fs::write(&path, format!("{t}\r\nend {i}")).unwrap();
        names.push(rel);
    }
    // Into the input directory: refused, nothing written.
    let inside = input.join("kept");
    let err = lshbench_fails(&[
        "dedup",
        "--input",
        input.to_str().unwrap(),
        "--kept",
        inside.to_str().unwrap(),
    ]);
    assert!(err.contains("lies inside the input directory"), "{err}");
    assert!(!inside.exists());
    let err = lshbench_fails(&[
        "dedup",
        "--input",
        input.to_str().unwrap(),
        "--kept",
        input.to_str().unwrap(),
    ]);
    assert!(err.contains("--kept"), "{err}");

    let kept = dir.path().join("kept");
    let removed = dedup(dir.path(), &input, &kept, &[]);
    let mut want: Vec<String> = names
        .iter()
        .filter(|n| !removed.contains(*n))
        .cloned()
        .collect();
    want.sort();
    let mut got: Vec<String> = Vec::new();
    fn walk(root: &Path, rel: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let child = rel.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                walk(root, &child, out);
            } else {
                out.push(child.to_str().unwrap().to_string());
            }
        }
    }
    walk(&kept, Path::new(""), &mut got);
    got.sort();
    assert_eq!(got, want);
    for n in &got {
        assert_eq!(
            std::fs::read(kept.join(n)).unwrap(),
            std::fs::read(input.join(n)).unwrap()
        );
    }
}

#[test]
fn refusals_leave_the_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = jsonl_corpus();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, &bytes).unwrap();
    // A non-empty directory: refused, its file untouched.
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("part-00000.jsonl"), "stale\n").unwrap();
    let err = lshbench_fails(&[
        "dedup",
        "--input",
        input.to_str().unwrap(),
        "--on-error",
        "skip",
        "--kept",
        full.to_str().unwrap(),
    ]);
    assert!(err.contains("is a directory that is not empty"), "{err}");
    assert_eq!(shards(&full).len(), 1);
    assert_eq!(
        std::fs::read_to_string(full.join("part-00000.jsonl")).unwrap(),
        "stale\n"
    );
    // The input itself.
    let err = lshbench_fails(&[
        "dedup",
        "--input",
        input.to_str().unwrap(),
        "--kept",
        input.to_str().unwrap(),
    ]);
    assert!(err.contains("is the input"), "{err}");
    assert_eq!(std::fs::read(&input).unwrap(), bytes);
    // A directory that does not exist.
    let nowhere = dir.path().join("no/such/dir/");
    let err = lshbench_fails(&[
        "dedup",
        "--input",
        input.to_str().unwrap(),
        "--kept",
        nowhere.to_str().unwrap(),
    ]);
    assert!(err.contains("does not exist"), "{err}");
    // A run that fails (a malformed record under --on-error fail) leaves no kept file.
    let kept = dir.path().join("kept.jsonl");
    lshbench_fails(&[
        "dedup",
        "--input",
        input.to_str().unwrap(),
        "--kept",
        kept.to_str().unwrap(),
    ]);
    assert!(!kept.exists());
}

/// A mask that does not match the corpus stops the pass, and neither a file nor a shard directory, nor a
/// temporary one, is left behind.
#[test]
fn a_failed_pass_leaves_nothing() {
    use lshbench_core::corpus::ReaderOptions;
    use lshbench_core::dedup::kept::{KeptError, KeptTarget, write_kept};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        "{\"text\":\"a\"}\n{\"text\":\"b\"}\n{\"text\":\"c\"}\n",
    )
    .unwrap();
    let options = ReaderOptions::default();
    for (i, name) in ["kept.jsonl", "shards/"].into_iter().enumerate() {
        let out = dir.path().join(format!("out{i}"));
        std::fs::create_dir(&out).unwrap();
        let target = out.join(name);
        for mask in [vec![true; 2], vec![true; 4]] {
            let err = write_kept(&input, &options, &mask, &KeptTarget::new(&target)).unwrap_err();
            assert!(matches!(err, KeptError::Mismatch { .. }), "{err}");
            assert!(err.to_string().contains("keep mask was made for"), "{err}");
            assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "{err}");
        }
        let stats = write_kept(
            &input,
            &options,
            &[true, false, true],
            &KeptTarget::new(&target),
        )
        .unwrap();
        assert_eq!((stats.documents, stats.kept, stats.files), (3, 2, 1));
        if target.to_str().unwrap().ends_with('/') {
            assert_eq!(
                std::fs::read_to_string(target.join("part-00000.jsonl")).unwrap(),
                "{\"text\":\"a\"}\n{\"text\":\"c\"}\n"
            );
        } else {
            assert_eq!(
                std::fs::read_to_string(&target).unwrap(),
                "{\"text\":\"a\"}\n{\"text\":\"c\"}\n"
            );
        }
    }
}

#[test]
fn parquet_kept_rows_keep_every_column_and_the_metadata() {
    use arrow_array::builder::{ListBuilder, StringBuilder};
    use arrow_array::{
        Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
        StructArray, TimestampMicrosecondArray,
    };
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    use std::collections::HashMap;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    // Enough distinct rows after the near-duplicates for several of the reader's batches (1024 rows).
    let mut texts = texts();
    texts.extend((100..2600).map(|d| text(d, None)));
    let n = texts.len();
    // Row 2's text is null: rejected under --on-error skip, so no document and not copied.
    let text: StringArray = texts
        .iter()
        .enumerate()
        .map(|(i, t)| (i != 2).then(|| t.clone()))
        .collect();
    let ids = Int64Array::from_iter_values((0..n as i64).map(|i| i * 100));
    let score = Float64Array::from_iter((0..n).map(|i| (i % 4 != 1).then_some(i as f64 / 3.0)));
    let mut tags = ListBuilder::new(StringBuilder::new());
    for i in 0..n {
        for j in 0..(i % 3) {
            tags.values().append_value(format!("tag{i}-{j}"));
        }
        tags.append(i % 5 != 4);
    }
    let tags = tags.finish();
    let at = TimestampMicrosecondArray::from_iter_values((0..n as i64).map(|i| i * 1_000_003))
        .with_timezone("UTC");
    let inner = StructArray::from(vec![
        (
            Arc::new(Field::new("flag", DataType::Boolean, true)),
            Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 2 == 0)))) as ArrayRef,
        ),
        (
            Arc::new(Field::new("label", DataType::Utf8, true)),
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| Some(format!("l{i}"))),
            )) as ArrayRef,
        ),
    ]);
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(ids)),
        ("text", Arc::new(text)),
        ("score", Arc::new(score)),
        ("tags", Arc::new(tags)),
        ("at", Arc::new(at)),
        ("meta", Arc::new(inner)),
    ];
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        HashMap::from([("origin".to_string(), "test corpus".to_string())]),
    ));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let input = dir.path().join("in.parquet");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(700))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "source".into(),
            "kept test".to_string(),
        )]))
        .build();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(&input).unwrap(), schema, Some(props)).unwrap();
    // Row groups of 700 rows, so rows map across batch and row-group boundaries.
    w.write(&batch).unwrap();
    w.close().unwrap();

    let read = |path: &Path| {
        let b =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
        let schema = b.schema().clone();
        let kv = b.metadata().file_metadata().key_value_metadata().cloned();
        let batches: Vec<RecordBatch> = b.build().unwrap().map(|b| b.unwrap()).collect();
        (
            schema.clone(),
            kv,
            arrow_select::concat::concat_batches(&schema, &batches).unwrap(),
        )
    };
    let (in_schema, in_kv, in_rows) = read(&input);

    // A name that says another form than the input's is refused before anything is written.
    let misnamed = dir.path().join("kept.jsonl");
    let err = lshbench_fails(&[
        "dedup",
        "--input",
        input.to_str().unwrap(),
        "--id-column",
        "id",
        "--kept",
        misnamed.to_str().unwrap(),
    ]);
    assert!(err.contains("name it .parquet"), "{err}");
    assert!(!misnamed.exists());

    let kept = dir.path().join("kept.parquet");
    let flags = ["--on-error", "skip", "--id-column", "id"];
    let removed = dedup(dir.path(), &input, &kept, &flags);
    let mask: BooleanArray = (0..n)
        .map(|i| Some(i != 2 && !removed.contains(&(i * 100).to_string())))
        .collect();
    let want = arrow_select::filter::filter_record_batch(&in_rows, &mask).unwrap();
    let (schema, kv, rows) = read(&kept);
    assert_eq!(
        schema, in_schema,
        "the input's Arrow schema, with its metadata"
    );
    assert_eq!(
        schema.metadata().get("origin").map(String::as_str),
        Some("test corpus")
    );
    let kv = kv.unwrap();
    assert!(
        kv.iter()
            .any(|k| k.key == "source" && k.value.as_deref() == Some("kept test"))
    );
    assert_eq!(kv.len(), in_kv.unwrap().len());
    assert_eq!(rows, want);
    // The near-duplicates are removed, the 2500 distinct rows all kept.
    assert!(rows.num_rows() < n - 1 && rows.num_rows() > 2500);

    // Shards: complete files whose rows, in order, are the single file's.
    let target = dir.path().join("shards/");
    let mut flags = flags.to_vec();
    flags.extend(["--kept-shard-size", "1"]);
    dedup(dir.path(), &input, &target, &flags);
    let parts = shards(&target);
    assert!(parts.len() > 1);
    let mut all = Vec::new();
    for p in &parts {
        assert!(p.to_str().unwrap().ends_with(".parquet"));
        let (s, _, r) = read(p);
        assert_eq!(s, in_schema);
        assert!(r.num_rows() > 0);
        all.push(r);
    }
    assert_eq!(
        arrow_select::concat::concat_batches(&in_schema, &all).unwrap(),
        want
    );
}

/// The shipped corpus: kept + removed = 6046, the kept lines are exact input lines in input order, and the
/// out-of-core run writes the same bytes.
#[test]
fn spamassassin_kept_in_memory_and_out_of_core() {
    let dir = tempfile::tempdir().unwrap();
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/spamassassin.jsonl.gz");
    let kept = dir.path().join("kept.jsonl");
    let removed = dedup(dir.path(), &input, &kept, &[]);
    let lines = gunzip(&std::fs::read(&input).unwrap());
    let lines: Vec<&[u8]> = lines.split_inclusive(|&c| c == b'\n').collect();
    assert_eq!(lines.len(), 6046);
    let got = std::fs::read(&kept).unwrap();
    let got: Vec<&[u8]> = got.split_inclusive(|&c| c == b'\n').collect();
    assert_eq!(got.len() + removed.len(), 6046);
    let want: Vec<&[u8]> = lines
        .iter()
        .copied()
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_slice(l).unwrap();
            !removed.contains(v["id"].as_str().unwrap())
        })
        .collect();
    assert!(
        got == want,
        "the kept lines are the input's less the removed"
    );

    let out_of_core = dir.path().join("kept-ooc.jsonl");
    let removed_ooc = dedup(
        dir.path(),
        &input,
        &out_of_core,
        &["--memory-limit", "1G", "--spill-run-records", "500"],
    );
    assert_eq!(removed_ooc, removed);
    assert!(std::fs::read(&out_of_core).unwrap() == std::fs::read(&kept).unwrap());
}
