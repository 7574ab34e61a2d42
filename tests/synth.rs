//! The synthetic corpus generator: determinism (seed, thread count), requested counts and lengths, the truth
//! file, edits actually applied, and the Zipf rank-frequency slope.

use lshbench_core::corpus::synth::{
    ClusterKind, GenConfig, Generator, Truth, generate, write_corpus,
};
use lshbench_core::corpus::{CorpusReader, Document, ReaderOptions};
use std::collections::HashMap;

fn small(seed: u64) -> GenConfig {
    GenConfig {
        docs: 3000,
        mean_len: 600,
        seed,
        ..Default::default()
    }
}

fn collect(config: &GenConfig) -> (Vec<Document>, Truth) {
    let mut docs = Vec::new();
    let truth = generate(config, |d| docs.push(d)).unwrap();
    (docs, truth)
}

fn bytes_with_threads(config: &GenConfig, gzip: bool, threads: usize) -> Vec<u8> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut out = Vec::new();
    pool.install(|| write_corpus(config, &mut out, gzip, &lshbench_core::exec::Silent))
        .unwrap();
    out
}

fn truth_csv(truth: &Truth) -> String {
    let mut out = Vec::new();
    truth.write_csv(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn same_seed_same_bytes_for_any_thread_count_other_seed_other_bytes() {
    let config = small(7);
    for gzip in [false, true] {
        let one = bytes_with_threads(&config, gzip, 1);
        assert_eq!(one, bytes_with_threads(&config, gzip, 3), "gzip={gzip}");
        assert_eq!(one, bytes_with_threads(&config, gzip, 1), "gzip={gzip}");
        assert_ne!(one, bytes_with_threads(&small(8), gzip, 1), "gzip={gzip}");
    }
    let (docs_a, truth_a) = collect(&config);
    let (docs_b, truth_b) = collect(&config);
    assert_eq!(docs_a, docs_b);
    assert_eq!(truth_csv(&truth_a), truth_csv(&truth_b));
    let (docs_c, truth_c) = collect(&small(8));
    assert_ne!(docs_a[0].text, docs_c[0].text);
    assert_ne!(truth_csv(&truth_a), truth_csv(&truth_c));
}

#[test]
fn jsonl_output_reads_back_as_the_in_memory_documents() {
    let config = small(11);
    let (docs, _) = collect(&config);
    let dir = tempfile::tempdir().unwrap();
    for (name, gzip) in [("c.jsonl", false), ("c.jsonl.gz", true)] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes_with_threads(&config, gzip, 2)).unwrap();
        let mut reader = CorpusReader::open(&path, &ReaderOptions::default()).unwrap();
        let read: Vec<Document> = reader.by_ref().map(|d| d.unwrap()).collect();
        assert_eq!(read, docs, "{name}");
        assert_eq!(reader.stats().rejected, 0);
    }
}

#[test]
fn requested_counts_and_a_complete_truth() {
    for (docs, frac, sizes) in [(3000, 0.1, (2, 5)), (1000, 0.3, (3, 3)), (500, 0.0, (2, 4))] {
        let config = GenConfig {
            docs,
            dup_fraction: frac,
            cluster_size: sizes,
            mean_len: 300,
            ..Default::default()
        };
        let (out, truth) = collect(&config);
        assert_eq!(out.len(), docs);
        for (i, d) in out.iter().enumerate() {
            assert_eq!((d.index, d.id.as_str()), (i as u64, i.to_string().as_str()));
        }
        let copies = (frac * docs as f64).round() as usize;
        assert_eq!(truth.copies(), copies);
        let mut seen = std::collections::HashSet::new();
        let mut small_clusters = 0;
        for (ci, c) in truth.clusters.iter().enumerate() {
            assert_eq!(c.id, ci as u64);
            let n = c.members.len();
            assert!(n >= 2 && n <= sizes.1, "cluster size {n}");
            small_clusters += (n < sizes.0) as usize;
            assert!(c.members[0].is_base && c.members[1..].iter().all(|m| !m.is_base));
            assert!(c.members.windows(2).all(|w| w[0].index < w[1].index));
            for m in &c.members {
                assert!(m.index < docs as u64);
                assert!(seen.insert(m.index), "document {} in two clusters", m.index);
                if !m.is_base {
                    assert!((config.edit_rate.0..=config.edit_rate.1).contains(&m.edit_rate));
                }
            }
        }
        // Only the last cluster drawn may be cut below MIN to hit the copy count exactly.
        assert!(small_clusters <= 1);
        if frac > 0.0 {
            let kinds: Vec<_> = truth.clusters.iter().map(|c| c.kind).collect();
            assert!(kinds.contains(&ClusterKind::Edit));
        }
        // The CSV names every member of every cluster, once.
        let csv = truth_csv(&truth);
        let rows: Vec<Vec<&str>> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect())
            .collect();
        assert_eq!(rows.len(), seen.len());
        for row in &rows {
            assert_eq!(row.len(), 12);
            let c = &truth.clusters[row[0].parse::<usize>().unwrap()];
            assert!(c.members.iter().any(|m| m.index.to_string() == row[2]));
            assert_eq!(row[4], c.members[0].index.to_string());
            assert_eq!(row[1], c.kind.name());
        }
    }
}

#[test]
fn document_lengths_match_the_requested_mean() {
    // sigma = 0: every document stops at the word that reaches the target, so its length is within one
    // word (at most 35 bytes: 5 syllables of 7 letters) plus punctuation of the target.
    let exact = GenConfig {
        docs: 500,
        mean_len: 1500,
        len_sigma: 0.0,
        dup_fraction: 0.0,
        ..Default::default()
    };
    let (docs, _) = collect(&exact);
    for d in &docs {
        let len = d.text.len();
        assert!((1497..=1540).contains(&len), "length {len}");
    }
    // sigma = 0.5: the sample mean is within 5 standard errors of the log-normal mean, plus the same
    // one-word overshoot.
    let sigma = 0.5f64;
    let n = 4000;
    let config = GenConfig {
        docs: n,
        len_sigma: sigma,
        dup_fraction: 0.0,
        ..exact
    };
    let (docs, _) = collect(&config);
    let mean = docs.iter().map(|d| d.text.len() as f64).sum::<f64>() / n as f64;
    let sd = 1500.0 * ((sigma * sigma).exp() - 1.0).sqrt();
    let se = sd / (n as f64).sqrt();
    assert!(
        mean > 1500.0 - 5.0 * se - 3.0 && mean < 1500.0 + 5.0 * se + 40.0,
        "mean {mean}, se {se}"
    );
    // And the spread is real.
    let min = docs.iter().map(|d| d.text.len()).min().unwrap();
    let max = docs.iter().map(|d| d.text.len()).max().unwrap();
    assert!(min < 700 && max > 3000, "{min}..{max}");
}

fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

#[test]
fn zero_edit_rate_gives_identical_copies_and_edits_are_applied_as_logged() {
    let base = GenConfig {
        docs: 2000,
        mean_len: 800,
        dup_fraction: 0.2,
        template_fraction: 0.0,
        ..Default::default()
    };
    // No edits, no moves: exact copies.
    let config = GenConfig {
        edit_rate: (0.0, 0.0),
        max_moves: 0,
        ..base.clone()
    };
    let (docs, truth) = collect(&config);
    assert!(!truth.clusters.is_empty());
    for c in &truth.clusters {
        let b = &docs[c.members[0].index as usize].text;
        for m in &c.members[1..] {
            assert_eq!(&docs[m.index as usize].text, b);
            assert_eq!(
                (
                    m.log.substitutions,
                    m.log.insertions,
                    m.log.deletions,
                    m.log.moves
                ),
                (0, 0, 0, 0)
            );
        }
    }
    // Block moves only: the copy is a rearrangement of the base's words.
    let config = GenConfig {
        edit_rate: (0.0, 0.0),
        max_moves: 2,
        ..base.clone()
    };
    let (docs, truth) = collect(&config);
    let mut moved = 0;
    for c in &truth.clusters {
        let b = &docs[c.members[0].index as usize].text;
        for m in &c.members[1..] {
            let t = &docs[m.index as usize].text;
            let (mut wb, mut wt) = (words(b), words(t));
            wb.sort_unstable();
            wt.sort_unstable();
            assert_eq!(wb, wt);
            assert_eq!(m.log.moves > 0, t != b, "moves {}", m.log.moves);
            moved += (m.log.moves > 0) as usize;
        }
    }
    assert!(moved > 0);
    // Word edits: the counts are as logged (ops = rate * words up to rounding) and the word count moves by
    // insertions minus deletions.
    let config = GenConfig {
        edit_rate: (0.05, 0.3),
        ..base
    };
    let (docs, truth) = collect(&config);
    for c in &truth.clusters {
        let b = &docs[c.members[0].index as usize].text;
        let nb = words(b).len() as i64;
        assert_eq!(c.members[0].log.base_words as i64, nb);
        for m in &c.members[1..] {
            let t = &docs[m.index as usize].text;
            let l = m.log;
            assert_eq!(l.base_words as i64, nb);
            assert_eq!(
                words(t).len() as i64,
                nb + l.insertions as i64 - l.deletions as i64
            );
            let ops = (l.substitutions + l.insertions + l.deletions) as f64;
            assert!(
                (ops - m.edit_rate * nb as f64).abs() < 1.0,
                "{ops} vs {}",
                m.edit_rate * nb as f64
            );
            assert_ne!(t, b);
        }
    }
}

#[test]
fn template_clusters_share_boilerplate_with_their_own_slot_values() {
    let config = GenConfig {
        docs: 1000,
        mean_len: 1500,
        dup_fraction: 0.2,
        template_fraction: 1.0,
        edit_rate: (0.0, 0.0),
        max_moves: 0,
        ..Default::default()
    };
    let (docs, truth) = collect(&config);
    assert!(
        truth
            .clusters
            .iter()
            .all(|c| c.kind == ClusterKind::Template)
    );
    for c in &truth.clusters {
        let b = &docs[c.members[0].index as usize].text;
        for m in &c.members[1..] {
            let t = &docs[m.index as usize].text;
            assert!(m.log.slots > 0);
            assert_ne!(t, b, "slot values differ");
            // Outside the slots the text is the same: at least 80% of the base's words are in the copy.
            let mut pool: HashMap<&str, i64> = HashMap::new();
            for w in words(t) {
                *pool.entry(w).or_default() += 1;
            }
            let shared = words(b)
                .into_iter()
                .filter(|w| {
                    let n = pool.entry(w).or_default();
                    *n -= 1;
                    *n >= 0
                })
                .count();
            assert!(shared as f64 > 0.8 * words(b).len() as f64, "{shared}");
        }
    }
}

#[test]
fn word_frequencies_follow_zipf_with_the_requested_exponent() {
    for s in [0.8, 1.0, 1.3] {
        let config = GenConfig {
            docs: 2000,
            mean_len: 1500,
            dup_fraction: 0.0,
            vocab: 5000,
            zipf: s,
            seed: 5,
            ..Default::default()
        };
        let vocab = Generator::new(&config).unwrap().vocabulary();
        let rank: HashMap<&str, usize> = vocab
            .iter()
            .enumerate()
            .map(|(i, w)| (w.as_str(), i))
            .collect();
        let mut counts = vec![0u64; vocab.len()];
        let mut total = 0u64;
        let (docs, _) = collect(&config);
        for d in &docs {
            let w = words(&d.text);
            // The last word of a document is length-biased (the document stops at the word that reaches
            // its target), so it is left out; every other word is an independent Zipf draw.
            for word in &w[..w.len() - 1] {
                let lower = word
                    .trim_end_matches([',', '.', '?', '!'])
                    .to_ascii_lowercase();
                counts[rank[lower.as_str()]] += 1;
                total += 1;
            }
        }
        // Least squares of ln(count) on ln(rank) over the ranks expected at least 100 times. By the delta
        // method Var(ln count_r) ~ 1 / E[count_r], so the slope's standard error follows from the weights.
        let h: f64 = (1..=vocab.len()).map(|r| (r as f64).powf(-s)).sum();
        let expected = |r: usize| total as f64 * (r as f64).powf(-s) / h;
        let ranks: Vec<usize> = (1..=vocab.len())
            .take_while(|&r| expected(r) >= 100.0)
            .collect();
        assert!(ranks.len() > 50);
        let x: Vec<f64> = ranks.iter().map(|&r| (r as f64).ln()).collect();
        let y: Vec<f64> = ranks.iter().map(|&r| (counts[r - 1] as f64).ln()).collect();
        let xm = x.iter().sum::<f64>() / x.len() as f64;
        let ym = y.iter().sum::<f64>() / y.len() as f64;
        let sxx: f64 = x.iter().map(|v| (v - xm).powi(2)).sum();
        let slope = x
            .iter()
            .zip(&y)
            .map(|(a, b)| (a - xm) * (b - ym))
            .sum::<f64>()
            / sxx;
        let var: f64 = ranks
            .iter()
            .zip(&x)
            .map(|(&r, a)| (a - xm).powi(2) / expected(r))
            .sum::<f64>()
            / (sxx * sxx);
        let se = var.sqrt();
        eprintln!(
            "s = {s}: slope {slope:.4}, se {se:.4}, {} ranks",
            ranks.len()
        );
        // 5 standard errors: a false alarm about once in 1.7 million runs.
        assert!(
            (slope + s).abs() < 5.0 * se,
            "s = {s}: slope {slope:.4}, se {se:.4}, {} ranks",
            ranks.len()
        );
    }
}

#[test]
fn gen_command_writes_corpus_and_truth_files() {
    use clap::Parser;
    use lshbench::cli::r#gen::{GenArgs, run};
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gen_args: GenArgs,
    }
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("synth.jsonl.gz");
    let cli = Cli::try_parse_from([
        "gen",
        "--docs",
        "1500",
        "--mean-len",
        "400",
        "--cluster-size",
        "3..4",
        "--edit-rate",
        "0.01..0.1",
        "--seed",
        "9",
        "--threads",
        "2",
        "--output",
        output.to_str().unwrap(),
    ])
    .unwrap();
    assert_eq!(cli.gen_args.cluster_size, (3, 4));
    assert_eq!(cli.gen_args.edit_rate, (0.01, 0.1));
    run(&cli.gen_args).unwrap();
    let truth_path = dir.path().join("synth.truth.csv");
    assert_eq!(cli.gen_args.truth_path(), truth_path);
    let mut reader = CorpusReader::open(&output, &ReaderOptions::default()).unwrap();
    assert_eq!(reader.by_ref().filter(|d| d.is_ok()).count(), 1500);
    assert_eq!(reader.stats().rejected, 0);
    let (_, truth) = collect(&cli.gen_args.config());
    assert_eq!(
        std::fs::read_to_string(&truth_path).unwrap(),
        truth_csv(&truth)
    );

    // Bad flags are errors, not panics.
    assert!(Cli::try_parse_from(["gen", "--output", "x", "--cluster-size", "5..2"]).is_err());
    assert!(Cli::try_parse_from(["gen", "--output", "x", "--edit-rate", "abc"]).is_err());
    let too_many = GenConfig {
        docs: 10,
        dup_fraction: 0.9,
        ..Default::default()
    };
    let err = generate(&too_many, |_| {}).unwrap_err().to_string();
    assert!(err.contains("--dup-fraction"), "{err}");
    for bad in [
        GenConfig {
            cluster_size: (1, 3),
            ..Default::default()
        },
        GenConfig {
            zipf: -1.0,
            ..Default::default()
        },
        GenConfig {
            edit_rate: (0.0, 1.5),
            ..Default::default()
        },
    ] {
        assert!(Generator::new(&bad).is_err());
    }
}

#[test]
fn write_files_writes_the_corpus_and_truth_and_checks_the_config_before_creating_files() {
    use lshbench_core::corpus::synth::{GenConfigError, GenError, default_truth_path, write_files};
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("w.jsonl.gz");
    let truth = default_truth_path(&output);
    assert_eq!(truth, dir.path().join("w.truth.csv"));
    assert_eq!(
        default_truth_path(std::path::Path::new("a/b.ndjson")),
        std::path::Path::new("a/b.truth.csv")
    );
    let config = small(5);
    let report = write_files(&config, &output, &truth, &lshbench_core::exec::Silent).unwrap();
    assert_eq!(report.documents, config.docs);
    let (docs, expected) = collect(&config);
    assert_eq!(report.truth, expected);
    assert_eq!(
        report.text_bytes,
        docs.iter().map(|d| d.text.len() as u64).sum::<u64>()
    );
    assert_eq!(
        std::fs::read(&output).unwrap(),
        bytes_with_threads(&config, true, 1)
    );
    assert_eq!(
        std::fs::read_to_string(&truth).unwrap(),
        truth_csv(&expected)
    );

    // A plan that does not fit is refused before any file is created.
    let too_many = GenConfig {
        docs: 10,
        dup_fraction: 0.9,
        ..Default::default()
    };
    let fresh = dir.path().join("never.jsonl");
    let err = write_files(&too_many, &fresh, &truth, &lshbench_core::exec::Silent).unwrap_err();
    assert!(
        matches!(
            err,
            GenError::Config(GenConfigError::TooManyMembers { docs: 10, .. })
        ),
        "{err:?}"
    );
    assert!(!fresh.exists());
    // An I/O error names the file once and is not also a source.
    let bad = dir.path().join("no/such/dir.jsonl");
    let err = write_files(&config, &bad, &truth, &lshbench_core::exec::Silent).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot create {}: ", bad.display())),
        "{err}"
    );
    assert!(std::error::Error::source(&err).is_none());
}
