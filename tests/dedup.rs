//! End-to-end checks of `dedup` and `exact` on a planted-cluster corpus from `lshbench_core::corpus::synth`:
//! dedup's verified pairs all have exact J >= t, carry the very J values `exact` computes, and the pairs it
//! misses are as few as the S-curve predicts (a binomial bound, not a tuned tolerance). Also the state file
//! round trip through `save` / `load`. Dedup runs through the library (`lshbench_core::dedup::run`, no CLI);
//! the exact ground truth through the binary.

use lshbench_core::corpus::synth::{GenConfig, generate};
use lshbench_core::corpus::{CorpusReader, ReaderOptions};
use lshbench_core::dedup::{DedupError, DedupOptions, DedupOutputs, DedupReport, Verify};
use lshbench_core::kernel::{self, KernelParams};
use lshbench_core::shingle::{Normalization, Shingler};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

fn write_corpus(path: &Path, docs: usize, seed: u64) {
    let config = GenConfig {
        docs,
        mean_len: 600,
        dup_fraction: 0.4,
        cluster_size: (2, 4),
        edit_rate: (0.0, 0.4),
        seed,
        ..GenConfig::default()
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    generate(&config, |doc| {
        serde_json::to_writer(&mut f, &serde_json::json!({"id": doc.id, "text": doc.text}))
            .unwrap();
        f.write_all(b"\n").unwrap();
    })
    .unwrap();
    // Two empty documents: they must never pair.
    writeln!(f, r#"{{"id":"empty-1","text":""}}"#).unwrap();
    writeln!(f, r#"{{"id":"empty-2","text":""}}"#).unwrap();
    f.flush().unwrap();
}

type PairMap = HashMap<(String, String), HashMap<String, String>>;

fn read_pairs(path: &Path) -> PairMap {
    let mut r = csv::Reader::from_path(path).unwrap();
    let headers = r.headers().unwrap().clone();
    let mut out = HashMap::new();
    for rec in r.records() {
        let rec = rec.unwrap();
        let row: HashMap<String, String> = headers
            .iter()
            .zip(rec.iter())
            .map(|(h, v)| (h.to_string(), v.to_string()))
            .collect();
        out.insert((row["id_a"].clone(), row["id_b"].clone()), row);
    }
    out
}

/// One library dedup run over `input` with word:3 shingles, seed 42, k = 128.
fn run_dedup(
    input: &Path,
    kernel: &str,
    options: &DedupOptions,
) -> Result<DedupReport, DedupError> {
    let seed = 42;
    let kernel = kernel::build(
        kernel,
        &KernelParams {
            num_perm: 128,
            seed,
            isa: None,
        },
    )
    .unwrap();
    let shingler = Shingler::new("word:3".parse().unwrap(), Normalization::default(), seed);
    let mut reader = CorpusReader::open(input, &ReaderOptions::default()).unwrap();
    let options = DedupOptions {
        seed,
        ..options.clone()
    };
    lshbench_core::dedup::run(
        &mut reader,
        &shingler,
        kernel.as_ref(),
        &options,
        &lshbench_core::exec::Silent,
    )
}

#[test]
fn dedup_pairs_are_exact_pairs_with_exact_values_and_recall_follows_the_s_curve() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    write_corpus(&corpus, 1500, 7);
    let truth = dir.path().join("truth.csv");
    let pairs = dir.path().join("pairs.csv");
    let clusters = dir.path().join("clusters.csv");
    let t = "0.5";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lshbench"))
        .args([
            "exact",
            "--input",
            corpus.to_str().unwrap(),
            "--shingle",
            "word:3",
            "--threshold",
            t,
            "--output",
            truth.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "lshbench exact: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The scalar kernel: classic MinHash, whose slots match independently with probability J, so the S-curve
    // is the exact probability that a pair becomes a candidate.
    let report = run_dedup(
        &corpus,
        "scalar",
        &DedupOptions {
            bands: Some(25),
            rows: Some(4),
            threshold: Some(t.parse().unwrap()),
            outputs: DedupOutputs {
                pairs: Some(pairs.clone()),
                clusters: Some(clusters.clone()),
                ..DedupOutputs::default()
            },
            ..DedupOptions::default()
        },
    )
    .unwrap();
    assert_eq!(report.outcome.config.verify, Verify::Exact);
    assert!(lshbench::cli::dedup::summary(&report).contains("verified (exact, similarity >= 0.5)"));
    let exact = read_pairs(&truth);
    let found = read_pairs(&pairs);
    assert!(
        exact.len() > 100,
        "the corpus should plant many pairs, got {}",
        exact.len()
    );
    for (key, row) in &found {
        let j: f64 = row["jaccard"].parse().unwrap();
        assert!(j >= 0.5, "{key:?} has J {j}");
        let truth_row = exact
            .get(key)
            .unwrap_or_else(|| panic!("{key:?} is not an exact pair"));
        assert_eq!(row["jaccard"], truth_row["jaccard"], "{key:?}");
        assert!(!key.0.starts_with("empty") && !key.1.starts_with("empty"));
    }
    // Misses: each exact pair of similarity J is found with probability P(J) (25x4), independently enough
    // across pairs for a binomial bound. Expected misses m = sum (1 - P(J)); allow m + 5 sd + 1.
    let banding = lshbench_core::lsh::scurve::Banding::new(25, 4, 128).unwrap();
    let (mut mean, mut var) = (0.0, 0.0);
    for row in exact.values() {
        let j: f64 = row["jaccard"].parse().unwrap();
        let miss = 1.0 - banding.probability(j);
        mean += miss;
        var += miss * (1.0 - miss);
    }
    let missed = exact.keys().filter(|k| !found.contains_key(*k)).count() as f64;
    assert!(
        missed <= mean + 5.0 * var.sqrt() + 1.0,
        "missed {missed} of {} exact pairs; the S-curve predicts {mean:.1} (sd {:.1})",
        exact.len(),
        var.sqrt()
    );
    // Groups: every member of the clusters file appears, each group's size column matches its rows.
    let mut r = csv::Reader::from_path(&clusters).unwrap();
    let mut sizes: HashMap<String, (usize, usize)> = HashMap::new();
    for rec in r.records() {
        let rec = rec.unwrap();
        let e = sizes
            .entry(rec[0].to_string())
            .or_insert((0, rec[2].parse().unwrap()));
        e.0 += 1;
    }
    assert!(!sizes.is_empty());
    assert!(sizes.values().all(|(rows, size)| rows == size));
}

#[test]
fn saved_state_resumes_with_new_documents_and_refuses_other_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all.jsonl");
    write_corpus(&all, 600, 11);
    let text = std::fs::read_to_string(&all).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (first, second) = lines.split_at(lines.len() / 2);
    let part1 = dir.path().join("part1.jsonl");
    let part2 = dir.path().join("part2.jsonl");
    std::fs::write(&part1, first.join("\n") + "\n").unwrap();
    std::fs::write(&part2, second.join("\n") + "\n").unwrap();
    let state = dir.path().join("state.bin");
    let p_all = dir.path().join("p_all.csv");
    let p1 = dir.path().join("p1.csv");
    let p2 = dir.path().join("p2.csv");
    let run = |input: &Path, out: &Path, load: Option<&Path>, save: Option<&Path>| {
        run_dedup(
            input,
            "oph-opt",
            &DedupOptions {
                verify: Verify::Estimate,
                bands: Some(42),
                rows: Some(3),
                load: load.map(Path::to_path_buf),
                save: save.map(Path::to_path_buf),
                outputs: DedupOutputs {
                    pairs: Some(out.to_path_buf()),
                    ..DedupOutputs::default()
                },
                ..DedupOptions::default()
            },
        )
        .unwrap()
    };
    run(&all, &p_all, None, None);
    run(&part1, &p1, None, Some(&state));
    let resumed = run(&part2, &p2, Some(&state), None);
    assert_eq!(resumed.outcome.loaded, first.len());
    // With estimate verification the pairs depend only on the signatures: the two halves together give
    // exactly the pairs of the whole.
    let whole = read_pairs(&p_all);
    let mut halves = read_pairs(&p1);
    halves.extend(read_pairs(&p2));
    let mut a: Vec<_> = whole.keys().cloned().collect();
    let mut b: Vec<_> = halves.keys().cloned().collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert!(!a.is_empty());
    // Another kernel is refused with a message naming the difference.
    let err = run_dedup(
        &part2,
        "simd",
        &DedupOptions {
            load: Some(state.clone()),
            ..DedupOptions::default()
        },
    )
    .err()
    .expect("a state from another kernel is refused");
    assert!(
        matches!(
            err,
            DedupError::State(lshbench_core::dedup::state::StateError::Incompatible { .. })
        ),
        "{err:?}"
    );
    let err = err.to_string();
    assert!(
        err.contains("kernel: state oph-opt, this run simd"),
        "{err}"
    );
}
