//! Corpus benchmarks: reader throughput and generator throughput, in bytes of document text.
//!
//! - `read/<format>`: every SpamAssassin body read through `CorpusReader` from `jsonl.gz` (the shipped file),
//!   plain `jsonl`, and `csv` (the last two written to a temporary directory first), one thread.
//! - `set/sorted`: every SpamAssassin body's `char:5` shingle set as sorted window ids (`Shingler::set`, what
//!   `dedup` verified on before); `set/mixed`: the same sets as `Shingler::mixed_set` forms them (what it
//!   verifies on now). One thread, bytes of text.
//! - `gen/jsonl/1t`: `lshbench gen`'s writer with the default settings (1.5 KB documents, 10% planted copies),
//!   20,000 documents into memory on a 1-thread pool, uncompressed; `gen/jsonl.gz/1t` the same gzip-compressed.
//!
//! Each bench checks its answer before timing (memchr's habit): the readers must yield all 6,046 documents,
//! 21,163,476 bytes of text and no rejection; the generator must write the requested number of lines.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lshbench_core::corpus::synth::{GenConfig, write_corpus};
use lshbench_core::corpus::{CorpusReader, ReaderOptions};
use lshbench_core::sets;
use lshbench_core::shingle::{Normalization, ShingleKind, Shingler};
use std::path::{Path, PathBuf};
use std::time::Duration;

const DOCS: u64 = 6046;
const TEXT_BYTES: u64 = 21_163_476;

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/spamassassin.jsonl.gz")
}

/// Reads a whole corpus, returning (documents, text bytes, rejected).
fn read_all(path: &Path, options: &ReaderOptions) -> (u64, u64, u64) {
    let mut reader = CorpusReader::open(path, options).unwrap_or_else(|e| panic!("{e}"));
    let mut bytes = 0u64;
    for doc in reader.by_ref() {
        bytes += doc.unwrap_or_else(|e| panic!("{e}")).text.len() as u64;
    }
    let s = reader.stats();
    (s.documents, bytes, s.rejected)
}

fn readers(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = dir.path().join("spamassassin.jsonl");
    let csv_path = dir.path().join("spamassassin.csv");
    {
        let mut jsonl = std::io::BufWriter::new(std::fs::File::create(&plain).unwrap());
        let mut csv = csv::Writer::from_path(&csv_path).unwrap();
        csv.write_record(["id", "text"]).unwrap();
        let mut reader = CorpusReader::open(&shipped(), &ReaderOptions::default()).unwrap();
        for doc in reader.by_ref() {
            let doc = doc.unwrap();
            use std::io::Write;
            serde_json::to_writer(
                &mut jsonl,
                &serde_json::json!({"id": doc.id, "text": doc.text}),
            )
            .unwrap();
            jsonl.write_all(b"\n").unwrap();
            csv.write_record([&doc.id, &doc.text]).unwrap();
        }
    }
    let options = ReaderOptions::default();
    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(TEXT_BYTES));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(5));
    for (name, path) in [
        ("jsonl.gz", shipped()),
        ("jsonl", plain.clone()),
        ("csv", csv_path.clone()),
    ] {
        assert_eq!(read_all(&path, &options), (DOCS, TEXT_BYTES, 0), "{name}");
        group.bench_function(name, |b| b.iter(|| read_all(&path, &options)));
    }
    group.finish();
}

fn sets(c: &mut Criterion) {
    let mut reader = CorpusReader::open(&shipped(), &ReaderOptions::default()).unwrap();
    let texts: Vec<String> = reader.by_ref().map(|d| d.unwrap().text).collect();
    let shingler = Shingler::new(ShingleKind::Char(5), Normalization::default(), 42);
    // Both forms are the same sets: equal sizes document by document.
    for t in &texts {
        assert_eq!(shingler.set(t).len(), shingler.mixed_set(t).len());
    }
    let mut group = c.benchmark_group("set");
    group.throughput(Throughput::Bytes(TEXT_BYTES));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("sorted", |b| {
        b.iter(|| texts.iter().map(|t| shingler.set(t).len()).sum::<usize>())
    });
    group.bench_function("mixed", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| shingler.mixed_set(t).len())
                .sum::<usize>()
        })
    });
    // The window ids alone, before any sorting: what the two below spend beyond hashing.
    group.bench_function("hashes", |b| {
        let mut ids = Vec::new();
        b.iter(|| {
            texts
                .iter()
                .map(|t| {
                    shingler.hashes(t, &mut ids);
                    ids.len()
                })
                .sum::<usize>()
        })
    });
    // What `dedup`'s set stage builds, one thread.
    group.bench_function("split", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| sets::verification_split_set(&shingler, t).len())
                .sum::<usize>()
        })
    });
    group.finish();
}

fn generator(c: &mut Criterion) {
    let config = GenConfig {
        docs: 20_000,
        ..Default::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let make = |gzip: bool| {
        let mut out = Vec::with_capacity(40 << 20);
        let (_, text_bytes) = pool
            .install(|| write_corpus(&config, &mut out, gzip, &lshbench_core::exec::Silent))
            .unwrap();
        (out, text_bytes)
    };
    let (plain, text_bytes) = make(false);
    assert_eq!(memchr::memchr_iter(b'\n', &plain).count(), config.docs);
    let mut group = c.benchmark_group("gen");
    group.throughput(Throughput::Bytes(text_bytes));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("jsonl/1t", |b| b.iter(|| make(false).1));
    group.bench_function("jsonl.gz/1t", |b| b.iter(|| make(true).1));
    group.finish();
}

/// No plots: criterion's plotting backend needs system fonts that CI machines may lack.
fn config() -> Criterion {
    Criterion::default().without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = readers, sets, generator
}
criterion_main!(benches);
