//! Kernel tests, generic over the registry: a new kernel gets them by adding its `KERNELS` line.
//!
//! - edge cases against the reference (`scalar`) for kernels of its family, or against the defined behaviour;
//! - `simd` bit for bit against `scalar` on every instruction set this CPU supports;
//! - statistical checks of the estimate against exact Jaccard on synthetic pairs, with z-bounds from theory;
//! - `fss` against a slow all-rounds reference, and its small-set variance and band agreement against theory.

mod common;

use lshbench_core::corpus::pairs::{ElementKind, PairShape, PairSource};
use lshbench_core::kernel::oph::{Densify, EMPTY, Oph};
use lshbench_core::kernel::{self, Isa, KERNELS, Kernel, KernelParams};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rayon::prelude::*;

/// z for a two-sided false-alarm rate of 1e-6 per check: Phi^-1(1 - 5e-7).
const Z_1E6: f64 = 4.891_638_5;

/// Kernels that implement the `scalar` family and must equal it bit for bit.
const SAME_FAMILY: &[&str] = &["scalar", "simd"];

fn make(name: &str, num_perm: usize, seed: u64, isa: Option<Isa>) -> Box<dyn Kernel> {
    kernel::build(
        name,
        &KernelParams {
            num_perm,
            seed,
            isa,
        },
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn sign(k: &dyn Kernel, ids: &[u64]) -> Vec<u32> {
    let mut out = vec![0u32; k.num_perm()];
    k.sign(ids, &mut out);
    out
}

/// Every instruction set this CPU can run.
fn supported_isas() -> Vec<Isa> {
    [Isa::Scalar, Isa::Portable, Isa::Avx2, Isa::Avx512]
        .into_iter()
        .filter(|i| i.supported())
        .collect()
}

/// Lane widths (4 and 8 u64, 4 x 4 and 8 x 4 unrolled blocks) and one either side.
fn sizes_around_lanes() -> Vec<usize> {
    let mut s = vec![0, 1, 2, 3];
    for w in [4usize, 8, 16, 32, 64, 128] {
        s.extend([w - 1, w, w + 1]);
    }
    s.sort_unstable();
    s.dedup();
    s
}

const NUM_PERMS: &[usize] = &[1, 3, 4, 7, 8, 9, 31, 32, 33, 64, 100, 127, 128, 129, 256];

fn random_ids(rng: &mut Xoshiro256PlusPlus, n: usize) -> Vec<u64> {
    (0..n).map(|_| rng.next_u64()).collect()
}

#[test]
fn registry_builds_every_kernel_and_rejects_unknown_names() {
    for spec in KERNELS {
        let k = make(spec.name, 16, 1, None);
        assert_eq!(k.name(), spec.name);
        assert_eq!(k.num_perm(), 16);
        assert!(!spec.about.is_empty() && spec.about != "todo");
    }
    let params = |num_perm| KernelParams {
        num_perm,
        seed: 0,
        isa: None,
    };
    let err = kernel::build("nope", &params(8)).err().unwrap();
    assert!(err.to_string().contains("scalar"), "{err}");
    assert!(kernel::build("scalar", &params(0)).is_err());
}

/// The shared contract (`tests/common`), on every registered kernel.
#[test]
fn every_registered_kernel_meets_the_contract() {
    for spec in KERNELS {
        common::check_contract(spec);
    }
}

#[test]
fn every_kernel_gives_the_empty_signature_for_the_empty_set() {
    for spec in KERNELS {
        for &k in NUM_PERMS {
            let kern = make(spec.name, k, 5, None);
            assert_eq!(sign(&*kern, &[]), vec![u32::MAX; k], "{} k={k}", spec.name);
        }
    }
}

#[test]
fn every_kernel_ignores_repeats_and_element_order() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    for spec in KERNELS {
        for &n in &sizes_around_lanes() {
            for &k in &[7usize, 128] {
                let kern = make(spec.name, k, 3, None);
                let ids = random_ids(&mut rng, n);
                let base = sign(&*kern, &ids);
                let mut shuffled = ids.clone();
                shuffled.reverse();
                shuffled.rotate_left(n / 3);
                assert_eq!(
                    sign(&*kern, &shuffled),
                    base,
                    "{} order n={n} k={k}",
                    spec.name
                );
                let mut repeated = ids.clone();
                repeated.extend_from_slice(&ids);
                repeated.extend(ids.iter().step_by(2));
                assert_eq!(
                    sign(&*kern, &repeated),
                    base,
                    "{} repeats n={n} k={k}",
                    spec.name
                );
            }
        }
    }
}

#[test]
fn every_kernel_is_deterministic_and_seed_dependent() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
    let ids = random_ids(&mut rng, 300);
    for spec in KERNELS {
        let a = sign(&*make(spec.name, 64, 1, None), &ids);
        assert_eq!(
            a,
            sign(&*make(spec.name, 64, 1, None), &ids),
            "{}",
            spec.name
        );
        assert_ne!(
            a,
            sign(&*make(spec.name, 64, 2, None), &ids),
            "{}",
            spec.name
        );
    }
}

#[test]
fn one_shingle_gives_a_non_empty_signature_and_oph_opt_copies_its_bin() {
    for spec in KERNELS {
        for &k in NUM_PERMS {
            for id in [0u64, 1, u64::MAX, u64::MAX - 1, 1 << 63] {
                let s = sign(&*make(spec.name, k, 9, None), &[id]);
                assert_ne!(s, vec![u32::MAX; k], "{} k={k} id={id}", spec.name);
                if spec.name == "oph-opt" {
                    // Optimal densification copies the single non-empty bin everywhere.
                    assert!(s.iter().all(|&v| v == s[0]), "oph-opt k={k}");
                }
            }
        }
    }
}

/// The defining formula of the scalar family, recomputed independently in u128.
#[test]
fn scalar_is_the_min_of_multiply_add_shift() {
    use lshbench_core::kernel::family::Family;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(13);
    for &k in &[1usize, 9, 128] {
        let fam = Family::new(k, 21);
        let ids = random_ids(&mut rng, 57);
        let got = sign(&*make("scalar", k, 21, None), &ids);
        for (i, &slot) in got.iter().enumerate() {
            let want = ids
                .iter()
                .map(|&id| {
                    let x = fam.key(id) as u128;
                    (((fam.a[i] as u128 * x + fam.b[i] as u128) % (1u128 << 64)) >> 32) as u32
                })
                .min()
                .unwrap();
            assert_eq!(slot, want, "k={k} slot {i}");
        }
    }
}

fn assert_same_as_scalar(ids: &[u64], k: usize, seed: u64, what: &str) {
    let want = sign(&*make("scalar", k, seed, None), ids);
    for name in SAME_FAMILY {
        for isa in supported_isas() {
            let got = sign(&*make(name, k, seed, Some(isa)), ids);
            assert_eq!(got, want, "{name} on {isa}, k={k}, n={}, {what}", ids.len());
        }
    }
}

#[test]
fn simd_equals_scalar_bit_for_bit_on_every_supported_isa() {
    let isas = supported_isas();
    eprintln!("instruction sets checked: {isas:?}");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512dq") {
        assert!(isas.contains(&Isa::Avx512) && isas.contains(&Isa::Avx2));
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(14);
    for &k in NUM_PERMS {
        for &n in &sizes_around_lanes() {
            let ids = random_ids(&mut rng, n);
            assert_same_as_scalar(&ids, k, rng.next_u64(), "random ids");
        }
    }
    for trial in 0..200 {
        let n = (rng.next_u64() % 3000) as usize;
        let k = 1 + (rng.next_u64() % 300) as usize;
        let ids = random_ids(&mut rng, n);
        assert_same_as_scalar(&ids, k, trial, "random sizes");
    }
}

/// Same seed, same output, whatever instruction set a kernel is forced onto.
#[test]
fn every_kernel_gives_the_same_output_on_every_supported_isa() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(16);
    for spec in KERNELS {
        for &n in &[0usize, 1, 9, 300, 1000] {
            let ids = random_ids(&mut rng, n);
            let want = sign(&*make(spec.name, 100, 4, None), &ids);
            for isa in supported_isas() {
                let got = sign(&*make(spec.name, 100, 4, Some(isa)), &ids);
                assert_eq!(got, want, "{} on {isa}, n={n}", spec.name);
            }
        }
    }
}

#[test]
fn simd_equals_scalar_at_the_edges_of_the_value_ranges() {
    // Ids near 0 and u64::MAX.
    let low: Vec<u64> = (0..40).collect();
    let high: Vec<u64> = (0..40).map(|i| u64::MAX - i).collect();
    for &k in NUM_PERMS {
        assert_same_as_scalar(&low, k, 1, "ids near 0");
        assert_same_as_scalar(&high, k, 1, "ids near u64::MAX");
    }
    // Ids whose hash in slot 0 lands in the top 2^-10 of the range, so that slot ends up near u32::MAX.
    use lshbench_core::kernel::family::Family;
    let k = 17;
    let fam = Family::new(k, 77);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(15);
    let mut near_max = Vec::new();
    while near_max.len() < 12 {
        let id = rng.next_u64();
        if fam.hash(0, fam.key(id)) >= u32::MAX - (u32::MAX >> 10) {
            near_max.push(id);
        }
    }
    let s = sign(&*make("scalar", k, 77, None), &near_max);
    assert!(s[0] >= u32::MAX - (u32::MAX >> 10));
    assert_same_as_scalar(&near_max, k, 77, "slot 0 near u32::MAX");
}

#[test]
fn oph_raw_sketch_marks_empty_bins_and_its_estimator_skips_them() {
    let k = 128;
    let oph = Oph::new(k, 3, Densify::Optimal);
    let mut raw = vec![0u32; k];
    oph.sign_raw(&[], &mut raw);
    assert!(raw.iter().all(|&v| v == EMPTY));
    let ids: Vec<u64> = (0..20).collect();
    oph.sign_raw(&ids, &mut raw);
    let filled = raw.iter().filter(|&&v| v != EMPTY).count();
    assert!((1..=20).contains(&filled), "{filled}");
    // Identical sets: every informative bin matches.
    assert_eq!(Oph::estimate_raw(&raw, &raw), 1.0);
    let empty = vec![EMPTY; k];
    assert_eq!(Oph::estimate_raw(&empty, &empty), 0.0);
    assert_eq!(Oph::estimate_raw(&raw, &empty), 0.0);
    // The densified signature keeps every non-empty raw bin unchanged.
    let dense = sign(&oph, &ids);
    for (r, d) in raw.iter().zip(&dense) {
        if *r != EMPTY {
            assert_eq!(r, d);
        }
    }
}

/// The raw estimator N_match / (k - N_empty) is unbiased too; checked at f = 20 < k = 128 with the sample
/// variance (as for the densified kernels below).
#[test]
fn oph_raw_estimator_is_unbiased_on_sparse_sets() {
    let k = 128;
    let shape = PairShape::for_jaccard(20, 0.5);
    let j = shape.jaccard();
    let mut src = PairSource::new(shape, ElementKind::Random, 500);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut ra, mut rb) = (vec![0u32; k], vec![0u32; k]);
    let trials = 3000;
    let est: Vec<f64> = (0..trials)
        .map(|t| {
            src.next_pair(&mut a, &mut b);
            let oph = Oph::new(k, t, Densify::Optimal);
            oph.sign_raw(&a, &mut ra);
            oph.sign_raw(&b, &mut rb);
            Oph::estimate_raw(&ra, &rb)
        })
        .collect();
    let (mean, var) = mean_var(&est);
    let bound = Z_1E6 * (var / trials as f64).sqrt();
    assert!(
        (mean - j).abs() <= bound,
        "raw OPH mean {mean:.4}, J {j:.4}, bound {bound:.4}"
    );
}

// ---------------------------------------------------------------------------------------------------------
// Statistics.

/// Estimates over `trials` fresh pairs of `shape`; the kernel seed changes every trial so structured inputs
/// test the family too.
fn estimates(
    name: &str,
    k: usize,
    shape: PairShape,
    kind: ElementKind,
    trials: usize,
    seed: u64,
) -> Vec<f64> {
    let mut src = PairSource::new(shape, kind, seed);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut sa, mut sb) = (vec![0u32; k], vec![0u32; k]);
    (0..trials)
        .map(|t| {
            src.next_pair(&mut a, &mut b);
            let kern = make(name, k, seed.wrapping_mul(1_000_003) + t as u64, None);
            kern.sign(&a, &mut sa);
            kern.sign(&b, &mut sb);
            kern.estimate(&sa, &sb)
        })
        .collect()
}

fn mean_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

fn mse(xs: &[f64], j: f64) -> f64 {
    xs.iter().map(|x| (x - j).powi(2)).sum::<f64>() / xs.len() as f64
}

/// For every kernel and sets larger than k: the mean of T estimates lies within z * sqrt(J(1-J)/(k T)) of J,
/// Var = J(1-J)/k being classic MinHash's variance. OPH samples without replacement, so its variance at
/// f >> k is at most that (plus a small densification term for the few empty bins at f = 3k); z is for a
/// 1e-6 two-sided false alarm per check.
#[test]
fn every_kernel_estimates_jaccard_without_bias_on_large_sets() {
    let k = 128;
    let trials = 400;
    let shapes = [
        PairShape {
            only_a: 30,
            only_b: 10,
            both: 160,
        },
        PairShape::for_jaccard(1000, 0.5),
        PairShape::for_jaccard(600, 0.1),
        PairShape::for_jaccard(400, 0.95),
    ];
    for spec in KERNELS {
        for (s, shape) in shapes.iter().enumerate() {
            for kind in [ElementKind::Random, ElementKind::Consecutive] {
                let j = shape.jaccard();
                let est = estimates(spec.name, k, *shape, kind, trials, 100 + s as u64);
                let (mean, _) = mean_var(&est);
                let bound = Z_1E6 * (j * (1.0 - j) / (k * trials) as f64).sqrt();
                // A family known to break on structured keys: its consecutive cells are the common contract's
                // expected failure, not checked here.
                if kind == ElementKind::Consecutive
                    && kernel::ophhash::BREAKS_ON_CONSECUTIVE.contains(&spec.name)
                {
                    continue;
                }
                assert!(
                    (mean - j).abs() <= bound,
                    "{} {kind:?} J={j:.3}: mean {mean:.4}, bound {bound:.4}",
                    spec.name
                );
            }
        }
    }
}

/// Sets smaller than k (OPH leaves many bins empty). The variance is no longer J(1-J)/k and depends on the
/// densification, so the mean is tested against the sample variance: |mean - J| <= z * s / sqrt(T)
/// (densified OPH is unbiased: Shrivastava 2017, Shrivastava and Li 2014).
#[test]
fn every_kernel_is_unbiased_on_sets_smaller_than_k() {
    let cases = [
        (128usize, PairShape::for_jaccard(20, 0.5)),
        (
            40,
            PairShape {
                only_a: 5,
                only_b: 5,
                both: 4,
            },
        ),
    ];
    for spec in KERNELS {
        for (c, (k, shape)) in cases.iter().enumerate() {
            for kind in [ElementKind::Random, ElementKind::Consecutive] {
                let j = shape.jaccard();
                let trials = 3000;
                let est = estimates(spec.name, *k, *shape, kind, trials, 200 + c as u64);
                let (mean, var) = mean_var(&est);
                let bound = Z_1E6 * (var / trials as f64).sqrt();
                assert!(
                    (mean - j).abs() <= bound,
                    "{} {kind:?} k={k} f={} J={j:.3}: mean {mean:.4}, bound {bound:.4}",
                    spec.name,
                    shape.union()
                );
            }
        }
    }
}

/// At f = 14, k = 40, J = 0.286 (most bins empty) each kernel's MSE over fresh-seed trials matches its family's
/// closed form (`kernel::variance`), within z (1e-6 false alarm) standard errors of the MSE estimated from the
/// trials' fourth moment, and optimal densification beats rotation. The quoted figures
/// (docs/src/published-figures.md: MinHash 0.0051, optimal 0.0066, rotation 0.0145) are printed as a note: their
/// source and trial count are not stated.
#[test]
fn densification_mse_matches_its_closed_form_on_small_sets() {
    let shape = PairShape {
        only_a: 5,
        only_b: 5,
        both: 4,
    };
    let (j, k, trials) = (shape.jaccard(), 40, 20_000);
    let mut measured = Vec::new();
    for (name, published) in [("simd", 0.0051), ("oph-opt", 0.0066), ("oph-rot", 0.0145)] {
        let errors: Vec<f64> = estimates(name, k, shape, ElementKind::Random, trials, 301)
            .iter()
            .map(|x| x - j)
            .collect();
        let n = trials as f64;
        let mse = errors.iter().map(|e| e * e).sum::<f64>() / n;
        let fourth = errors.iter().map(|e| e.powi(4)).sum::<f64>() / n;
        let se = ((fourth - mse * mse).max(0.0) / n).sqrt();
        let family = lshbench_core::kernel::spec(name).unwrap().family;
        let rel = family.predicted_rel_mse(shape.union(), k).unwrap();
        let predicted = rel * j * (1.0 - j) / k as f64;
        eprintln!(
            "f=14 k=40 {name}: MSE {mse:.5} +- {se:.5}, closed form {predicted:.5}, published {published} (a note)"
        );
        assert!(
            (mse - predicted).abs() <= Z_1E6 * se,
            "{name}: MSE {mse:.5} vs closed form {predicted:.5} ({} standard errors of {se:.5})",
            ((mse - predicted) / se).abs()
        );
        measured.push(mse);
    }
    assert!(
        measured[1] < measured[2],
        "optimal {:.5} vs rotation {:.5}",
        measured[1],
        measured[2]
    );
}

/// Ertl's protocol for the classic-family kernels: relative MSE = MSE / (J(1-J)/m) must lie in
/// 1 +- z sqrt((2 + (1/(J(1-J)) - 6)/m) / c), z = sqrt(2) erfinv(0.9999) = 3.8906, c trials per cell.
#[test]
fn classic_kernels_pass_ertls_relative_mse_band() {
    let m = 32;
    let c = 10_000;
    let z = 3.890_591_886;
    for name in SAME_FAMILY {
        for (u, jt) in [
            (8usize, 0.5),
            (32, 0.5),
            (128, 0.5),
            (1024, 0.5),
            (200, 0.8),
        ] {
            let shape = PairShape::for_jaccard(u, jt);
            let j = shape.jaccard();
            for kind in [ElementKind::Random, ElementKind::Consecutive] {
                let est = estimates(name, m, shape, kind, c, 400 + u as u64);
                let rel = mse(&est, j) / (j * (1.0 - j) / m as f64);
                let band = z * ((2.0 + (1.0 / (j * (1.0 - j)) - 6.0) / m as f64) / c as f64).sqrt();
                assert!(
                    (rel - 1.0).abs() <= band,
                    "{name} {kind:?} u={u} J={j}: relative MSE {rel:.4} outside 1 +- {band:.4}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Fast Similarity Sketching.

/// `fss` recomputed from its documented definition, running all 2k rounds with no early stop: round seeds are
/// xoshiro256++'s first 2k outputs, `h = mix64(id ^ seed_i)`, bin `(hi32(h) * k) >> 32` for i < k and `i - k`
/// after, slot word `(i << F) | (lo32(h) >> B)` capped at `u32::MAX - 1`, each bin keeping its minimum. Also
/// returns, per bin, the element that set the minimum (the first one on equal words).
fn fss_reference(ids: &[u64], k: usize, seed: u64) -> (Vec<u32>, Vec<Option<u64>>) {
    use lshbench_core::hash::mix64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let seeds: Vec<u64> = (0..2 * k).map(|_| rng.next_u64()).collect();
    let b = (0u32..)
        .find(|&b| (2 * k as u64 - 1) < (1u64 << b))
        .unwrap();
    let mut out = vec![u32::MAX; k];
    let mut winner = vec![None; k];
    for (i, &s) in seeds.iter().enumerate() {
        for &id in ids {
            let h = mix64(id ^ s);
            let bin = if i < k {
                (((h >> 32) * k as u64) >> 32) as usize
            } else {
                i - k
            };
            let word = (((i as u64) << (32 - b)) | ((h as u32) >> b) as u64)
                .min(u32::MAX as u64 - 1) as u32;
            if word < out[bin] {
                out[bin] = word;
                winner[bin] = Some(id);
            }
        }
    }
    (out, winner)
}

#[test]
fn fss_early_stopping_equals_the_full_2k_round_reference() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
    for &k in &[1usize, 2, 3, 7, 40, 64, 128, 129] {
        let seed = rng.next_u64();
        let kernels: Vec<_> = supported_isas()
            .into_iter()
            .map(|isa| make("fss", k, seed, Some(isa)))
            .collect();
        for n in 1..=3 * k {
            let random = random_ids(&mut rng, n);
            let start = rng.next_u64() >> 1;
            let consecutive: Vec<u64> = (0..n as u64).map(|i| start + i).collect();
            for ids in [&random, &consecutive] {
                let (want, _) = fss_reference(ids, k, seed);
                for kern in &kernels {
                    assert_eq!(
                        sign(&**kern, ids),
                        want,
                        "fss on {}, k={k}, n={n}",
                        kern.isa()
                    );
                }
            }
        }
    }
}

/// Small sets, where FSS runs many rounds. Its slots are not independent: an element lands in one bin per round, so
/// different bins tend to be won by different elements (sampling closer to without replacement), and the variance is
/// *below* classic MinHash's J(1-J)/k, not equal to it. The size of the drop follows from exchangeability alone. Let
/// f = |A u B|, M_j = [slot j agrees] and q = Pr[bins j != j' have the same winning element]. Same winner: both
/// agree or both disagree, Pr[M_j M_j'] = J. Different winners: a uniform pair of distinct elements (the hashing is
/// symmetric in the elements), both shared with probability J (Jf - 1)/(f - 1). So Cov(M_j, M_j') = q J + (1 - q) J
/// (Jf - 1)/(f - 1) - J^2 = -(1/f - q) J (1 - J) f/(f - 1), which is 0 for classic MinHash (q = 1/f), and MSE /
/// (J(1-J)/k) = 1 - (k - 1) (1/f - q) f/(f - 1). q does not depend on J or on the kernel's hash, so it is measured
/// on the 2k-round reference (which records each bin's winner) over fresh random sets; the kernel's relative MSE
/// must match the prediction within the standard errors of both (each from its own samples), at a 1e-6 false alarm,
/// for random and consecutive elements. Against MinHash: the relative MSE must not exceed Ertl's acceptance band
/// around 1, 1 + z sqrt((2 + (1/(J(1-J)) - 6)/m) / c) with z = 3.8906 (docs/src/published-figures.md); it is in fact
/// far below it.
#[test]
fn fss_small_set_mse_follows_its_dependence_and_is_at_most_minhash() {
    let ertl_z = 3.890_591_886;
    let c = 10_000;
    for (k, shape) in [
        (
            40usize,
            PairShape {
                only_a: 5,
                only_b: 5,
                both: 4,
            },
        ),
        (128, PairShape::for_jaccard(20, 0.5)),
    ] {
        let f = shape.union();
        let j = shape.jaccard();
        let minhash_var = j * (1.0 - j) / k as f64;
        // q from the reference, one value per fresh set: the share of bin pairs with the same winner.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(19 + k as u64);
        let qs: Vec<f64> = (0..20_000)
            .map(|_| {
                let ids = random_ids(&mut rng, f);
                let (_, winners) = fss_reference(&ids, k, rng.next_u64());
                let same: usize = ids
                    .iter()
                    .map(|id| {
                        let w = winners.iter().filter(|x| **x == Some(*id)).count();
                        w * w.saturating_sub(1) / 2
                    })
                    .sum();
                same as f64 / (k * (k - 1) / 2) as f64
            })
            .collect();
        let (q, q_var) = mean_var(&qs);
        let slope = (k - 1) as f64 * f as f64 / (f - 1) as f64;
        let predicted = 1.0 - slope * (1.0 / f as f64 - q);
        let predicted_se = slope * (q_var / qs.len() as f64).sqrt();
        for kind in [ElementKind::Random, ElementKind::Consecutive] {
            let est = estimates("fss", k, shape, kind, c, 500 + k as u64);
            let sq: Vec<f64> = est.iter().map(|x| (x - j).powi(2)).collect();
            let (m, sq_var) = mean_var(&sq);
            let rel = m / minhash_var;
            let rel_se = (sq_var / c as f64).sqrt() / minhash_var;
            let bound = Z_1E6 * (rel_se.powi(2) + predicted_se.powi(2)).sqrt();
            eprintln!(
                "fss {kind:?} f={f} k={k} J={j:.3}: relative MSE {rel:.4}, predicted {predicted:.4} (q = {q:.5} vs \
                 1/f = {:.5}), bound {bound:.4}",
                1.0 / f as f64
            );
            assert!(
                (rel - predicted).abs() <= bound,
                "fss {kind:?} f={f} k={k}: relative MSE {rel:.4}, predicted {predicted:.4}, bound {bound:.4}"
            );
            let band =
                ertl_z * ((2.0 + (1.0 / (j * (1.0 - j)) - 6.0) / k as f64) / c as f64).sqrt();
            assert!(
                rel <= 1.0 + band,
                "fss {kind:?} f={f} k={k}: relative MSE {rel:.4} above MinHash's band 1 + {band:.4}"
            );
        }
    }
}

/// docs/src/published-figures.md: at f = 20, J = 0.5, r = 5, a band of r slots agrees with probability 0.19 under
/// rotation densification against J^r = 0.031 for independent slots. FSS must be consistent with J^r: one band
/// (slots 0..5) per trial with a fresh kernel seed and fresh elements, so the T outcomes are independent Bernoulli
/// and the count is binomial; |p - J^r| <= z sqrt(J^r (1 - J^r) / T) at a 1e-6 false alarm. (The slight negative
/// dependence derived above lowers the true p by about C(r,2) (1/f - q) f/(f-1) J^(r-1) (1-J), 0.0012 here, under a
/// third of the bound.)
#[test]
fn fss_band_agreement_on_sparse_sets_is_j_to_the_r() {
    let (k, r, trials) = (128usize, 5usize, 40_000usize);
    let shape = PairShape::for_jaccard(20, 0.5);
    let j = shape.jaccard();
    let want = j.powi(r as i32);
    for kind in [ElementKind::Random, ElementKind::Consecutive] {
        let mut src = PairSource::new(shape, kind, 601);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (mut sa, mut sb) = (vec![0u32; k], vec![0u32; k]);
        let agree = (0..trials)
            .filter(|&t| {
                src.next_pair(&mut a, &mut b);
                let kern = make("fss", k, 7_000_000 + t as u64, None);
                kern.sign(&a, &mut sa);
                kern.sign(&b, &mut sb);
                sa[..r] == sb[..r]
            })
            .count();
        let p = agree as f64 / trials as f64;
        let bound = Z_1E6 * (want * (1.0 - want) / trials as f64).sqrt();
        eprintln!(
            "fss {kind:?} f=20 J=0.5 r=5: band agreement {p:.4} vs J^r {want:.4} +- {bound:.4}"
        );
        assert!(
            (p - want).abs() <= bound,
            "fss {kind:?}: band agreement {p:.4}, J^r {want:.4}, bound {bound:.4}"
        );
    }
}

/// Every slot of a non-empty set is filled by the round that decided it, and its round field is below 2k.
#[test]
fn fss_rounds_stop_when_every_bin_is_filled() {
    use lshbench_core::kernel::fss::Fss;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(23);
    for &k in &[1usize, 7, 128] {
        let fss = Fss::new(k, 3);
        let b = Fss::round_bits(k);
        let mut out = vec![0u32; k];
        assert_eq!(fss.sign_counting_rounds(&[], &mut out), 0);
        for n in [1usize, 5, 50, 5000] {
            let ids = random_ids(&mut rng, n);
            let rounds = fss.sign_counting_rounds(&ids, &mut out);
            assert!(
                (1..=2 * k).contains(&rounds),
                "k={k} n={n}: {rounds} rounds"
            );
            let last = out.iter().map(|&v| (v >> (32 - b)) as usize).max().unwrap();
            assert_eq!(
                last + 1,
                rounds,
                "k={k} n={n}: the last round run must have filled a bin"
            );
            if n == 5000 && k == 128 {
                // 5000 elements leave a given bin empty after round 0 with probability (1-1/128)^5000 < 1e-16.
                assert_eq!(rounds, 1);
            }
        }
    }
}

/// Texts that exercise the fused text-to-sketch paths: empty, shorter than a window, every length around the
/// 8-window vectors, the 16-byte loads and the 256-window chunks, non-ASCII characters at the start, middle and
/// end of ASCII runs, runs shorter than a window, all-multibyte text, and long texts with many candidates.
fn fused_texts() -> Vec<String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let words = [
        "the",
        "spam",
        "offer",
        "free",
        "click",
        "here",
        "now",
        "list",
        "unsubscribe",
        "mail",
    ];
    let mut prose = String::new();
    while prose.len() < 20_000 {
        prose.push_str(words[(rng.next_u64() % words.len() as u64) as usize]);
        prose.push(if rng.next_u64() % 9 == 0 { '\n' } else { ' ' });
    }
    let mut texts: Vec<String> = vec![String::new(), "a".into(), "abcd".into(), "hello".into()];
    for len in (5..=80).chain([
        127, 128, 129, 255, 256, 257, 263, 2047, 2048, 2049, 2100, 20_000,
    ]) {
        texts.push(prose[..len].to_string());
    }
    // Non-ASCII: accented letters, a euro sign (3 bytes), an emoji (4 bytes), CJK; at many positions.
    for (i, insert) in ["\u{e9}", "\u{20ac}", "\u{1f600}", "\u{4e2d}\u{6587}"]
        .iter()
        .enumerate()
    {
        for at in [0usize, 1, 3, 7, 8, 15, 16, 17, 100, 1000] {
            let base = &prose[..(300 + 97 * i).min(prose.len())];
            let at = at.min(base.len());
            texts.push(format!("{}{insert}{}", &base[..at], &base[at..]));
        }
        texts.push(format!("{insert}{}", &prose[..3000]).replace(' ', insert));
    }
    texts.push("\u{4e2d}\u{6587}\u{6587}\u{5b57}\u{7b26}".repeat(50));
    texts.push("ab\u{e9}cd".into());
    texts.push("\u{e9}".repeat(3));
    texts
}

/// `sign_text` (which `oph` runs fused, straight from the text) on each instruction set equals scalar shingling
/// then scalar `sign`, for every kernel, shingle kind and k, and reports empty sets the same way: the shingler's
/// vector paths and the kernels' are both covered.
#[test]
fn sign_text_equals_shingling_then_signing() {
    use lshbench_core::shingle::{Normalization, ShingleKind, Shingler};
    let texts = fused_texts();
    let kinds = [
        ShingleKind::Char(5),
        ShingleKind::Char(1),
        ShingleKind::Char(8),
        ShingleKind::Char(9),
        ShingleKind::Byte(3),
        ShingleKind::Byte(8),
        ShingleKind::Word(2),
    ];
    let lower = Normalization {
        lowercase: true,
        ..Normalization::default()
    };
    // Every (ISA, kernel, k) on its own, spread over the cores (the slowest test of the suite otherwise).
    let mut cases = Vec::new();
    for isa in supported_isas() {
        for spec in KERNELS {
            for k in [1usize, 7, 64, 128, 256, 1000, 1024] {
                cases.push((isa, spec, k));
            }
        }
    }
    cases.par_iter().for_each(|&(isa, spec, k)| {
        // The reference: scalar shingling, then the kernel's scalar `sign`; against it, the fused path with
        // both the shingler and the kernel on `isa`.
        let reference = make(spec.name, k, 3, Some(Isa::Scalar));
        let kernel = make(spec.name, k, 3, Some(isa));
        let mut shinglers: Vec<(Normalization, ShingleKind)> = kinds
            .iter()
            .map(|&kind| (Normalization::default(), kind))
            .collect();
        shinglers.push((lower, ShingleKind::Char(5)));
        for &(norm, kind) in &shinglers {
            let scalar = Shingler::new(kind, norm, 3)
                .with_isa(Some(Isa::Scalar))
                .unwrap();
            let sh = Shingler::new(kind, norm, 3).with_isa(Some(isa)).unwrap();
            let sh = &sh;
            let (mut ids, mut scratch) = (Vec::new(), Vec::new());
            let (mut want, mut got) = (vec![0u32; k], vec![7u32; k]);
            for text in &texts {
                scalar.hashes(text, &mut ids);
                reference.sign(&ids, &mut want);
                let empty = kernel.sign_text(sh, text, &mut scratch, &mut got);
                let what = format!(
                    "{} isa={isa} k={k} {:?} text of {} bytes",
                    spec.name,
                    sh.kind,
                    text.len()
                );
                assert_eq!(want, got, "{what}");
                assert_eq!(empty, ids.is_empty(), "{what}");
            }
        }
    });
}

// ---------------------------------------------------------------------------------------------------------
// b-bit slots (Li and König 2010).

/// Every kernel cut to b bits: the corrected estimator (P - 2^-b)/(1 - 2^-b) is unbiased (mean within
/// z s / sqrt(T) of J, s the sample deviation), and for classic MinHash, whose slots are independent, the MSE
/// is the b-bit variance P(1-P)/(k(1-C)^2) (within z sqrt(2/T) of it). Fresh kernel seed per trial.
#[test]
fn b_bit_estimates_are_unbiased_with_the_predicted_variance() {
    use lshbench_core::kernel::SketchFamily;
    use lshbench_core::kernel::bbit::{self, BBit};
    let k = 128;
    let trials = 600;
    for spec in KERNELS {
        for bits in [1u32, 2, 4, 8, 16] {
            for (s, shape) in [
                PairShape::for_jaccard(1000, 0.5),
                PairShape::for_jaccard(500, 0.2),
            ]
            .into_iter()
            .enumerate()
            {
                let j = shape.jaccard();
                let mut src = PairSource::new(shape, ElementKind::Random, 900 + s as u64);
                let (mut a, mut b) = (Vec::new(), Vec::new());
                let (mut sa, mut sb) = (vec![0u32; k], vec![0u32; k]);
                let est: Vec<f64> = (0..trials)
                    .map(|t| {
                        src.next_pair(&mut a, &mut b);
                        let kern =
                            BBit::wrap(make(spec.name, k, 31_000 + t as u64, None), bits).unwrap();
                        kern.sign(&a, &mut sa);
                        kern.sign(&b, &mut sb);
                        assert!(sa.iter().all(|&v| v <= bbit::mask(bits)));
                        kern.estimate(&sa, &sb)
                    })
                    .collect();
                let (mean, var) = mean_var(&est);
                let bound = Z_1E6 * (var / trials as f64).sqrt();
                assert!(
                    (mean - j).abs() <= bound,
                    "{} b={bits} J={j:.2}: mean {mean:.4}, bound {bound:.4}",
                    spec.name
                );
                if spec.family == SketchFamily::Classic {
                    let want = bbit::variance(j, k, bits);
                    let got = mse(&est, j);
                    let bound = Z_1E6 * (2.0 / trials as f64).sqrt() * want;
                    assert!(
                        (got - want).abs() <= bound,
                        "{} b={bits} J={j:.2}: MSE {got:.6}, predicted {want:.6} +- {bound:.6}",
                        spec.name
                    );
                }
            }
        }
    }
}

/// Without the correction, 1-bit slots overestimate J by about (1 - J)/2: the check above can fail.
#[test]
fn uncorrected_one_bit_estimates_are_biased() {
    use lshbench_core::kernel::bbit::BBit;
    let k = 256;
    let shape = PairShape::for_jaccard(1000, 0.2);
    let mut src = PairSource::new(shape, ElementKind::Random, 5);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut sa, mut sb) = (vec![0u32; k], vec![0u32; k]);
    let kern = BBit::wrap(make("simd", k, 3, None), 1).unwrap();
    src.next_pair(&mut a, &mut b);
    kern.sign(&a, &mut sa);
    kern.sign(&b, &mut sb);
    let raw = kernel::fraction_equal(&sa, &sb);
    assert!(raw > 0.45, "raw 1-bit agreement {raw:.3} at J = 0.2");
    assert!((kern.estimate(&sa, &sb) - 0.2).abs() < 0.2);
}
