//! `--memory-limit` refuses only what it cannot do: a run whose need is far below what the worst case of its
//! bucket cap would take is accepted and its peak resident memory stays under the limit; a limit far below a
//! run's need stops it with an error that says so, before it allocates. Linux only: each run is a process of
//! its own (this test binary, started again for that run alone), whose peak is its `VmHWM`.

#![cfg(target_os = "linux")]

use lshbench_core::corpus::synth::{GenConfig, generate};
use lshbench_core::corpus::{CorpusReader, ReaderOptions};
use lshbench_core::dedup::external::MemoryLimit;
use lshbench_core::dedup::{DedupError, DedupOptions, DedupOutputs, DedupReport};
use lshbench_core::kernel::{self, KernelParams};
use lshbench_core::shingle::{Normalization, Shingler};
use std::io::Write;
use std::path::Path;

/// The process's peak resident bytes since the last reset (`VmHWM`).
fn peak() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kb << 10
}

fn dedup(corpus: &Path, out: &Path, limit: u64) -> Result<DedupReport, DedupError> {
    let seed = 42;
    let params = KernelParams {
        num_perm: 128,
        seed,
        isa: None,
    };
    let kernel = kernel::build("oph-opt", &params).unwrap();
    let shingler = Shingler::new("word:3".parse().unwrap(), Normalization::default(), seed);
    let mut reader = CorpusReader::open(corpus, &ReaderOptions::default()).unwrap();
    let options = DedupOptions {
        bands: Some(42),
        rows: Some(3),
        threshold: Some(0.5),
        outputs: DedupOutputs {
            pairs: Some(out.join("pairs.csv")),
            clusters: Some(out.join("clusters.csv")),
            ..DedupOutputs::default()
        },
        memory_limit: Some(MemoryLimit {
            tmp_dir: Some(out.to_path_buf()),
            ..MemoryLimit::new(limit)
        }),
        ..DedupOptions::default()
    };
    let pool = lshbench_core::exec::thread_pool(Some(2)).unwrap();
    pool.install(|| {
        lshbench_core::dedup::run(
            &mut reader,
            &shingler,
            kernel.as_ref(),
            &options,
            &lshbench_core::exec::Silent,
        )
    })
}

/// Set in the process that runs one dedup: the corpus and the limit, `path:bytes`.
const CHILD: &str = "LSHBENCH_MEMORY_FLOOR_RUN";

/// Runs the dedup of `corpus` under `limit` in a process of its own; returns its peak resident bytes and the
/// run's error, if any.
fn run_alone(corpus: &Path, limit: u64) -> (u64, Option<String>) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_run_is_accepted_under_a_limit_it_keeps_and_refused_far_below_its_need",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, format!("{}:{limit}", corpus.display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| {
                panic!(
                    "no {name} from the run: {stdout}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
            .to_string()
    };
    let peak = field("peak=").parse().unwrap();
    let error = field("error=");
    (peak, (!error.is_empty()).then_some(error))
}

#[test]
fn a_run_is_accepted_under_a_limit_it_keeps_and_refused_far_below_its_need() {
    if let Ok(run) = std::env::var(CHILD) {
        let (corpus, limit) = run.rsplit_once(':').unwrap();
        let out = tempfile::tempdir().unwrap();
        let result = dedup(Path::new(corpus), out.path(), limit.parse().unwrap());
        if let Ok(report) = &result {
            assert!(
                report.outcome.verified.len() > 500,
                "the run found the planted pairs"
            );
        }
        // On lines of their own (the harness prints the test's name before them).
        println!("\npeak={}", peak());
        println!(
            "error={}",
            result.err().map_or(String::new(), |e| e.to_string())
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    let config = GenConfig {
        docs: 20_000,
        seed: 5,
        ..GenConfig::default()
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(&corpus).unwrap());
    generate(&config, |doc| {
        serde_json::to_writer(&mut f, &serde_json::json!({"id": doc.id, "text": doc.text}))
            .unwrap();
        f.write_all(b"\n").unwrap();
    })
    .unwrap();
    f.flush().unwrap();
    drop(f);

    // The default bucket cap (5,000) on 2 threads: enumerating a full bucket would take 2 x 12.5 million pairs
    // (200 MB), which a fixed reserve for it would refuse under this limit; this corpus has no such bucket. The
    // limit leaves room for the fixed part, which counts this debug test binary's code (about 45 MiB).
    let limit: u64 = 96 << 20;
    let (peak, error) = run_alone(&corpus, limit);
    assert_eq!(error, None, "refused under {limit} bytes");
    assert!(
        peak < limit,
        "peak resident {peak} bytes over the limit {limit}"
    );

    // Far below the run's need, but above the fixed part (which counts the process as it stands, so it is
    // taken from a run of its own): stopped while reading, with the reason.
    let (_, error) = run_alone(&corpus, 1 << 20);
    let msg = error.expect("a run under 1 MiB was refused");
    assert!(msg.contains("starting the run"), "{msg}");
    let mib: f64 = msg
        .split("needs about ")
        .nth(1)
        .and_then(|s| s.split(" MiB").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no need in MiB: {msg}"));
    let (_, error) = run_alone(&corpus, (mib * (1 << 20) as f64) as u64 + (256 << 10));
    let msg = error.expect("a run far below its need was refused");
    assert!(
        msg.contains("reading the corpus") && msg.contains("Raise --memory-limit"),
        "{msg}"
    );
}
