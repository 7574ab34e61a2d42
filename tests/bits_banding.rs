//! `dedup --bits B` tunes its banding at the b-bit slot agreement P(s) = C + (1 - C) s, C = 2^-B, not at s:
//! the default rule's S-curve reaches its recall target at P(t), and the candidate rate of synthetic pairs
//! signed with B-bit slots follows the S-curve the run reports (`BandingChoice::probability`), checked by Wilson
//! intervals (Bonferroni over the cells). Before the fix the banding and the reported curve were those of
//! full-width slots: at 1 bit and t = 0.5, 35x3 made nearly every pair a candidate while the summary promised
//! the J-space curve (0.42 at J = 0.25), which this test would catch.

use lshbench_core::corpus::pairs::{ElementKind, PairShape, PairSource};
use lshbench_core::kernel::{self, KernelParams, bbit::BBit};
use lshbench_core::lsh::choice::choose_banding;
use lshbench_core::lsh::tune::{DEFAULT_RECALL, slot_agreement};
use lshbench_lab::scurve::shares_band;
use lshbench_lab::stats::{bonferroni_level, wilson, z_two_sided};

const K: usize = 128;

/// The fraction of `trials` random pairs of exact similarity `j` (union `union`) that share a band, signed by
/// `kernel` with `bits`-bit slots.
fn candidate_count(
    kernel: &str,
    bits: u32,
    choice: &lshbench_core::lsh::choice::BandingChoice,
    union: usize,
    j: f64,
    trials: usize,
    seed: u64,
) -> (u64, f64) {
    let params = KernelParams {
        num_perm: K,
        seed,
        isa: None,
    };
    let kern = BBit::wrap(kernel::build(kernel, &params).unwrap(), bits).unwrap();
    assert_eq!(kern.slot_bits(), bits);
    let shape = PairShape::for_jaccard(union, j);
    let mut src = PairSource::new(shape, ElementKind::Random, seed ^ 0x5eed);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut sa, mut sb) = (vec![0u32; K], vec![0u32; K]);
    let mut hits = 0u64;
    for _ in 0..trials {
        src.next_pair(&mut a, &mut b);
        kern.sign(&a, &mut sa);
        kern.sign(&b, &mut sb);
        hits += shares_band(&sa, &sb, choice.banding) as u64;
    }
    (hits, shape.jaccard())
}

#[test]
fn b_bit_banding_is_tuned_and_reported_at_the_slot_agreement() {
    let t = 0.5;
    // (bits, J) cells: J well below t, at t/2 and at t; classic MinHash, whose slots (so bands) are independent.
    let cells = [
        (1u32, 0.1),
        (1, 0.25),
        (1, 0.5),
        (2, 0.1),
        (2, 0.25),
        (4, 0.1),
    ];
    let trials = 1500;
    let z = z_two_sided(bonferroni_level(1e-6, cells.len()));
    for (i, &(bits, j)) in cells.iter().enumerate() {
        let choice = choose_banding(None, None, Some(t), K, bits).unwrap();
        assert_eq!(choice.bits, bits);
        // The default rule holds in P-space: P(P(t)) >= 0.99, the tuner's recall target.
        let at_t = choice.banding.probability(slot_agreement(t, bits));
        assert!(
            at_t >= DEFAULT_RECALL,
            "b={bits}: {} gives {at_t}",
            choice.banding
        );
        assert_eq!(choice.probability(t), at_t);
        let (hits, jx) = candidate_count("simd", bits, &choice, 200, j, trials, 1000 + i as u64);
        let (lo, hi) = wilson(hits, trials as u64, z);
        let predicted = choice.probability(jx);
        assert!(
            lo <= predicted && predicted <= hi,
            "b={bits} J={jx}: {hits}/{trials} candidates, Wilson [{lo:.4}, {hi:.4}] misses the S-curve at \
             P(J) = {:.4}: {predicted:.4} ({})",
            slot_agreement(jx, bits),
            choice.banding
        );
        // What full-width tuning reported (the S-curve in J itself) is far off for 1-bit slots.
        if bits == 1 && jx < t {
            let full = choose_banding(None, None, Some(t), K, 32).unwrap();
            let (hits, _) = candidate_count("simd", 1, &full, 200, j, trials, 2000 + i as u64);
            let (lo, _) = wilson(hits, trials as u64, z);
            assert!(
                lo > full.banding.probability(jx) + 0.2,
                "b=1 J={jx}: the full-width banding {} gave {hits}/{trials}",
                full.banding
            );
        }
    }
}

/// An explicit banding is judged at the slot agreement too: with 1-bit slots 35x3 finds every pair (chance
/// agreement alone, 1/8 per band, makes 99% of unrelated pairs candidates), and 20x6 at t = 0.3, refused at full
/// width, is accepted. A width outside the list is an error.
#[test]
fn explicit_banding_is_judged_at_the_slot_agreement() {
    let ok = choose_banding(Some(35), Some(3), Some(0.9), K, 1).unwrap();
    assert!(ok.probability(0.9) > 0.99);
    assert!(
        ok.probability(0.0) > 0.99,
        "chance agreement alone: {}",
        ok.probability(0.0)
    );
    // At full width 20x6 finds J = 0.3 with probability 0.014 (refused); at 1 bit P(0.3) = 0.65, and 0.65^6 = 0.075
    // per band gives 0.79 (accepted).
    assert!(choose_banding(Some(20), Some(6), Some(0.3), K, 32).is_err());
    let one = choose_banding(Some(20), Some(6), Some(0.3), K, 1).unwrap();
    assert!((one.probability(0.3) - (1.0 - (1.0 - 0.65f64.powi(6)).powi(20))).abs() < 1e-12);
    assert!(choose_banding(None, None, Some(0.5), K, 3).is_err());
}
