//! The survivor guarantee on corpora with planted chains: under `--groups center`, whatever the policy, every
//! removed document has a pair at the threshold or above with its own survivor (exact Jaccard computed here, from
//! the shingle sets, not taken from the run) and no two kept documents form a verified pair; each survivor is
//! the one its policy prefers. Under `--groups components` the same corpora remove documents that share less
//! than the threshold with their survivor: the reason `--kept` and `--removed` default to `center`. Also the
//! short-document policies (`word:3` makes "hi there" shorter than one shingle), the audit file, the out-of-core run's identical choices, and the survivor column
//! read from JSONL, CSV and Parquet.

use lshbench_core::corpus::{CorpusReader, FieldValue, ReaderOptions};
use lshbench_core::dedup::survivor::{Keep, Short};
use lshbench_core::dedup::{DedupOptions, DedupOutputs, DedupReport};
use lshbench_core::kernel::{self, KernelParams};
use lshbench_core::lsh::cluster::GroupMode;
use lshbench_core::shingle::{Normalization, Shingler};
use std::io::Write;
use std::path::Path;

const T: f64 = 0.5;

/// One document of the planted corpus, as written.
struct Doc {
    id: String,
    text: String,
    score: Option<f64>,
}

/// Chains of documents whose neighbours share more than the threshold and whose second neighbours share less
/// (windows of 42 distinct words moved by 10: word 3-gram Jaccard 0.6 between neighbours, 0.33 two apart),
/// with random tails that vary the lengths, scores with ties and gaps, unrelated documents, and short ones.
fn planted(seed: u64) -> Vec<Doc> {
    use rand_xoshiro::Xoshiro256PlusPlus;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut docs = Vec::new();
    let mut order: Vec<(u64, Doc)> = Vec::new();
    for chain in 0..40 {
        let len = 3 + (rng.next_u64() % 8) as usize;
        for i in 0..len {
            let mut words: Vec<String> = (i * 10..i * 10 + 42)
                .map(|w| format!("c{chain}w{w}"))
                .collect();
            // A tail of 0 to 2 words only this document has: lengths differ, similarity stays near 0.6.
            for t in 0..rng.next_u64() % 3 {
                words.push(format!("c{chain}d{i}t{t}"));
            }
            let score = match rng.next_u64() % 5 {
                0 => None,
                s => Some(s as f64),
            };
            order.push((
                rng.next_u64(),
                Doc {
                    id: format!("chain{chain}-{i}"),
                    text: words.join(" "),
                    score,
                },
            ));
        }
    }
    for u in 0..60 {
        let words: Vec<String> = (0..40).map(|w| format!("u{u}w{w}")).collect();
        order.push((
            rng.next_u64(),
            Doc {
                id: format!("unique{u}"),
                text: words.join(" "),
                score: Some((u % 7) as f64),
            },
        ));
    }
    // Input order is shuffled, so `first` and the chain order disagree.
    order.sort_by_key(|(k, _)| *k);
    docs.extend(order.into_iter().map(|(_, d)| d));
    for (i, text) in ["hi there", "hi   there", "hello", "hi there", ""]
        .into_iter()
        .enumerate()
    {
        docs.push(Doc {
            id: format!("short{i}"),
            text: text.into(),
            score: None,
        });
    }
    docs
}

fn write_jsonl(path: &Path, docs: &[Doc]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for d in docs {
        let mut o = serde_json::json!({"id": d.id, "text": d.text});
        if let Some(s) = d.score {
            o["score"] = serde_json::json!(s);
        }
        serde_json::to_writer(&mut f, &o).unwrap();
        f.write_all(b"\n").unwrap();
    }
    f.flush().unwrap();
}

fn shingler() -> Shingler {
    Shingler::new("word:3".parse().unwrap(), Normalization::default(), 42)
}

fn oph_opt() -> Box<dyn kernel::Kernel> {
    kernel::build(
        "oph-opt",
        &KernelParams {
            num_perm: 128,
            seed: 42,
            isa: None,
        },
    )
    .unwrap()
}

fn run(input: &Path, options: DedupOptions) -> DedupReport {
    let kernel = oph_opt();
    let reader_options = ReaderOptions {
        rank_field: options.keep.field().map(str::to_string),
        ..ReaderOptions::default()
    };
    let mut reader = CorpusReader::open(input, &reader_options).unwrap();
    let options = DedupOptions {
        seed: 42,
        threshold: Some(T),
        ..options
    };
    lshbench_core::dedup::run(
        &mut reader,
        &shingler(),
        kernel.as_ref(),
        &options,
        &lshbench_core::exec::Silent,
    )
    .unwrap()
}

/// Exact Jaccard of two texts' shingle sets, by a plain merge.
fn jaccard(s: &Shingler, a: &str, b: &str) -> f64 {
    let (x, y) = (s.set(a), s.set(b));
    if x.is_empty() && y.is_empty() {
        return 1.0;
    }
    let inter = x.iter().filter(|v| y.binary_search(v).is_ok()).count();
    inter as f64 / (x.len() + y.len() - inter) as f64
}

/// Whether `policy` prefers document `x` to `y` (positions in `docs`).
fn prefers(policy: &Keep, docs: &[Doc], x: usize, y: usize) -> bool {
    let key = |d: usize| -> (i64, f64) {
        let doc = &docs[d];
        match policy {
            Keep::First | Keep::Center => (0, 0.0),
            Keep::Last => (0, -(d as f64)),
            Keep::Longest => (0, -(doc.text.len() as f64)),
            Keep::Shortest => (0, doc.text.len() as f64),
            Keep::Column { max, .. } => match doc.score {
                None => (1, 0.0),
                Some(s) => (0, if *max { -s } else { s }),
            },
        }
    };
    let (kx, ky) = (key(x), key(y));
    kx.0 < ky.0 || (kx.0 == ky.0 && (kx.1 < ky.1 || (kx.1 == ky.1 && x < y)))
}

const POLICIES: [&str; 7] = [
    "center",
    "first",
    "last",
    "longest",
    "shortest",
    "column:score:max",
    "column:score:min",
];

#[test]
fn under_center_grouping_every_removal_is_justified_and_no_kept_pair_remains() {
    let dir = tempfile::tempdir().unwrap();
    let s = shingler();
    for seed in [1, 2, 3] {
        let docs = planted(seed);
        let input = dir.path().join(format!("planted-{seed}.jsonl"));
        write_jsonl(&input, &docs);
        for policy in POLICIES {
            let keep: Keep = policy.parse().unwrap();
            let report = run(
                &input,
                DedupOptions {
                    groups: GroupMode::Center,
                    keep: keep.clone(),
                    ..DedupOptions::default()
                },
            );
            let o = &report.outcome;
            let removed = o.removed();
            assert!(
                removed.iter().any(|&r| r),
                "{policy}: the chains remove documents"
            );
            for g in &o.groups {
                for &m in &g.members {
                    if m == g.center {
                        continue;
                    }
                    let (m, c) = (m as usize, g.center as usize);
                    let j = jaccard(&s, &docs[m].text, &docs[c].text);
                    assert!(
                        j >= T,
                        "seed {seed}, {policy}: {} removed for {} at J = {j}",
                        docs[m].id,
                        docs[c].id
                    );
                    assert!(!removed[c], "{policy}: a survivor is kept");
                    if keep != Keep::Center {
                        assert!(
                            prefers(&keep, &docs, c, m),
                            "seed {seed}, {policy}: {} survives {} against the policy",
                            docs[c].id,
                            docs[m].id
                        );
                    }
                }
            }
            for p in &o.verified {
                assert!(
                    removed[p.a as usize] || removed[p.b as usize],
                    "seed {seed}, {policy}: kept {} and {} form a verified pair",
                    docs[p.a as usize].id,
                    docs[p.b as usize].id
                );
            }
        }
    }
}

#[test]
fn components_grouping_removes_documents_unlike_their_survivor() {
    let dir = tempfile::tempdir().unwrap();
    let docs = planted(1);
    let input = dir.path().join("planted.jsonl");
    write_jsonl(&input, &docs);
    let s = shingler();
    for policy in POLICIES {
        let keep: Keep = policy.parse().unwrap();
        let o = run(
            &input,
            DedupOptions {
                groups: GroupMode::Components,
                keep: keep.clone(),
                ..DedupOptions::default()
            },
        )
        .outcome;
        let mut unjustified = 0;
        for g in &o.groups {
            // The best-ranked member of the component survives.
            for &m in &g.members {
                if m != g.center && keep != Keep::Center {
                    assert!(
                        prefers(&keep, &docs, g.center as usize, m as usize),
                        "{policy}"
                    );
                }
                if m != g.center
                    && jaccard(&s, &docs[m as usize].text, &docs[g.center as usize].text) < T
                {
                    unjustified += 1;
                }
            }
        }
        assert!(
            unjustified > 0,
            "{policy}: chains of up to 10 documents must leave members below the threshold to their survivor"
        );
    }
}

#[test]
fn short_documents_follow_the_short_policy_and_the_audit_lists_every_removal() {
    let dir = tempfile::tempdir().unwrap();
    let docs = planted(4);
    let input = dir.path().join("planted.jsonl");
    write_jsonl(&input, &docs);
    let position = |id: &str| docs.iter().position(|d| d.id == id).unwrap();
    for (short, removed_short) in [
        (Short::Keep, vec![]),
        (
            Short::Drop,
            vec!["short0", "short1", "short2", "short3", "short4"],
        ),
        (Short::Exact, vec!["short1", "short3"]),
    ] {
        let audit = dir.path().join(format!("removed-{}.csv", short.name()));
        let report = run(
            &input,
            DedupOptions {
                groups: GroupMode::Center,
                keep: Keep::First,
                short,
                outputs: DedupOutputs {
                    removed: Some(audit.clone()),
                    ..DedupOutputs::default()
                },
                ..DedupOptions::default()
            },
        );
        let o = &report.outcome;
        let removed = o.removed();
        let shorts: Vec<&str> = docs
            .iter()
            .enumerate()
            .filter(|(i, d)| d.id.starts_with("short") && removed[*i])
            .map(|(_, d)| d.id.as_str())
            .collect();
        assert_eq!(shorts, removed_short, "--short {}", short.name());
        // The audit: one row per removed document, in input order, each naming its survivor and rule.
        let mut rows = csv::Reader::from_path(&audit).unwrap();
        let rows: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
        let expected: Vec<&str> = docs
            .iter()
            .enumerate()
            .filter(|(i, _)| removed[*i])
            .map(|(_, d)| d.id.as_str())
            .collect();
        assert_eq!(rows.iter().map(|r| &r[0]).collect::<Vec<_>>(), expected);
        for r in &rows {
            let (id, survivor, rule) = (&r[0], &r[1], &r[5]);
            if short == Short::Drop && id.starts_with("short") {
                assert_eq!((rule, survivor, &r[2]), ("short:drop", "", ""));
                continue;
            }
            assert_eq!(rule, "center:first");
            assert!(!removed[position(survivor)]);
            let j: f64 = r[2].parse().unwrap();
            let exact = jaccard(
                &shingler(),
                &docs[position(id)].text,
                &docs[position(survivor)].text,
            );
            assert!((j - exact).abs() < 5e-7, "{id}: audit {j}, exact {exact}");
            assert_eq!(&r[3], "exact");
            if id.starts_with("short") {
                // A short document is one shingle, its whole text: "hi   there" and the second "hi there"
                // are copies of the first.
                assert_eq!((survivor, j), ("short0", 1.0));
            }
        }
    }
}

#[test]
fn out_of_core_runs_choose_the_same_survivors() {
    let dir = tempfile::tempdir().unwrap();
    let docs = planted(5);
    let input = dir.path().join("planted.jsonl");
    write_jsonl(&input, &docs);
    for policy in ["first", "longest", "column:score:max"] {
        let mut audits = Vec::new();
        for out_of_core in [false, true] {
            let audit = dir
                .path()
                .join(format!("removed-{policy}-{out_of_core}.csv"));
            run(
                &input,
                DedupOptions {
                    groups: GroupMode::Center,
                    keep: policy.parse().unwrap(),
                    short: Short::Drop,
                    outputs: DedupOutputs {
                        removed: Some(audit.clone()),
                        ..DedupOutputs::default()
                    },
                    memory_limit: out_of_core.then(|| {
                        lshbench_core::dedup::external::MemoryLimit {
                            run_records: Some(64),
                            ..lshbench_core::dedup::external::MemoryLimit::new(1 << 30)
                        }
                    }),
                    ..DedupOptions::default()
                },
            );
            audits.push(std::fs::read(&audit).unwrap());
        }
        assert_eq!(audits[0], audits[1], "--keep {policy}: the audits differ");
    }
}

#[test]
fn a_survivor_column_is_read_from_jsonl_and_csv_and_refused_where_it_cannot_be() {
    let dir = tempfile::tempdir().unwrap();
    let values = |path: &Path, field: &str| -> Result<Vec<FieldValue>, String> {
        let options = ReaderOptions {
            rank_field: Some(field.to_string()),
            ..ReaderOptions::default()
        };
        let mut r = CorpusReader::open(path, &options).map_err(|e| e.to_string())?;
        for doc in r.by_ref() {
            doc.map_err(|e| e.to_string())?;
        }
        Ok(r.take_rank_values())
    };
    let jsonl = dir.path().join("a.jsonl");
    std::fs::write(
        &jsonl,
        "{\"text\":\"a\",\"ts\":3}\n{\"ts\":\"2024-01-02\",\"text\":\"b\"}\n{\"text\":\"c\",\"ts\":null}\n\
         {\"text\":\"d\"}\n{\"text\":\"e\",\"ts\":-1.5e3}\n",
    )
    .unwrap();
    assert_eq!(
        values(&jsonl, "ts").unwrap(),
        vec![
            FieldValue::Number(3.0),
            FieldValue::Text("2024-01-02".into()),
            FieldValue::Missing,
            FieldValue::Missing,
            FieldValue::Number(-1500.0),
        ]
    );
    // The text field itself can rank (as text), and a wrong type names line and field.
    assert_eq!(
        values(&jsonl, "text").unwrap()[0],
        FieldValue::Text("a".into())
    );
    std::fs::write(
        &jsonl,
        "{\"text\":\"a\",\"ts\":1}\n{\"text\":\"b\",\"ts\":[1]}\n",
    )
    .unwrap();
    let e = values(&jsonl, "ts").unwrap_err();
    assert!(
        e.contains("a.jsonl:2: field `ts`") && e.contains("found an array"),
        "{e}"
    );

    let csv_path = dir.path().join("a.csv");
    std::fs::write(&csv_path, "id,text,score\n1,a,2.5\n2,b,\n3,c,high\n").unwrap();
    assert_eq!(
        values(&csv_path, "score").unwrap(),
        vec![
            FieldValue::Number(2.5),
            FieldValue::Missing,
            FieldValue::Text("high".into()),
        ]
    );
    let e = values(&csv_path, "quality").unwrap_err();
    assert!(
        e.contains("field `quality`") && e.contains("no such column"),
        "{e}"
    );

    let text = dir.path().join("a.txt");
    std::fs::write(&text, "one\ntwo\n").unwrap();
    let e = values(&text, "score").unwrap_err();
    assert!(
        e.contains("needs a JSONL, CSV/TSV or Parquet corpus"),
        "{e}"
    );

    // A column of numbers and text cannot rank: the run says which documents hold which.
    std::fs::write(&csv_path, "id,text,score\nx,a b c d,1\ny,a b c d,late\n").unwrap();
    let kernel = oph_opt();
    let options = DedupOptions {
        keep: "column:score:max".parse().unwrap(),
        ..DedupOptions::default()
    };
    let mut reader = CorpusReader::open(
        &csv_path,
        &ReaderOptions {
            rank_field: Some("score".into()),
            id_column: Some("id".into()),
            ..ReaderOptions::default()
        },
    )
    .unwrap();
    let e = lshbench_core::dedup::run(
        &mut reader,
        &shingler(),
        kernel.as_ref(),
        &options,
        &lshbench_core::exec::Silent,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("\"x\"") && e.contains("\"y\"") && e.contains("field `score`"),
        "{e}"
    );
}

#[test]
fn a_survivor_column_is_read_from_parquet_numbers_timestamps_and_text() {
    use arrow_array::{
        ArrayRef, Float32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
    };
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.parquet");
    let batch = RecordBatch::try_from_iter(vec![
        (
            "text",
            Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
        ),
        (
            "n",
            Arc::new(Int64Array::from(vec![Some(5), None, Some(-2)])) as ArrayRef,
        ),
        (
            "f",
            Arc::new(Float32Array::from(vec![Some(0.5), Some(f32::NAN), None])) as ArrayRef,
        ),
        (
            "ts",
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(1_000),
                Some(3),
                None,
            ])) as ArrayRef,
        ),
        (
            "s",
            Arc::new(StringArray::from(vec![Some("b"), None, Some("a")])) as ArrayRef,
        ),
    ])
    .unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let values = |field: &str| {
        let options = ReaderOptions {
            rank_field: Some(field.to_string()),
            ..ReaderOptions::default()
        };
        let mut r = CorpusReader::open(&path, &options).unwrap();
        for doc in r.by_ref() {
            doc.unwrap();
        }
        r.take_rank_values()
    };
    use FieldValue::{Missing, Number, Text};
    assert_eq!(values("n"), vec![Number(5.0), Missing, Number(-2.0)]);
    assert_eq!(values("f"), vec![Number(0.5), Missing, Missing]);
    assert_eq!(values("ts"), vec![Number(1000.0), Number(3.0), Missing]);
    assert_eq!(
        values("s"),
        vec![Text("b".into()), Missing, Text("a".into())]
    );
}
