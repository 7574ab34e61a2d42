//! Closed-form variances of the sketch families, as relative MSE = MSE / (J(1-J)/k), for fully random hashing.
//!
//! Every family here compares k slots by the fraction that agree, and every slot holds the minimum of one
//! element of the union A u B (f = |A u B| elements). Let `w_x` be the number of slots whose value comes from
//! element x (`sum_x w_x = k`). A slot agrees exactly when its element lies in A n B (up to 2^-32 value ties),
//! so the estimate is `(1/k) sum_x w_x [x in A n B]`. Under fully random hashing the weights are exchangeable
//! over the elements and independent of which elements are shared, so given the weights the shared elements
//! are a uniform a-subset of the f: the estimate is unbiased and, from the covariance of sampling without
//! replacement (Var = J(1-J), Cov = -J(1-J)/(f-1)),
//!
//! `relative MSE = (f E(S) - k^2) / (k (f - 1))`, with `S = sum_x w_x^2`,
//!
//! whatever J is. Each family differs only in E(S):
//! - classic MinHash: two slots have the same element with probability 1/f, so E(S) = k + k(k-1)/f: 1.
//! - one-permutation hashing: `m` of the k bins are non-empty (the occupancy distribution of f balls in k bins,
//!   [`occupancy`]); each non-empty bin is its own element (one element per bin), and densification hands
//!   each of the e = k - m empty bins a copy of one non-empty bin, both sets the same one (a filled bin agrees
//!   exactly when the first bin its probe or rotation reaches that is non-empty in the union is a matching bin:
//!   if that bin is non-empty in only one set, the other set copies from a different element). With weights
//!   `1 + copies` per non-empty bin:
//!   - optimal densification (Shrivastava, ICML 2017): each empty bin picks a uniform non-empty bin,
//!     independently, so the copies are Multinomial(e, 1/m) and E(S | m) = m + 3e - e/m + e^2/m.
//!   - rotation (Shrivastava and Li, ICML 2014): a non-empty bin receives the run of empty bins to its left;
//!     the non-empty bins are a uniform m-subset of the circle, so a run is one part of a uniform weak
//!     composition of e into m parts (mean e/m, variance e(m-1)(e+m)/(m^2(m+1))), and
//!     E(S | m) = m + 2e + m E(run^2).
//!
//!   With no empty bin both give S = k: relative MSE 1 - (k-1)/(f-1) (Li, Owen, Zhang 2012).
//! - fast similarity sketching (Dahlgaard, Knudsen, Thorup 2017): bin j is decided in the first round r_j that
//!   sends an element to it, by a uniform element of that round's arrivals. In a round below k an element
//!   visits one bin, so two bins decided in the same round have different elements; bins decided in different
//!   rounds (independent rounds) share their element with probability 1/f. Two bins are decided in the same
//!   round i < k with probability `p00^i p11` (p00: both empty in a round, `(1-2/k)^f`; p11: both non-empty,
//!   `1 - 2(1-1/k)^f + (1-2/k)^f`), so E(S) = k + k(k-1) (1 - p11 (1 - p00^k) / (1 - p00)) / f.
//!
//! Checks against measurement (fresh kernel seed per trial, 10^4 trials, k = 32, J = 0.5): optimal
//! densification gives 1.353, 0.953, 0.791 at f = 8, 32, 128 (measured: 1.355 and 0.951 at f = 8 and 32);
//! rotation 3.60 and 1.14 at f = 8 and 32; fast similarity sketching 0.502 at f = 8.

/// The distribution of the number of non-empty bins when `f` elements fall uniformly into `k` bins:
/// `p[m]` for m = 0..=k (a recurrence over the elements, O(f k)).
pub fn occupancy(f: usize, k: usize) -> Vec<f64> {
    let mut p = vec![0.0; k + 1];
    p[0] = 1.0;
    let kf = k as f64;
    for t in 0..f {
        // After t elements at most min(t, k) bins are non-empty; walk down so p[m - 1] is still the old value.
        for m in (0..=t.min(k)).rev() {
            let stay = p[m] * m as f64 / kf;
            if m < k {
                p[m + 1] += p[m] * (kf - m as f64) / kf;
            }
            p[m] = stay;
        }
    }
    p
}

/// The relative MSE from the expected sum of squared slot weights, E(S), at union size `f` and `k` slots.
pub fn rel_mse_from_weights(f: usize, k: usize, expected_s: f64) -> f64 {
    let (f, k) = (f as f64, k as f64);
    (f * expected_s - k * k) / (k * (f - 1.0))
}

/// The expected number of empty bins when `f` elements fall uniformly into `k` bins.
pub fn expected_empty_bins(f: usize, k: usize) -> f64 {
    k as f64 * (1.0 - 1.0 / k as f64).powi(f.min(i32::MAX as usize) as i32)
}

/// E(S) of one-permutation hashing given `e_s(m, e)`, the expectation with m non-empty and e empty bins.
fn oph_expected_s(f: usize, k: usize, e_s: impl Fn(f64, f64) -> f64) -> f64 {
    // Past about 1e-12 expected empty bins the no-empty value is exact to that order: skip the O(f k) sum.
    if expected_empty_bins(f, k) < 1e-12 {
        return k as f64;
    }
    occupancy(f, k)
        .iter()
        .enumerate()
        .skip(1)
        .map(|(m, &p)| p * e_s(m as f64, (k - m) as f64))
        .sum()
}

/// Relative MSE of one-permutation hashing with optimal densification (Shrivastava 2017), `f >= 2`.
pub fn rel_mse_oph_optimal(f: usize, k: usize) -> f64 {
    let s = oph_expected_s(f, k, |m, e| m + 3.0 * e - e / m + e * e / m);
    rel_mse_from_weights(f, k, s)
}

/// Relative MSE of one-permutation hashing with rotation densification (Shrivastava and Li 2014), `f >= 2`.
pub fn rel_mse_oph_rotation(f: usize, k: usize) -> f64 {
    let s = oph_expected_s(f, k, |m, e| {
        let run_var = e * (m - 1.0) * (e + m) / (m * m * (m + 1.0));
        let run_sq = run_var + (e / m) * (e / m);
        m + 2.0 * e + m * run_sq
    });
    rel_mse_from_weights(f, k, s)
}

/// Relative MSE of fast similarity sketching (Dahlgaard, Knudsen, Thorup 2017), `f >= 2`.
pub fn rel_mse_fss(f: usize, k: usize) -> f64 {
    let kf = k as f64;
    if k == 1 {
        return 1.0;
    }
    let p00 = (1.0 - 2.0 / kf).powf(f as f64);
    let p11 = 1.0 - 2.0 * (1.0 - 1.0 / kf).powf(f as f64) + p00;
    let same_round = if p00 < 1.0 {
        p11 * (1.0 - p00.powf(kf)) / (1.0 - p00)
    } else {
        0.0
    };
    let s = kf + kf * (kf - 1.0) * (1.0 - same_round) / f as f64;
    rel_mse_from_weights(f, k, s)
}

/// The relative variance of SuperMinHash, Var / (J(1-J)/k), for a union of `union` elements and `k` slots.
///
/// Derived from the construction (and checked against a simulation in `superminhash`'s tests): the estimator is the
/// fraction of slots whose winner over the union lies in the intersection, so with `p` the probability that
/// two given slots have the same winner, Var = J(1-J)/k * (1 + (k-1)(p u - 1)/(u - 1)); classic MinHash has
/// p = 1/u. For SuperMinHash the winner of two slots is the same element with probability
/// `p = 2/(u (k(k-1))^u) * sum_{j=1}^{k-1} j^u (j^u - (j-1)^u)`. It gives 0.477, 0.537, 0.764 and 0.970 at
/// k = 32 and u = 8, 32, 128, 1024, and tends to 1 - (k-1)/(u-1) (sampling without replacement) for u >> k.
/// Independent of J.
pub fn superminhash_alpha(union: usize, k: usize) -> f64 {
    if union < 2 || k < 2 {
        return 1.0;
    }
    let (u, kf) = (union as f64, k as f64);
    let scale = kf * (kf - 1.0);
    // p u = 2 sum_j [(j^2 / (k(k-1)))^u - (j(j-1) / (k(k-1)))^u], each base below 1: no overflow.
    let pu: f64 = (1..k)
        .map(|j| {
            let j = j as f64;
            (j * j / scale).powf(u) - (j * (j - 1.0) / scale).powf(u)
        })
        .sum::<f64>()
        * 2.0;
    1.0 + (kf - 1.0) * (pu - 1.0) / (u - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupancy_is_a_distribution_with_the_right_mean() {
        for (f, k) in [(1, 4), (8, 32), (50, 7), (300, 64)] {
            let p = occupancy(f, k);
            let total: f64 = p.iter().sum();
            assert!((total - 1.0).abs() < 1e-12, "{f} {k}: {total}");
            let mean: f64 = p.iter().enumerate().map(|(m, q)| m as f64 * q).sum();
            let want = k as f64 - expected_empty_bins(f, k);
            assert!((mean - want).abs() < 1e-9, "{f} {k}: {mean} vs {want}");
        }
        // Two elements in two bins: both in one bin with probability 1/2.
        assert_eq!(occupancy(2, 2), vec![0.0, 0.5, 0.5]);
    }

    #[test]
    fn the_published_optimal_densification_values_come_out() {
        // 1.353, 0.953, 0.791, 0.970 at m = 32 from Shrivastava's closed form (docs/src/published-figures.md).
        for (f, want) in [(8, 1.353), (32, 0.953), (128, 0.791), (1024, 0.970)] {
            let got = rel_mse_oph_optimal(f, 32);
            assert!((got - want).abs() < 6e-4, "f = {f}: {got} vs {want}");
        }
    }

    #[test]
    fn without_empty_bins_every_family_samples_without_replacement() {
        let (f, k) = (5000, 32);
        let want = 1.0 - 31.0 / 4999.0;
        for got in [
            rel_mse_oph_optimal(f, k),
            rel_mse_oph_rotation(f, k),
            rel_mse_fss(f, k),
        ] {
            assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        }
    }

    #[test]
    fn rotation_is_worse_than_optimal_on_sparse_sets_and_fss_is_below_classic() {
        assert!(rel_mse_oph_rotation(8, 32) > 2.0 * rel_mse_oph_optimal(8, 32));
        for f in [4, 8, 32, 128, 1000] {
            assert!(rel_mse_fss(f, 32) < 1.0, "f = {f}");
        }
        // One bin, two elements: one slot samples one of them, relative MSE (f-k)/(f-1) = 1.
        assert!((rel_mse_oph_optimal(2, 1) - 1.0).abs() < 1e-12);
    }

    /// The formula through E(S) against a direct simulation of the weights (independent of the kernels).
    #[test]
    fn optimal_densification_weights_match_a_simulation() {
        use rand_xoshiro::Xoshiro256PlusPlus;
        use rand_xoshiro::rand_core::{Rng, SeedableRng};
        let (f, k) = (10usize, 16usize);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let trials = 200_000;
        let mut sum = 0.0;
        let mut sum_sq = 0.0;
        for _ in 0..trials {
            let mut occupied = vec![false; k];
            for _ in 0..f {
                occupied[(rng.next_u64() % k as u64) as usize] = true;
            }
            let full: Vec<usize> = (0..k).filter(|&b| occupied[b]).collect();
            let mut w = vec![1.0f64; k];
            for _ in occupied.iter().filter(|&&o| !o) {
                w[full[(rng.next_u64() % full.len() as u64) as usize]] += 1.0;
            }
            let s: f64 = (0..k).filter(|&b| occupied[b]).map(|b| w[b] * w[b]).sum();
            sum += s;
            sum_sq += s * s;
        }
        let mean = sum / trials as f64;
        let se = ((sum_sq / trials as f64 - mean * mean) / trials as f64).sqrt();
        let want = oph_expected_s(f, k, |m, e| m + 3.0 * e - e / m + e * e / m);
        // z = 5: a false alarm once in 3.5 million runs.
        assert!((mean - want).abs() < 5.0 * se, "{mean} vs {want} (se {se})");
    }
}
