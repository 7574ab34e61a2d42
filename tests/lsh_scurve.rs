//! The banding index against theory: synthetic pairs of known Jaccard J (Ertl's protocol, fresh random
//! elements per pair), signed by the classic MinHash kernels, become candidates with probability
//! P(J) = 1 - (1 - J^r)^b. Each cell's count is checked against Binomial(n, P(J)) with a z-bound whose
//! false-alarm rate is stated, not a tuned tolerance.

use lshbench_core::corpus::pairs::{ElementKind, PairShape, PairSource};
use lshbench_core::kernel::{KernelParams, build};
use lshbench_core::lsh::index::{BandHasher, batch_candidates};
use lshbench_core::lsh::scurve::Banding;

/// Two-sided z for a false-alarm rate of 1e-6 per cell (the test has 2 kernels x 6 cells).
const Z: f64 = 4.89;

#[test]
fn candidate_rate_follows_the_s_curve() {
    let banding = Banding::new(20, 5, 100).unwrap();
    let k = 100;
    let n_pairs = 600;
    for kernel_name in ["scalar", "simd"] {
        let kernel = build(
            kernel_name,
            &KernelParams {
                num_perm: k,
                seed: 5,
                isa: None,
            },
        )
        .unwrap();
        for (cell, j) in [0.2, 0.35, 0.45, 0.55, 0.65, 0.8].into_iter().enumerate() {
            let shape = PairShape::for_jaccard(400, j);
            let j = shape.jaccard();
            let mut source = PairSource::new(shape, ElementKind::Random, 1000 + cell as u64);
            let mut sigs = vec![0u32; 2 * n_pairs * k];
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for p in 0..n_pairs {
                source.next_pair(&mut a, &mut b);
                kernel.sign(&a, &mut sigs[(2 * p) * k..(2 * p + 1) * k]);
                kernel.sign(&b, &mut sigs[(2 * p + 1) * k..(2 * p + 2) * k]);
            }
            let empty = vec![false; 2 * n_pairs];
            let found =
                batch_candidates(&sigs, k, &empty, &BandHasher::new(banding, 9), usize::MAX);
            let planted = found
                .pairs
                .iter()
                .filter(|&&(x, y)| x % 2 == 0 && y == x + 1)
                .count();
            // Pairs across different planted pairs share no element; a band match needs r equal 32-bit minima.
            let cross = found.pairs.len() - planted;
            assert!(
                cross <= 2,
                "{kernel_name}: {cross} candidates between unrelated sets"
            );
            let p = banding.probability(j);
            let mean = n_pairs as f64 * p;
            let sd = (n_pairs as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (planted as f64 - mean).abs() <= Z * sd + 0.5,
                "{kernel_name} J={j:.3}: {planted} of {n_pairs} candidates, S-curve predicts {mean:.1} +- {sd:.1}"
            );
        }
    }
}
