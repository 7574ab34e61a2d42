//! Banding index benchmarks: streaming insert, query, and bulk candidate generation over synthetic signatures
//! with planted near-duplicates. Each bench checks its answer first (memchr's habit), so a wrong index fails
//! instead of reporting a fast time.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lshbench_core::lsh::index::{BandHasher, LshIndex, batch_candidates};
use lshbench_core::lsh::scurve::Banding;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use std::hint::black_box;

const K: usize = 128;

/// n signatures; every 10th is a copy of its predecessor with 20% of slots changed.
fn signatures(n: usize) -> Vec<u32> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut sigs = Vec::with_capacity(n * K);
    for i in 0..n {
        if i % 10 == 9 {
            let prev: Vec<u32> = sigs[(i - 1) * K..i * K].to_vec();
            sigs.extend(prev.into_iter().map(|s| {
                if rng.next_u64() % 5 == 0 {
                    rng.next_u64() as u32
                } else {
                    s
                }
            }));
        } else {
            sigs.extend((0..K).map(|_| rng.next_u64() as u32));
        }
    }
    sigs
}

fn bench(c: &mut Criterion) {
    let banding = Banding::new(42, 3, K).unwrap();
    let mut group = c.benchmark_group("lsh-42x3");
    for n in [10_000usize, 100_000] {
        let sigs = signatures(n);
        let empty = vec![false; n];
        let hasher = BandHasher::new(banding, 7);
        // Every planted copy shares a band with its base with probability P(0.8) ~ 1 at 42x3.
        let check = batch_candidates(&sigs, K, &empty, &hasher, usize::MAX);
        let planted = check
            .pairs
            .iter()
            .filter(|&&(a, b)| b % 10 == 9 && a + 1 == b)
            .count();
        assert_eq!(planted, n / 10, "batch candidates lost planted pairs");
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("batch-candidates", n), &n, |bch, _| {
            bch.iter(|| {
                black_box(
                    batch_candidates(&sigs, K, &empty, &hasher, 5000)
                        .pairs
                        .len(),
                )
            })
        });
        group.bench_with_input(BenchmarkId::new("insert", n), &n, |bch, _| {
            bch.iter(|| {
                let mut index = LshIndex::new(banding, 7);
                for i in 0..n {
                    index.insert(i as u32, &sigs[i * K..(i + 1) * K]);
                }
                black_box(index.len())
            })
        });
        let mut index = LshIndex::new(banding, 7);
        for i in 0..n {
            index.insert(i as u32, &sigs[i * K..(i + 1) * K]);
        }
        assert!(index.query(&sigs[9 * K..10 * K]).contains(&8));
        group.bench_with_input(BenchmarkId::new("query", n), &n, |bch, _| {
            bch.iter(|| {
                let mut total = 0;
                for i in 0..n {
                    total += index.query(&sigs[i * K..(i + 1) * K]).len();
                }
                black_box(total)
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).without_plots();
    targets = bench
}
criterion_main!(benches);
