//! The statistics the self-checks stand on: erf and its inverse (for z-scores at a stated false-alarm rate),
//! Wilson score intervals for proportions, Ertl's acceptance band for the relative MSE, and a Bonferroni
//! correction for checking many cells at once.

use std::f64::consts::PI;

/// The error function, accurate to about 1e-15 absolute.
///
/// For |x| < 3 it sums the all-positive series erf(x) = 2/sqrt(pi) e^{-x^2} sum_n 2^n x^{2n+1} / (2n+1)!!
/// (Abramowitz and Stegun 7.1.6), which has no cancellation; beyond that it uses 1 - erfc(x).
pub fn erf(x: f64) -> f64 {
    if x < 0.0 {
        return -erf(-x);
    }
    if x >= 3.0 {
        return 1.0 - erfc(x);
    }
    if x == 0.0 {
        return 0.0;
    }
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    // Terms grow while 2x^2 > 2n+1 and then shrink geometrically; 200 terms cover x < 3 with room to spare.
    for n in 1..200 {
        term *= 2.0 * x2 / (2.0 * n as f64 + 1.0);
        sum += term;
        if term <= sum * 1e-17 {
            break;
        }
    }
    2.0 / PI.sqrt() * (-x2).exp() * sum
}

/// The complementary error function 1 - erf(x), accurate in relative terms for large x (where 1 - erf(x)
/// would cancel). For x >= 3 it evaluates the continued fraction (A&S 7.1.14) with Lentz's method.
pub fn erfc(x: f64) -> f64 {
    if x < 3.0 {
        return 1.0 - erf(x);
    }
    // erfc(x) = e^{-x^2}/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...))))).
    let tiny = 1e-300;
    let mut f = x;
    let mut c = x;
    let mut d = 0.0;
    for n in 1..300 {
        let a = n as f64 / 2.0;
        d = x + a * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = x + a / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() / PI.sqrt() / f
}

/// The inverse error function on (-1, 1): Giles' single-precision approximation ("Approximating the erfinv
/// function", GPU Computing Gems 2011) as a start, then Newton steps on erf for full double precision.
pub fn erfinv(y: f64) -> f64 {
    assert!(y > -1.0 && y < 1.0, "erfinv is defined on (-1, 1), got {y}");
    if y == 0.0 {
        return 0.0;
    }
    let w = -((1.0 - y) * (1.0 + y)).ln();
    let mut x = if w < 5.0 {
        let w = w - 2.5;
        let mut p = 2.810_226_36e-08;
        for c in [
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ] {
            p = c + p * w;
        }
        p * y
    } else {
        let w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        for c in [
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ] {
            p = c + p * w;
        }
        p * y
    };
    // Newton on f(x) = erf(x) - y, f'(x) = 2/sqrt(pi) e^{-x^2}. Near |y| = 1 work with erfc to keep the
    // residual's relative precision.
    for _ in 0..4 {
        let residual = if y > 0.5 {
            (1.0 - y) - erfc(x)
        } else if y < -0.5 {
            erfc(-x) - (1.0 + y)
        } else {
            erf(x) - y
        };
        // For y > 0.5 the residual above is (1-y) - erfc(x) = erf(x) - y; same sign convention throughout.
        let derivative = 2.0 / PI.sqrt() * (-x * x).exp();
        if derivative == 0.0 {
            break;
        }
        x -= residual / derivative;
    }
    x
}

/// The two-sided standard-normal quantile for confidence `level`: P(|Z| <= z) = level, z = sqrt(2) erfinv(level).
pub fn z_two_sided(level: f64) -> f64 {
    std::f64::consts::SQRT_2 * erfinv(level)
}

/// The one-sided quantile: P(Z <= z) = level.
pub fn z_one_sided(level: f64) -> f64 {
    std::f64::consts::SQRT_2 * erfinv(2.0 * level - 1.0)
}

/// Ertl's z for the relative-MSE acceptance band: sqrt(2) * erfinv(0.9999), about 3.89.
pub fn ertl_z() -> f64 {
    z_two_sided(0.9999)
}

/// The per-cell confidence level that keeps the family-wise false-alarm rate at `family_alpha` over `cells`
/// simultaneous checks (Bonferroni).
pub fn bonferroni_level(family_alpha: f64, cells: usize) -> f64 {
    1.0 - family_alpha / cells.max(1) as f64
}

/// Wilson score interval for `successes` out of `n` at two-sided normal quantile `z`.
pub fn wilson(successes: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = successes as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At x = 0 and x = n the exact ends are 0 and 1 (center -+ half cancel exactly in real arithmetic); pin
    // them so rounding cannot put P = 0 or P = 1 outside an interval that contains it.
    let lower = if successes == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let upper = if successes as f64 == n {
        1.0
    } else {
        (center + half).min(1.0)
    };
    (lower, upper)
}

/// The exact tails of Binomial(n, p) at `x`: (P(X <= x), P(X >= x)). Summed in log space over the pmf, so
/// they stay exact where a normal approximation fails (p near 0 or 1, e.g. a band of 13 rows at J = 0.35 agrees
/// with probability 1.2e-6).
pub fn binomial_tails(x: u64, n: u64, p: f64) -> (f64, f64) {
    if p <= 0.0 {
        return (1.0, if x == 0 { 1.0 } else { 0.0 });
    }
    if p >= 1.0 {
        return (if x == n { 1.0 } else { 0.0 }, 1.0);
    }
    // ln pmf(i), from ln pmf(0) = n ln(1-p) by the ratio pmf(i+1)/pmf(i) = (n-i)/(i+1) * p/(1-p).
    let odds = (p / (1.0 - p)).ln();
    let mut ln_pmf = Vec::with_capacity(n as usize + 1);
    let mut l = n as f64 * (-p).ln_1p();
    for i in 0..=n {
        ln_pmf.push(l);
        l += ((n - i) as f64 / (i + 1) as f64).ln() + odds;
    }
    let max = ln_pmf.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = ln_pmf.iter().map(|l| (l - max).exp()).sum();
    let lower: f64 = ln_pmf[..=x as usize].iter().map(|l| (l - max).exp()).sum();
    let upper: f64 = ln_pmf[x as usize..].iter().map(|l| (l - max).exp()).sum();
    ((lower / total).min(1.0), (upper / total).min(1.0))
}

/// Whether `x` successes out of `n` are consistent with Binomial(n, p) in an exact two-sided test at level
/// `alpha` (each tail at alpha / 2).
pub fn binomial_consistent(x: u64, n: u64, p: f64, alpha: f64) -> bool {
    let (lower, upper) = binomial_tails(x, n, p);
    lower.min(upper) >= alpha / 2.0
}

/// Half-width of Ertl's acceptance band for the relative MSE of an estimator with binomial-like error:
/// z * sqrt((2 + (1/(J(1-J)) - 6)/m) / c), with m slots and c trials. The band is 1 +- this.
///
/// Where it comes from: the relative MSE is the mean of c draws of (J_hat - J)^2 / (J(1-J)/m); for
/// J_hat = X/m with X ~ Binomial(m, J) that quantity has mean 1 and variance (2 + (1/(J(1-J)) - 6)/m).
pub fn ertl_band_half_width(j: f64, m: usize, trials: usize, z: f64) -> f64 {
    let m = m as f64;
    let var = 2.0 + (1.0 / (j * (1.0 - j)) - 6.0) / m;
    z * (var.max(0.0) / trials as f64).sqrt()
}

/// One-sided lower bound on a sum of independent Bernoulli(p_i) draws (a Poisson-binomial count):
/// mean - z * sd, with the normal approximation. Used for "recall not below the S-curve's prediction".
pub fn poisson_binomial_lower(ps: &[f64], z: f64) -> f64 {
    let mean: f64 = ps.iter().sum();
    let var: f64 = ps.iter().map(|p| p * (1.0 - p)).sum();
    mean - z * var.sqrt()
}

/// A one-sided lower bound on a sum of Bernoulli(p_i) draws that may be correlated within groups but are
/// independent across groups: mean - z * sqrt(sum over groups of (sum of sd_i in the group)^2). Within a group
/// the bound takes the worst case, perfect correlation (Cauchy-Schwarz), so it holds whatever the dependence.
/// `draws` holds (group, p) pairs.
pub fn grouped_bernoulli_lower(draws: &[(usize, f64)], z: f64) -> f64 {
    let mean: f64 = draws.iter().map(|d| d.1).sum();
    let mut sd_by_group: std::collections::HashMap<usize, f64> = std::collections::HashMap::new();
    for &(g, p) in draws {
        *sd_by_group.entry(g).or_default() += (p * (1.0 - p)).sqrt();
    }
    let var: f64 = sd_by_group.values().map(|s| s * s).sum();
    mean - z * var.sqrt()
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tails_are_exact() {
        // Binomial(4, 1/2): P(X <= 1) = 5/16, P(X >= 1) = 15/16.
        let (lo, hi) = binomial_tails(1, 4, 0.5);
        assert!((lo - 5.0 / 16.0).abs() < 1e-12 && (hi - 15.0 / 16.0).abs() < 1e-12);
        // One agreeing band of 9000 at p = 1.2e-6: P(X >= 1) = 1 - (1-p)^9000, about 0.0107; consistent at 1e-5.
        let (_, hi) = binomial_tails(1, 9000, 1.2e-6);
        assert!((hi - (1.0 - (1.0 - 1.2e-6f64).powi(9000))).abs() < 1e-9);
        assert!(binomial_consistent(1, 9000, 1.2e-6, 1e-5));
        // 1400 of 40000 where p = 1/32 gives 1250 expected: rejected at 1e-3.
        assert!(!binomial_consistent(1400, 40_000, 1.0 / 32.0, 1e-3));
        assert!(binomial_consistent(1250, 40_000, 1.0 / 32.0, 1e-3));
        assert!(binomial_consistent(0, 10, 0.0, 1e-3) && !binomial_consistent(1, 10, 0.0, 1e-3));
    }

    // Reference values from Python's math.erf/erfc and statistics.NormalDist.inv_cdf.
    #[test]
    fn erf_matches_known_values() {
        let cases = [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.5, 0.999_999_256_901_627_7),
        ];
        for (x, want) in cases {
            assert!((erf(x) - want).abs() < 1e-14, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + want).abs() < 1e-14);
        }
        // erfc(5) = 1.5374597944280349e-12: relative precision where 1 - erf cancels.
        assert!((erfc(5.0) / 1.537_459_794_428_034_9e-12 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn erfinv_matches_known_values() {
        let cases = [
            (0.5, 0.476_936_276_204_469_9),
            (0.9, 1.163_087_153_676_673_1),
            (0.999, 2.326_753_765_513_546_4),
            (0.9999, 2.751_063_905_712_079),
            (-0.5, -0.476_936_276_204_469_9),
        ];
        for (y, want) in cases {
            assert!(
                (erfinv(y) - want).abs() < 1e-12,
                "erfinv({y}) = {}",
                erfinv(y)
            );
        }
        // Round trip far in the tail, where the Bonferroni-corrected checks live.
        for y in [1.0 - 1e-6, 1.0 - 1e-9, 0.3, -0.97] {
            assert!((erf(erfinv(y)) - y).abs() < 1e-14);
        }
        assert!((z_two_sided(0.95) - 1.959_963_984_540_054).abs() < 1e-12);
        assert!((ertl_z() - 3.890_591_886_413_121).abs() < 1e-9);
        assert!((z_one_sided(0.975) - 1.959_963_984_540_054).abs() < 1e-12);
    }

    #[test]
    fn wilson_ends_contain_zero_and_one_exactly_for_every_z() {
        for n in [1u64, 7, 300, 4000] {
            for z in [1.0, 1.96, 3.3, 4.56, 4.89, 6.0] {
                assert_eq!(wilson(n, n, z).1, 1.0, "all successes, n = {n}, z = {z}");
                assert_eq!(wilson(0, n, z).0, 0.0, "no successes, n = {n}, z = {z}");
                assert!(wilson(n - 1, n, z).1 < 1.0 || n == 1);
            }
        }
    }

    #[test]
    fn wilson_matches_hand_computed_intervals() {
        // 0 of 10 at z = 1.96: the upper end is (z^2/2n + z^2/2n) / (1 + z^2/n) = 0.2775.
        let (lo, hi) = wilson(0, 10, 1.96);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.277_540_168_766_616_5).abs() < 1e-12);
        // 50 of 100 at z = 1.96: symmetric around 0.5.
        let (lo, hi) = wilson(50, 100, 1.96);
        assert!((lo + hi - 1.0).abs() < 1e-12);
        assert!((hi - 0.596_170_171_409_852_8).abs() < 1e-12, "{hi}");
    }

    #[test]
    fn grouped_bound_is_wider_than_the_independent_one_and_equal_for_singletons() {
        let ps: Vec<f64> = vec![0.9; 100];
        let singles: Vec<(usize, f64)> = ps.iter().enumerate().map(|(i, &p)| (i, p)).collect();
        let one_group: Vec<(usize, f64)> = ps.iter().map(|&p| (0, p)).collect();
        let a = poisson_binomial_lower(&ps, 3.0);
        assert!((grouped_bernoulli_lower(&singles, 3.0) - a).abs() < 1e-9);
        // One fully correlated group: sd = 100 * 0.3 = 30.
        assert!((grouped_bernoulli_lower(&one_group, 3.0) - (90.0 - 90.0)).abs() < 1e-9);
    }

    #[test]
    fn ertl_band_shrinks_with_trials_and_matches_the_formula() {
        // J = 0.5, m = 32: var = 2 + (4 - 6)/32 = 1.9375.
        let h = ertl_band_half_width(0.5, 32, 10_000, 1.0);
        assert!((h - (1.9375f64 / 10_000.0).sqrt()).abs() < 1e-15);
        assert!(ertl_band_half_width(0.5, 32, 40_000, 1.0) < h);
    }
}
