//! Every output, byte for byte: the digests in `tests/golden/digests.txt` were recorded from the code before the
//! library-core redesign, and every later build must reproduce them.
//!
//! Covered: `sketch` `.npy` (with its `.ids.csv`) and `.csv` for every kernel x `--isa` this CPU runs x thread
//! count on the shipped SpamAssassin corpus, and for every kernel x thread count on it uncompressed; `dedup`
//! pairs, clusters, group report and kept corpus (1 and 2 threads); `exact`; and the CSVs of the quick
//! experiments, with the columns that legitimately differ between runs and machines dropped (timings, the
//! commit, the CPU model, the instruction set).
//!
//! Re-recording (only when an output is *meant* to change, with the reason in the commit):
//! `LSHBENCH_GOLDEN_RECORD=1 cargo test --test golden`.

mod common;

use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const CORPUS: &str = "data/spamassassin.jsonl.gz";
const KERNELS: &[&str] = &["scalar", "simd", "oph-opt", "oph-rot", "fss"];
const ISAS: &[&str] = &["scalar", "portable", "avx2", "avx512"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn digests_path() -> PathBuf {
    root().join("tests/golden/digests.txt")
}

fn lshbench(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_lshbench"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the lshbench binary runs");
    assert!(
        out.status.success(),
        "lshbench {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn file_digest(path: &Path) -> String {
    sha256(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Whether an experiment CSV column differs between runs or machines by design.
fn volatile(column: &str) -> bool {
    column == "seconds"
        || column.ends_with("_seconds")
        || column.ends_with("_per_s")
        || matches!(column, "git_commit" | "cpu_model" | "isa")
}

/// The CSV with its volatile columns removed, re-serialised.
fn stable_csv_digest(path: &Path) -> String {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_path(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rows = reader.records();
    let Some(header) = rows.next() else {
        return sha256(b"");
    };
    let header = header.unwrap();
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| !volatile(&header[i]))
        .collect();
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(keep.iter().map(|&i| &header[i])).unwrap();
    for row in rows {
        let row = row.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.write_record(keep.iter().map(|&i| row.get(i).unwrap_or("")))
            .unwrap();
    }
    sha256(&out.into_inner().unwrap())
}

fn isa_supported(isa: &str) -> bool {
    match isa {
        "scalar" | "portable" => true,
        #[cfg(target_arch = "x86_64")]
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        #[cfg(target_arch = "x86_64")]
        "avx512" => {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
        }
        _ => false,
    }
}

/// One output's digest: its name, the digest, and how the run that wrote it differs from the others of its name.
type Digest3 = (String, String, String);

/// A run of the CLI and the digests of what it wrote.
type Job<'a> = Box<dyn Fn() -> Vec<Digest3> + Send + Sync + 'a>;

/// `sketch` of `input` with `kernel` on `threads` threads (and `--isa`, if given) to `npy`, and to `csv` if
/// given: the digests of the array, its ids file and the CSV, named by kernel, so that every such run must agree.
fn sketch_digests(
    input: &str,
    kernel: &str,
    isa: Option<&str>,
    threads: &str,
    npy: &str,
    csv: Option<&str>,
    how: &str,
) -> Vec<Digest3> {
    let sketch = |output: &str| {
        let mut args = vec!["sketch", "--input", input, "--kernel", kernel];
        if let Some(isa) = isa {
            args.extend(["--isa", isa]);
        }
        args.extend(["--threads", threads, "--output", output]);
        lshbench(&args);
    };
    sketch(npy);
    let ids = npy.replace(".npy", ".ids.csv");
    let mut out = vec![
        (
            format!("sketch/{kernel}.npy"),
            file_digest(Path::new(npy)),
            how.to_string(),
        ),
        (
            format!("sketch/{kernel}.ids.csv"),
            file_digest(Path::new(&ids)),
            how.to_string(),
        ),
    ];
    if let Some(csv) = csv {
        sketch(csv);
        out.push((
            format!("sketch/{kernel}.csv"),
            file_digest(Path::new(csv)),
            how.to_string(),
        ));
    }
    out
}

/// Every digest this build produces, by name. Runs that must agree (different ISA or thread count) share a
/// name; a disagreement among them is reported as such. The runs are independent processes, so they go two
/// (or as many as there are cores) at a time; the digests are compared in the fixed order of the list.
fn compute(dir: &Path) -> BTreeMap<String, String> {
    let d = |p: &str| dir.join(p).to_str().unwrap().to_string();
    let mut jobs: Vec<Job> = Vec::new();

    for kernel in KERNELS {
        for isa in ISAS.iter().filter(|i| isa_supported(i)) {
            for threads in ["1", "2"] {
                let npy = d(&format!("{kernel}-{isa}-{threads}.npy"));
                // The CSV writer is the same for every ISA: one thread count is enough there.
                let csv = (threads == "2").then(|| d(&format!("{kernel}-{isa}.csv")));
                let how = format!("--isa {isa} --threads {threads}");
                jobs.push(Box::new(move || {
                    sketch_digests(
                        CORPUS,
                        kernel,
                        Some(isa),
                        threads,
                        &npy,
                        csv.as_deref(),
                        &how,
                    )
                }));
            }
        }
    }

    // The same corpus uncompressed: `sketch` then writes on a thread of its own (gzip input is written on the
    // signing thread), and the bytes must be the same as the .gz runs' above, whose names these share.
    let plain = d("spamassassin.jsonl");
    let mut text = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::MultiGzDecoder::new(std::fs::File::open(root().join(CORPUS)).unwrap()),
        &mut text,
    )
    .unwrap();
    std::fs::write(&plain, text).unwrap();
    for kernel in KERNELS {
        for threads in ["1", "2"] {
            let plain = plain.clone();
            let npy = d(&format!("plain-{kernel}-{threads}.npy"));
            let csv = d(&format!("plain-{kernel}-{threads}.csv"));
            let how = format!("the uncompressed corpus, --threads {threads}");
            jobs.push(Box::new(move || {
                sketch_digests(&plain, kernel, None, threads, &npy, Some(&csv), &how)
            }));
        }
    }

    for threads in ["1", "2"] {
        let (pairs, clusters, report, kept) = (
            d(&format!("pairs-{threads}.csv")),
            d(&format!("clusters-{threads}.csv")),
            d(&format!("groups-{threads}.csv")),
            d(&format!("kept-{threads}.jsonl")),
        );
        jobs.push(Box::new(move || {
            lshbench(&[
                "dedup",
                "--input",
                CORPUS,
                "--shingle",
                "char:5",
                "--kernel",
                "oph-opt",
                "--bands",
                "42",
                "--rows",
                "3",
                "--threshold",
                "0.5",
                // The grouping the digests were recorded with (with --kept the default is center).
                "--groups",
                "components",
                "--threads",
                threads,
                "--pairs",
                &pairs,
                "--clusters",
                &clusters,
                "--group-report",
                &report,
                "--kept",
                &kept,
            ]);
            [
                ("pairs.csv", &pairs),
                ("clusters.csv", &clusters),
                ("group_report.csv", &report),
                ("kept.jsonl", &kept),
            ]
            .into_iter()
            .map(|(name, path)| {
                (
                    format!("dedup/{name}"),
                    file_digest(Path::new(path)),
                    format!("--threads {threads}"),
                )
            })
            .collect()
        }));
        let exact = d(&format!("exact-{threads}.csv"));
        jobs.push(Box::new(move || {
            lshbench(&[
                "exact",
                "--input",
                CORPUS,
                "--shingle",
                "char:5",
                "--threshold",
                "0.5",
                "--threads",
                threads,
                "--output",
                &exact,
            ]);
            vec![(
                "exact/pairs.csv".into(),
                file_digest(Path::new(&exact)),
                format!("--threads {threads}"),
            )]
        }));
    }

    let quick = dir.join("experiments");
    jobs.push(Box::new(move || {
        lshbench(&[
            "run",
            "experiments/all.toml",
            "--quick",
            "--out",
            quick.to_str().unwrap(),
        ]);
        let csvs = common::files_with_extension(&quick, "csv");
        assert!(!csvs.is_empty(), "the quick experiments wrote no CSV");
        csvs.iter()
            .map(|path| {
                let name = path.strip_prefix(&quick).unwrap().to_str().unwrap();
                (
                    format!("experiments/{name}"),
                    stable_csv_digest(path),
                    "a rerun".to_string(),
                )
            })
            .collect()
    }));

    // The longest runs (the experiments, then dedup and exact) first, so that the two queues end together.
    jobs.reverse();
    let results: Vec<Vec<Digest3>> = jobs.par_iter().map(|job| job()).collect();
    let mut digests: BTreeMap<String, String> = BTreeMap::new();
    for (name, value, how) in results.into_iter().rev().flatten() {
        if let Some(old) = digests.get(&name) {
            assert_eq!(
                old, &value,
                "{name}: {how} differs from an earlier run with another ISA or thread count"
            );
        } else {
            digests.insert(name, value);
        }
    }
    digests
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (digest, name) = l.split_once("  ").expect("`DIGEST  NAME` lines");
            (name.to_string(), digest.to_string())
        })
        .collect()
}

#[test]
fn every_output_matches_the_recorded_digests() {
    let dir = tempfile::tempdir().unwrap();
    let got = compute(dir.path());
    if std::env::var_os("LSHBENCH_GOLDEN_RECORD").is_some() {
        let mut text = String::from(
            "# sha256 of every output `tests/golden.rs` checks (experiment CSVs without their volatile columns).\n\
             # Re-record only when an output is meant to change: LSHBENCH_GOLDEN_RECORD=1 cargo test --test golden\n",
        );
        for (name, digest) in &got {
            text.push_str(&format!("{digest}  {name}\n"));
        }
        std::fs::create_dir_all(digests_path().parent().unwrap()).unwrap();
        std::fs::write(digests_path(), text).unwrap();
        return;
    }
    let want = parse(&std::fs::read_to_string(digests_path()).expect("tests/golden/digests.txt"));
    let mut wrong = Vec::new();
    for (name, digest) in &want {
        match got.get(name) {
            Some(d) if d == digest => {}
            Some(_) => wrong.push(format!("{name}: different bytes")),
            None => wrong.push(format!("{name}: no longer produced")),
        }
    }
    for name in got.keys().filter(|n| !want.contains_key(*n)) {
        wrong.push(format!("{name}: new output with no recorded digest"));
    }
    assert!(wrong.is_empty(), "outputs changed:\n{}", wrong.join("\n"));
}
