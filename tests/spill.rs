//! Out-of-core dedup (`--memory-limit`) against the in-memory run: the same output files byte for byte (pairs,
//! clusters, group report) and the same summary (all but the timing line), with spilling forced by a tiny run
//! size, on the shipped SpamAssassin sample and on a generated corpus with planted clusters, exact duplicates and
//! empty documents; with exact and estimate verification, both grouping modes, a bucket cap small enough to make
//! stars, and 1 and 2 threads. Also: a limit below what must stay resident is refused with a clear message, and
//! the spill directory is gone after a run, whether it succeeded or failed. (The peak resident memory of a run
//! against its limit: `tests/memory_limit.rs`.)

use lshbench_core::corpus::synth::{GenConfig, generate};
use lshbench_core::corpus::{CorpusReader, ReaderOptions};
use lshbench_core::dedup::external::MemoryLimit;
use lshbench_core::dedup::{DedupError, DedupOptions, DedupOutputs, Verify};
use lshbench_core::kernel::{self, KernelParams};
use lshbench_core::lsh::cluster::GroupMode;
use lshbench_core::shingle::{Normalization, Shingler};
use std::io::Write;
use std::path::{Path, PathBuf};

fn spamassassin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/spamassassin.jsonl.gz")
}

/// A planted-cluster corpus, plus exact copies (classes of identical signatures) and empty documents.
fn generated(path: &Path) {
    let config = GenConfig {
        docs: 3000,
        mean_len: 500,
        dup_fraction: 0.4,
        cluster_size: (2, 6),
        edit_rate: (0.0, 0.3),
        seed: 11,
        ..GenConfig::default()
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut first = Vec::new();
    generate(&config, |doc| {
        if first.len() < 5 {
            first.push(doc.text.clone());
        }
        serde_json::to_writer(&mut f, &serde_json::json!({"id": doc.id, "text": doc.text}))
            .unwrap();
        f.write_all(b"\n").unwrap();
    })
    .unwrap();
    for (i, text) in first.iter().enumerate() {
        for j in 0..(3 + i) {
            writeln!(
                f,
                "{}",
                serde_json::json!({"id": format!("copy-{i}-{j}"), "text": text})
            )
            .unwrap();
        }
    }
    writeln!(f, r#"{{"id":"empty-1","text":""}}"#).unwrap();
    writeln!(f, r#"{{"id":"empty-2","text":""}}"#).unwrap();
    f.flush().unwrap();
}

/// The summary without its timing line, then the pairs, clusters and group report files' bytes.
type Outputs = (String, Vec<u8>, Vec<u8>, Vec<u8>);

/// Runs dedup on `threads` workers and returns (summary without the timing line, pairs, clusters, group report).
fn run(
    input: &Path,
    shingle: &str,
    options: &DedupOptions,
    threads: usize,
    out: &Path,
) -> Result<Outputs, DedupError> {
    let seed = 42;
    let kernel = kernel::build(
        "oph-opt",
        &KernelParams {
            num_perm: 128,
            seed,
            isa: None,
        },
    )
    .unwrap();
    let shingler = Shingler::new(shingle.parse().unwrap(), Normalization::default(), seed);
    let mut reader = CorpusReader::open(input, &ReaderOptions::default()).unwrap();
    let files = [
        out.join("pairs.csv"),
        out.join("clusters.csv"),
        out.join("groups.csv"),
    ];
    let options = DedupOptions {
        seed,
        outputs: DedupOutputs {
            pairs: Some(files[0].clone()),
            clusters: Some(files[1].clone()),
            group_report: Some(files[2].clone()),
            ..DedupOutputs::default()
        },
        ..options.clone()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let report = pool.install(|| {
        lshbench_core::dedup::run(
            &mut reader,
            &shingler,
            kernel.as_ref(),
            &options,
            &lshbench_core::exec::Silent,
        )
    })?;
    let summary: String = lshbench::cli::dedup::summary(&report)
        .lines()
        .filter(|l| !l.starts_with("time: "))
        .map(|l| format!("{l}\n"))
        .collect();
    let read = |p: &PathBuf| std::fs::read(p).unwrap();
    Ok((summary, read(&files[0]), read(&files[1]), read(&files[2])))
}

fn assert_identical(input: &Path, shingle: &str, base: DedupOptions, threads: usize) {
    assert_identical_with(input, shingle, base, threads, Some(300));
}

/// `run_records`: records per sorted run (`Some`: also forces the band keys and the verification records to
/// disk), or `None` (sized from the limit: everything fits in memory here).
fn assert_identical_with(
    input: &Path,
    shingle: &str,
    base: DedupOptions,
    threads: usize,
    run_records: Option<usize>,
) {
    let dir = tempfile::tempdir().unwrap();
    let (mem, ooc, spill) = (
        dir.path().join("mem"),
        dir.path().join("ooc"),
        dir.path().join("spill"),
    );
    for d in [&mem, &ooc, &spill] {
        std::fs::create_dir(d).unwrap();
    }
    let expected = run(input, shingle, &base, threads, &mem).unwrap();
    let options = DedupOptions {
        memory_limit: Some(MemoryLimit {
            bytes: 8 << 30,
            tmp_dir: Some(spill.clone()),
            // A few hundred records per sorted run: every band and the pair list spill many runs.
            run_records,
        }),
        ..base.clone()
    };
    let got = run(input, shingle, &options, threads, &ooc).unwrap();
    let what = format!(
        "{} {shingle} {:?} {:?} {threads} threads",
        input.display(),
        base.verify,
        base.groups
    );
    assert!(expected.1.len() > 100, "{what}: no pairs to compare");
    assert_eq!(expected.0, got.0, "{what}: summaries differ");
    assert!(expected.1 == got.1, "{what}: pairs files differ");
    assert!(expected.2 == got.2, "{what}: clusters files differ");
    assert!(expected.3 == got.3, "{what}: group reports differ");
    assert_eq!(
        std::fs::read_dir(&spill).unwrap().count(),
        0,
        "{what}: spill files left behind"
    );
}

fn options(verify: Verify, groups: GroupMode, bucket_cap: usize) -> DedupOptions {
    DedupOptions {
        bands: Some(42),
        rows: Some(3),
        threshold: Some(0.5),
        verify,
        groups,
        bucket_cap,
        ..DedupOptions::default()
    }
}

#[test]
fn spilled_runs_match_the_in_memory_run_on_spamassassin() {
    for threads in [1, 2] {
        assert_identical(
            &spamassassin(),
            "char:5",
            options(Verify::Exact, GroupMode::Components, 5000),
            threads,
        );
    }
    assert_identical(
        &spamassassin(),
        "char:5",
        options(Verify::Estimate, GroupMode::Center, 5000),
        2,
    );
    // Nothing forced to disk: band keys and records in memory.
    assert_identical_with(
        &spamassassin(),
        "char:5",
        options(Verify::Exact, GroupMode::Components, 5000),
        2,
        None,
    );
    // A cap of 4 makes stars of the larger buckets and classes (pairs left out, counted in the summary).
    assert_identical(
        &spamassassin(),
        "char:5",
        options(Verify::Exact, GroupMode::Components, 4),
        2,
    );
}

#[test]
fn spilled_runs_match_the_in_memory_run_on_a_generated_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("gen.jsonl");
    generated(&corpus);
    for threads in [1, 2] {
        assert_identical(
            &corpus,
            "word:3",
            options(Verify::Exact, GroupMode::Components, 5000),
            threads,
        );
        assert_identical(
            &corpus,
            "word:3",
            options(Verify::Estimate, GroupMode::Components, 5000),
            threads,
        );
    }
    assert_identical(
        &corpus,
        "word:3",
        options(Verify::Exact, GroupMode::Center, 3),
        2,
    );
    assert_identical(
        &corpus,
        "word:3",
        options(Verify::None, GroupMode::Components, 3),
        1,
    );
}

#[test]
fn a_limit_below_the_resident_part_is_refused_and_leaves_no_spill_files() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let limited = |bytes: u64, bucket_cap: usize| DedupOptions {
        bucket_cap,
        memory_limit: Some(MemoryLimit {
            bytes,
            tmp_dir: Some(spill.clone()),
            run_records: None,
        }),
        ..options(Verify::Exact, GroupMode::Components, 5000)
    };
    // Below the fixed part: refused before reading anything.
    let err = run(
        &spamassassin(),
        "char:5",
        &limited(1 << 20, 5000),
        2,
        dir.path(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, DedupError::OutOfCore(_)), "{err:?}");
    assert!(
        msg.contains("--memory-limit 1.00 MiB") && msg.contains("starting the run"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_dir(&spill).unwrap().count(),
        0,
        "spill files left behind"
    );
    // Options the out-of-core run does not support are refused by name.
    let err = run(
        &spamassassin(),
        "char:5",
        &DedupOptions {
            save: Some(dir.path().join("state.bin")),
            ..limited(4 << 30, 5000)
        },
        1,
        dir.path(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("--save"), "{err}");
}
