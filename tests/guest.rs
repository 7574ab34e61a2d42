//! The library is a good guest in its host process: `sketch::sketch` and `dedup::run` with the default
//! [`Tuning`] bind no thread, change no thread's scheduling class and leave no thread behind; the CLI's tuning,
//! asked for explicitly, is seen by the same watch (so the watch can fail). Linux only: the watch reads
//! `/proc/self/task`. One test in this file, so no other test's threads run beside it.

#![cfg(target_os = "linux")]

use lshbench_core::corpus::{CorpusReader, ReaderOptions};
use lshbench_core::dedup::{DedupOptions, DedupOutputs};
use lshbench_core::exec::{Progress, Tuning};
use lshbench_core::kernel::{self, KernelParams};
use lshbench_core::shingle::{Normalization, Shingler};
use lshbench_core::sketch::SignatureWriter;
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

/// The ids of this process's threads.
fn tasks() -> Vec<u32> {
    let mut ids: Vec<u32> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

/// A thread's allowed CPUs (as `/proc` lists them) and its scheduling policy (0 is `SCHED_OTHER`); `None` for
/// a thread that ended while it was read.
fn placement(tid: u32) -> Option<(String, u32)> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let cpus = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim()
        .to_string();
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // Fields after the command name (in parentheses): the third field of stat comes first, the policy is 41st.
    let after = &stat[stat.rfind(')')? + 1..];
    let policy = after.split_whitespace().nth(41 - 3)?.parse().ok()?;
    Some((cpus, policy))
}

/// A progress hook that looks at every thread of the process each time documents are counted, while the call
/// runs, and keeps what differs from the process's placement at the start.
struct Watch {
    cpus: String,
    seen: Mutex<Vec<String>>,
}

impl Watch {
    fn new() -> Watch {
        let (cpus, policy) = placement(std::process::id()).unwrap();
        assert_eq!(policy, 0, "the test starts under SCHED_OTHER");
        Watch {
            cpus,
            seen: Mutex::new(Vec::new()),
        }
    }

    fn look(&self) {
        for tid in tasks() {
            match placement(tid) {
                Some((cpus, policy)) if cpus != self.cpus || policy != 0 => {
                    self.seen.lock().unwrap().push(format!(
                        "thread {tid}: CPUs {cpus} (process: {}), policy {policy}",
                        self.cpus
                    ))
                }
                _ => {}
            }
        }
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.seen.lock().unwrap())
    }
}

impl Progress for Watch {
    fn inc(&self, _n: u64) {
        self.look();
    }
}

/// Runs `sketch` (on a plain file: reading and writing threads) and `dedup` (exact verification) on the
/// shipped corpus on a one-thread pool, where a machine with two CPUs has one to spare; returns what the
/// watch saw during and after the calls, and the threads left beside the pool's.
fn run(corpus: &Path, dir: &Path, tuning: Tuning, watch: &Watch) -> (Vec<String>, usize) {
    let seed = 42;
    let kernel = kernel::build(
        "oph-opt",
        &KernelParams {
            num_perm: 126,
            seed,
            isa: None,
        },
    )
    .unwrap();
    let shingler = Shingler::new("char:5".parse().unwrap(), Normalization::default(), seed);
    let pool = lshbench_core::exec::thread_pool(Some(1)).unwrap();
    let before = tasks().len();
    pool.install(|| {
        let mut reader = CorpusReader::open(corpus, &ReaderOptions::default()).unwrap();
        let output = SignatureWriter::create(&dir.join("sigs.npy"), kernel.num_perm()).unwrap();
        lshbench_core::sketch::sketch(
            &mut reader,
            &shingler,
            kernel.as_ref(),
            output,
            watch,
            &tuning,
        )
        .unwrap();
        let mut reader = CorpusReader::open(corpus, &ReaderOptions::default()).unwrap();
        let options = DedupOptions {
            bands: Some(42),
            rows: Some(3),
            threshold: Some(0.5),
            outputs: DedupOutputs {
                pairs: Some(dir.join("pairs.csv")),
                ..DedupOutputs::default()
            },
            tuning,
            ..DedupOptions::default()
        };
        let report =
            lshbench_core::dedup::run(&mut reader, &shingler, kernel.as_ref(), &options, watch)
                .unwrap();
        assert!(!report.outcome.verified.is_empty());
    });
    watch.look();
    (watch.take(), tasks().len().saturating_sub(before))
}

#[test]
fn library_calls_bind_nothing_and_leave_no_thread_unless_tuned() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("spam.jsonl");
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/data/spamassassin.jsonl.gz"
        ))
        .unwrap(),
    )
    .read_to_end(&mut text)
    .unwrap();
    std::fs::write(&corpus, text).unwrap();
    let watch = Watch::new();

    let (seen, left) = run(&corpus, dir.path(), Tuning::default(), &watch);
    assert!(seen.is_empty(), "a library call moved threads: {seen:?}");
    assert_eq!(left, 0, "a library call left threads running");

    // The CLI's tuning, asked for: where it has a CPU to spare, the watch sees the bound helper threads. (On
    // a machine with more than two CPUs, or a single one, nothing is bound even then.)
    let cli = Tuning {
        bind_helpers: true,
        ..Tuning::default()
    };
    let spare = std::thread::available_parallelism().map_or(0, |n| n.get()) == 2;
    let (seen, _) = run(&corpus, dir.path(), cli, &watch);
    if spare {
        assert!(
            seen.iter().any(|s| s.contains("CPUs")),
            "the tuned run bound nothing: the watch cannot see binding"
        );
    }
}
