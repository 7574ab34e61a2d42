//! Kernel benchmarks: text in (shingling included), signatures out, throughput in bytes of text. Every timing
//! goes through `Kernel::sign_text`, as `lshbench sketch` and `dedup` do (`oph` fuses shingling into signing there).
//!
//! - `<kernel>/doc/k<K>/<len>`: every registered kernel, k in {64, 128, 256}, one document of 100 B, 1 KB,
//!   10 KB or 100 KB of SpamAssassin text starting one byte off alignment.
//! - `<kernel>/corpus/k128/<n>t`: the SpamAssassin bodies, char:5, k = 128, on a rayon pool of n threads
//!   (n = 1 for every kernel, n = 2 as well for `simd` and `oph-opt`).
//!
//! - `bbit/{pack,estimate_packed,estimate_unpacked}/b<B>`: b-bit slots of 1,000 `simd` signatures at k = 512:
//!   packing them, and the corrected estimate of 999 neighbouring pairs from the packed words (the
//!   XOR-and-fold count) and from the unpacked slots; throughput in signatures (pairs).
//!
//! Every kernel name is the first part of its benchmark names, so `cargo bench --bench kernels -- oph` runs one
//! family. Before timing, the corpus bench checks its answers (memchr's habit): every kernel with a
//! `same_output_as` entry in the registry (`simd`: `scalar`) equals it on every document, and 2 threads give the
//! same signatures as 1.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use lshbench_core::kernel::{self, Isa, KERNELS, Kernel, KernelParams};
use lshbench_core::shingle::{Normalization, ShingleKind, Shingler};
use rayon::prelude::*;
use std::io::BufRead;
use std::time::Duration;

const SEED: u64 = 42;

/// The SpamAssassin bodies, in file order.
fn corpus() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/spamassassin.jsonl.gz");
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(file));
    reader
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let line = line.unwrap_or_else(|e| panic!("{path} line {}: {e}", i + 1));
            let v: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("{path} line {}: {e}", i + 1));
            v["text"]
                .as_str()
                .unwrap_or_else(|| panic!("{path} line {}: no text field", i + 1))
                .to_string()
        })
        .collect()
}

fn make(name: &str, num_perm: usize) -> Box<dyn Kernel> {
    kernel::build(
        name,
        &KernelParams {
            num_perm,
            seed: SEED,
            isa: None,
        },
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn shingler() -> Shingler {
    Shingler::new(ShingleKind::Char(5), Normalization::default(), SEED)
}

/// Signs every text into `out` (row-major, k per text) on the current rayon pool.
fn sign_all(texts: &[String], shingler: &Shingler, kernel: &dyn Kernel, out: &mut [u32]) {
    let k = kernel.num_perm();
    out.par_chunks_mut(k)
        .zip(texts.par_iter())
        .with_min_len(8)
        .for_each_init(Vec::new, |ids, (sig, text)| {
            kernel.sign_text(shingler, text, ids, sig);
        });
}

/// One document of `len` bytes (cut back to a char boundary), stored one byte past an aligned start.
struct Doc {
    buf: String,
}

impl Doc {
    fn new(all_text: &str, len: usize) -> Doc {
        let mut end = len.min(all_text.len());
        while !all_text.is_char_boundary(end) {
            end -= 1;
        }
        Doc {
            buf: format!("#{}", &all_text[..end]),
        }
    }
    fn text(&self) -> &str {
        &self.buf[1..]
    }
}

/// The shared per-document helper: one benchmark per (kernel, k, length).
fn bench_doc(c: &mut Criterion, spec_name: &str, docs: &[(&str, Doc)]) {
    let shingler = shingler();
    let mut group = c.benchmark_group(format!("{spec_name}/doc"));
    for k in [64usize, 128, 256] {
        let kernel = make(spec_name, k);
        for (label, doc) in docs {
            let text = doc.text();
            group.throughput(Throughput::Bytes(text.len() as u64));
            let mut ids = Vec::new();
            let mut sig = vec![0u32; k];
            group.bench_function(BenchmarkId::new(format!("k{k}"), label), |b| {
                b.iter(|| {
                    kernel.sign_text(&shingler, std::hint::black_box(text), &mut ids, &mut sig);
                    std::hint::black_box(&sig);
                })
            });
        }
    }
    group.finish();
}

fn doc_benches(c: &mut Criterion) {
    let texts = corpus();
    let all: String = texts.concat();
    let docs: Vec<(&str, Doc)> = [
        ("100B", 100),
        ("1KB", 1_000),
        ("10KB", 10_000),
        ("100KB", 100_000),
    ]
    .into_iter()
    .map(|(label, len)| (label, Doc::new(&all, len)))
    .collect();
    for spec in KERNELS {
        bench_doc(c, spec.name, &docs);
    }
}

fn corpus_benches(c: &mut Criterion) {
    let texts = corpus();
    let bytes: u64 = texts.iter().map(|t| t.len() as u64).sum();
    let k = 128;
    let shingler = shingler();
    let pools: Vec<(usize, rayon::ThreadPool)> = [1usize, 2]
        .into_iter()
        .map(|n| {
            let pool = lshbench_core::exec::thread_pool(Some(n)).expect("rayon pool");
            (n, pool)
        })
        .collect();
    let run = |kernel: &dyn Kernel, threads: usize| {
        let mut out = vec![0u32; texts.len() * k];
        let pool = &pools.iter().find(|(n, _)| *n == threads).unwrap().1;
        pool.install(|| sign_all(&texts, &shingler, kernel, &mut out));
        out
    };
    // Check the answers before timing anything: every kernel that must reproduce another (the registry's
    // `same_output_as`) does so on the corpus.
    for spec in KERNELS {
        if let Some(reference) = spec.same_output_as {
            assert!(
                run(&*make(reference, k), 2) == run(&*make(spec.name, k), 1),
                "{} differs from {reference} on the corpus",
                spec.name
            );
        }
    }
    let oph = make("oph-opt", k);
    assert!(
        run(&*oph, 1) == run(&*oph, 2),
        "oph-opt depends on the thread count"
    );

    let mut group = c.benchmark_group("corpus");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    for spec in KERNELS {
        let kernel = make(spec.name, k);
        let threads: &[usize] = if matches!(spec.name, "simd" | "oph-opt") {
            &[1, 2]
        } else {
            &[1]
        };
        for &n in threads {
            let pool = &pools.iter().find(|(m, _)| *m == n).unwrap().1;
            let mut out = vec![0u32; texts.len() * k];
            let id = format!("{}/k{k}/{n}t/{}", spec.name, kernel.isa());
            group.bench_function(id, |b| {
                b.iter(|| pool.install(|| sign_all(&texts, &shingler, &*kernel, &mut out)))
            });
        }
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .without_plots()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

/// Thread CPU time in nanoseconds (Linux `/proc/thread-self/schedstat`), or `None` elsewhere.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// `LSHBENCH_CPU_TIME=1 cargo bench --bench kernels`: the corpus figures measured in thread CPU time as well as
/// wall time, one thread, median of 5 runs of at least 0.5 s each, the kernels' runs interleaved; then `fss`'s
/// speed as a fraction of `oph-opt`'s. On a machine shared with other jobs, wall-clock throughput mostly
/// measures the share of the CPU the bench got; CPU time is what the kernel itself costs.
fn cpu_time_report() {
    let texts = corpus();
    let bytes: f64 = texts.iter().map(|t| t.len() as f64).sum();
    let k = 128;
    let shingler = shingler();
    println!("machine: {}", lshbench_core::machine::describe());
    println!(
        "SpamAssassin bodies: {} documents, {bytes} bytes; char:5, k = {k}, 1 thread, median of 5",
        texts.len()
    );
    println!("| kernel | isa | MB/s (CPU time) | MB/s (wall) |");
    println!("|---|---|---|---|");
    let mut ids = Vec::new();
    let mut out = vec![0u32; texts.len() * k];
    let mut runs: Vec<Box<dyn Kernel>> = KERNELS.iter().map(|spec| make(spec.name, k)).collect();
    // simd on each narrower instruction set this CPU has, for comparison.
    for isa in [Isa::Avx2, Isa::Portable] {
        if isa.supported() {
            let params = KernelParams {
                num_perm: k,
                seed: SEED,
                isa: Some(isa),
            };
            runs.push(kernel::build("simd", &params).expect("simd"));
        }
    }
    // The five measurements of each kernel interleave with the others' (round r of every kernel, then round
    // r + 1), so that a machine whose speed drifts during the report slows every kernel alike and the ratios
    // between them stay fair.
    let mut cpu = vec![Vec::new(); runs.len()];
    let mut wall = vec![Vec::new(); runs.len()];
    for _ in 0..5 {
        for (i, kernel) in runs.iter().enumerate() {
            // Whole passes over the corpus until 0.5 s have gone by: the thread's CPU time is counted in
            // scheduler ticks (4 ms here), so one 20 ms pass would be measured to within 20% only.
            let (c0, w0) = (thread_cpu_ns(), std::time::Instant::now());
            let mut passes = 0u32;
            while passes == 0 || w0.elapsed().as_secs_f64() < 0.5 {
                for (text, sig) in texts.iter().zip(out.chunks_mut(k)) {
                    kernel.sign_text(&shingler, text, &mut ids, sig);
                }
                passes += 1;
            }
            wall[i].push(w0.elapsed().as_secs_f64() / passes as f64);
            if let (Some(c0), Some(c1)) = (c0, thread_cpu_ns()) {
                cpu[i].push((c1 - c0) as f64 * 1e-9 / passes as f64);
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let mut cpu_rate = Vec::new();
    for (i, kernel) in runs.iter().enumerate() {
        let rate = bytes / median(&mut cpu[i]) / 1e6;
        cpu_rate.push((kernel.name(), rate));
        println!(
            "| {} | {} | {:.1} | {:.1} |",
            kernel.name(),
            kernel.isa(),
            rate,
            bytes / median(&mut wall[i]) / 1e6
        );
    }
    // Item 3 of the text-path issue: `fss` against `oph-opt` (each name's first row: the detected instruction
    // set; only `simd` has rows on narrower ones, after its own).
    let rate_of = |name: &str| cpu_rate.iter().find(|r| r.0 == name).map(|r| r.1);
    if let (Some(fss), Some(oph)) = (rate_of("fss"), rate_of("oph-opt")) {
        println!("fss / oph-opt in CPU time: {:.3}", fss / oph);
    }
    // How far `fss` gets past round 0 (round 0 alone is one-permutation hashing).
    let fss = lshbench_core::kernel::fss::Fss::new(k, SEED);
    let (mut docs, mut rounds, mut one_round) = (0usize, 0usize, 0usize);
    for (text, sig) in texts.iter().zip(out.chunks_mut(k)) {
        shingler.hashes(text, &mut ids);
        if !ids.is_empty() {
            let r = fss.sign_counting_rounds(&ids, sig);
            docs += 1;
            rounds += r;
            one_round += (r == 1) as usize;
        }
    }
    println!(
        "fss: {:.3} rounds per non-empty document on average; {one_round} of {docs} finish in round 0",
        rounds as f64 / docs as f64
    );
    // How much of SuperMinHash's shuffle the early stop leaves: steps per shingle (1 = only position 0).
    let smh = lshbench_core::kernel::superminhash::SuperMinHash::new(
        k,
        SEED,
        lshbench_core::arch::Dispatch::detect(),
    );
    let (mut shingles, mut steps) = (0usize, 0usize);
    for (text, sig) in texts.iter().zip(out.chunks_mut(k)) {
        shingler.hashes(text, &mut ids);
        shingles += ids.len();
        steps += smh.sign_counting_steps(&ids, sig);
    }
    println!(
        "superminhash: {:.3} shuffle steps per shingle ({steps} steps for {shingles} shingles, k = {k})",
        steps as f64 / shingles as f64
    );
}

/// b-bit slots: packing and the corrected estimate, packed against unpacked. Before timing, the packed count
/// is checked against the unpacked one on every pair.
fn bbit_benches(c: &mut Criterion) {
    use lshbench_core::kernel::bbit;
    let k = 512;
    let n = 1000;
    let kern = make("simd", k);
    let shingler = shingler();
    let texts = corpus();
    let mut sigs = vec![0u32; n * k];
    let mut ids = Vec::new();
    for (text, sig) in texts.iter().cycle().take(n).zip(sigs.chunks_mut(k)) {
        shingler.hashes(text, &mut ids);
        kern.sign(&ids, sig);
    }
    let mut g = c.benchmark_group("bbit");
    for bits in [1u32, 4, 16] {
        let mut packed = Vec::new();
        for sig in sigs.chunks(k) {
            bbit::pack(sig, bits, &mut packed);
        }
        let w = bbit::words(k, bits);
        let cut: Vec<u32> = sigs.iter().map(|&v| v & bbit::mask(bits)).collect();
        for i in 0..n - 1 {
            let want = cut[i * k..(i + 1) * k]
                .iter()
                .zip(&cut[(i + 1) * k..(i + 2) * k])
                .filter(|(a, b)| a == b)
                .count();
            let got = bbit::equal_slots_packed(
                &packed[i * w..(i + 1) * w],
                &packed[(i + 1) * w..(i + 2) * w],
                k,
                bits,
            );
            assert_eq!(got, want, "b = {bits}, pair {i}");
        }
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("pack", format!("b{bits}")), |b| {
            let mut out = Vec::with_capacity(n * w);
            b.iter(|| {
                out.clear();
                for sig in sigs.chunks(k) {
                    bbit::pack(sig, bits, &mut out);
                }
                out.len()
            })
        });
        g.throughput(Throughput::Elements(n as u64 - 1));
        g.bench_function(
            BenchmarkId::new("estimate_packed", format!("b{bits}")),
            |b| {
                b.iter(|| {
                    let mut sum = 0.0;
                    for i in 0..n - 1 {
                        let eq = bbit::equal_slots_packed(
                            &packed[i * w..(i + 1) * w],
                            &packed[(i + 1) * w..(i + 2) * w],
                            k,
                            bits,
                        );
                        sum += bbit::corrected(eq as f64 / k as f64, bits);
                    }
                    sum
                })
            },
        );
        g.bench_function(
            BenchmarkId::new("estimate_unpacked", format!("b{bits}")),
            |b| {
                b.iter(|| {
                    let mut sum = 0.0;
                    for i in 0..n - 1 {
                        let eq = cut[i * k..(i + 1) * k]
                            .iter()
                            .zip(&cut[(i + 1) * k..(i + 2) * k])
                            .filter(|(a, b)| a == b)
                            .count();
                        sum += bbit::corrected(eq as f64 / k as f64, bits);
                    }
                    sum
                })
            },
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = doc_benches, corpus_benches, bbit_benches
}

fn main() {
    if std::env::var_os("LSHBENCH_CPU_TIME").is_some() {
        cpu_time_report();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
