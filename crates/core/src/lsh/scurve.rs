//! S-curve theory for LSH banding: with b bands of r rows, two sets of Jaccard similarity s share at least one
//! band with probability P(s) = 1 - (1 - s^r)^b (Mining of Massive Datasets, ch. 3). Its landmarks, a root finder
//! for any crossing probability, and what a histogram of pair similarities predicts (expected candidates and
//! recall). `lshbench scurve` prints them (its table is the CLI's).

use std::fmt;

/// A banding: `bands` bands of `rows` slots each, using `bands * rows` of the signature's slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Banding {
    /// Number of bands b.
    pub bands: usize,
    /// Rows (signature slots) per band r.
    pub rows: usize,
}

/// Why a banding or threshold was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BandingError {
    /// b = 0.
    #[error("--bands must be at least 1 (got 0)")]
    ZeroBands,
    /// r = 0.
    #[error("--rows must be at least 1 (got 0)")]
    ZeroRows,
    /// b * r is more than the signature's slots.
    #[error(
        "{bands} bands x {rows} rows needs {} slots, but the signature has only --num-perm {num_perm}",
        bands.checked_mul(*rows).map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
    )]
    TooManyHashes {
        /// The bands asked for.
        bands: usize,
        /// The rows per band asked for.
        rows: usize,
        /// The signature length k.
        num_perm: usize,
    },
    /// A similarity threshold (the value given) is outside (0, 1].
    #[error("threshold {0} is outside (0, 1]")]
    ThresholdOutOfRange(f64),
}

impl Banding {
    /// A banding of `bands` x `rows`, checked against the signature length `num_perm`.
    pub fn new(bands: usize, rows: usize, num_perm: usize) -> Result<Banding, BandingError> {
        if bands == 0 {
            return Err(BandingError::ZeroBands);
        }
        if rows == 0 {
            return Err(BandingError::ZeroRows);
        }
        if bands.checked_mul(rows).is_none_or(|used| used > num_perm) {
            return Err(BandingError::TooManyHashes {
                bands,
                rows,
                num_perm,
            });
        }
        Ok(Banding { bands, rows })
    }

    /// Signature slots the banding uses.
    pub fn hashes(&self) -> usize {
        self.bands * self.rows
    }

    /// P(s) = 1 - (1 - s^r)^b, evaluated as -expm1(b * ln(1 - s^r)) so that tiny probabilities (P(0.05) for
    /// many rows) keep their relative precision instead of rounding to 0.
    pub fn probability(&self, s: f64) -> f64 {
        let s = s.clamp(0.0, 1.0);
        let band = s.powi(self.rows as i32);
        if band >= 1.0 {
            return 1.0;
        }
        -(self.bands as f64 * (-band).ln_1p()).exp_m1()
    }

    /// The rule-of-thumb threshold (1/b)^(1/r).
    pub fn rule_of_thumb(&self) -> f64 {
        (1.0 / self.bands as f64).powf(1.0 / self.rows as f64)
    }

    /// Where the S-curve is steepest: P''(s) = 0 at s* = ((r-1)/(rb-1))^(1/r). For r = 1 the curve is concave
    /// and steepest at 0; for b = r = 1 it is the straight line P(s) = s, reported as 0 too.
    pub fn steepest_point(&self) -> f64 {
        let (b, r) = (self.bands as f64, self.rows as f64);
        if self.rows == 1 {
            return 0.0;
        }
        ((r - 1.0) / (r * b - 1.0)).powf(1.0 / r)
    }

    /// The similarity at which P = 1/2.
    pub fn half_point(&self) -> f64 {
        self.crossing(0.5)
    }

    /// The similarity s at which P(s) = p, in closed form: s = (1 - (1 - p)^(1/b))^(1/r). `p` is clamped to
    /// [0, 1]. [`find_root`] gives the same answer numerically (the tests check one against the other).
    pub fn crossing(&self, p: f64) -> f64 {
        let p = p.clamp(0.0, 1.0);
        // 1 - (1-p)^(1/b) = -expm1(ln(1-p)/b): accurate for small p.
        let band = -((-p).ln_1p() / self.bands as f64).exp_m1();
        band.powf(1.0 / self.rows as f64)
    }
}

impl fmt::Display for Banding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.bands, self.rows)
    }
}

/// Checks a similarity threshold lies in (0, 1].
pub fn check_threshold(t: f64) -> Result<f64, BandingError> {
    if t > 0.0 && t <= 1.0 {
        Ok(t)
    } else {
        Err(BandingError::ThresholdOutOfRange(t))
    }
}

/// Finds x in [lo, hi] with f(x) = target for a monotone (either direction) continuous f, by bisection to
/// within 1e-12 or 200 steps. Returns the nearer end when target lies outside [f(lo), f(hi)].
pub fn find_root(f: impl Fn(f64) -> f64, target: f64, mut lo: f64, mut hi: f64) -> f64 {
    let (flo, fhi) = (f(lo), f(hi));
    let increasing = fhi >= flo;
    let below = |v: f64| if increasing { v < target } else { v > target };
    if !below(flo) {
        return lo;
    }
    if below(fhi) {
        return hi;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if below(f(mid)) {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// A histogram of pair similarities over [0, 1] in equal-width bins (for example from a sample of the corpus's
/// pairs). Counts may be scaled (a sample of m out of M pairs weighted by M/m), hence `f64`.
#[derive(Clone, Debug, PartialEq)]
pub struct SimilarityHistogram {
    /// Pairs per bin (possibly weighted); of n bins, bin i covers [i/n, (i+1)/n), the last one including 1.
    pub counts: Vec<f64>,
}

impl SimilarityHistogram {
    /// An empty histogram of `bins` equal-width bins. Panics if `bins` is 0.
    pub fn new(bins: usize) -> Self {
        assert!(bins > 0, "a histogram needs at least one bin");
        SimilarityHistogram {
            counts: vec![0.0; bins],
        }
    }

    /// Builds a histogram from similarities, each counted `weight` times.
    pub fn from_similarities(
        bins: usize,
        sims: impl IntoIterator<Item = f64>,
        weight: f64,
    ) -> Self {
        let mut h = SimilarityHistogram::new(bins);
        for s in sims {
            h.add(s, weight);
        }
        h
    }

    fn bin_of(&self, s: f64) -> usize {
        let n = self.counts.len();
        ((s.clamp(0.0, 1.0) * n as f64) as usize).min(n - 1)
    }

    /// Counts one similarity `s` (clamped to [0, 1]) `weight` times.
    pub fn add(&mut self, s: f64, weight: f64) {
        let i = self.bin_of(s);
        self.counts[i] += weight;
    }

    /// The bin [lo, hi) of index i.
    pub fn bin(&self, i: usize) -> (f64, f64) {
        let w = 1.0 / self.counts.len() as f64;
        (i as f64 * w, (i + 1) as f64 * w)
    }

    /// The mean of P over bin i, by 5-point Gauss-Legendre (pairs are taken as spread evenly within a bin).
    fn mean_probability(&self, banding: &Banding, i: usize) -> f64 {
        let (lo, hi) = self.bin(i);
        integrate(|s| banding.probability(s), lo, hi, 1) / (hi - lo)
    }

    /// The expected number of candidate pairs: the sum over pairs of P(s).
    pub fn expected_candidates(&self, banding: &Banding) -> f64 {
        (0..self.counts.len())
            .map(|i| self.counts[i] * self.mean_probability(banding, i))
            .sum()
    }

    /// The expected fraction of pairs with similarity at least `threshold` that become candidates. Bins are
    /// counted whole when their lower edge is at or above the threshold; put the threshold on a bin edge for an
    /// exact answer. `None` when no pair is at or above the threshold.
    pub fn expected_recall(&self, banding: &Banding, threshold: f64) -> Option<f64> {
        let (mut hit, mut total) = (0.0, 0.0);
        for i in 0..self.counts.len() {
            if self.bin(i).0 + 1e-12 >= threshold {
                hit += self.counts[i] * self.mean_probability(banding, i);
                total += self.counts[i];
            }
        }
        (total > 0.0).then(|| hit / total)
    }
}

/// What `lshbench scurve` is asked: one banding, the step of its table, and crossing probabilities.
#[derive(Clone, Debug, PartialEq)]
pub struct ScurveOptions {
    /// Number of bands b.
    pub bands: usize,
    /// Rows (signature slots) per band r.
    pub rows: usize,
    /// Signature length k, only to check b*r <= k (`None`: b*r).
    pub num_perm: Option<usize>,
    /// Step of the similarity column of the table, in (0, 1].
    pub step: f64,
    /// Probabilities whose crossing similarity is reported.
    pub crossings: Vec<f64>,
}

/// Why S-curve options were refused. The messages name the `lshbench scurve` flags.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScurveError {
    /// The banding itself was refused.
    #[error(transparent)]
    Banding(#[from] BandingError),
    /// The table step is outside (0, 1].
    #[error("--step {0} is outside (0, 1]")]
    Step(f64),
    /// A crossing probability is outside [0, 1].
    #[error("--crossings: {0} is not a probability")]
    Crossing(f64),
}

impl ScurveOptions {
    /// The banding, checked against the signature length, after the step and crossings are checked.
    pub fn banding(&self) -> Result<Banding, ScurveError> {
        let num_perm = self
            .num_perm
            .unwrap_or(self.bands.saturating_mul(self.rows));
        let banding = Banding::new(self.bands, self.rows, num_perm)?;
        if !(self.step > 0.0 && self.step <= 1.0) {
            return Err(ScurveError::Step(self.step));
        }
        if let Some(&p) = self.crossings.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            return Err(ScurveError::Crossing(p));
        }
        Ok(banding)
    }
}

/// A probability with 4 decimals, switching to scientific notation (4 significant digits) below 1e-4.
pub fn format_probability(p: f64) -> String {
    if p == 0.0 || p >= 1e-4 {
        format!("{p:.4}")
    } else {
        format!("{p:.3e}")
    }
}

/// The integral of `f` over [a, b] by composite 5-point Gauss-Legendre quadrature on `panels` equal panels
/// (exact for polynomials of degree 9 on each panel).
pub fn integrate(f: impl Fn(f64) -> f64, a: f64, b: f64, panels: usize) -> f64 {
    const NODES: [f64; 5] = [
        0.0,
        -0.538_469_310_105_683,
        0.538_469_310_105_683,
        -0.906_179_845_938_664,
        0.906_179_845_938_664,
    ];
    const WEIGHTS: [f64; 5] = [
        0.568_888_888_888_889,
        0.478_628_670_499_366,
        0.478_628_670_499_366,
        0.236_926_885_056_189,
        0.236_926_885_056_189,
    ];
    let h = (b - a) / panels as f64;
    let mut total = 0.0;
    for i in 0..panels {
        let mid = a + (i as f64 + 0.5) * h;
        for (x, w) in NODES.iter().zip(WEIGHTS) {
            total += w * f(mid + 0.5 * h * x);
        }
    }
    total * 0.5 * h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(bands: usize, rows: usize) -> Banding {
        Banding::new(bands, rows, bands * rows).unwrap()
    }

    #[test]
    fn textbook_table_for_20_bands_of_5_rows() {
        // Mining of Massive Datasets, chapter 3, to the digits printed there (docs/src/published-figures.md).
        let table = [
            (0.2, 0.006, 0.0005),
            (0.3, 0.047, 0.0005),
            (0.4, 0.186, 0.0005),
            (0.5, 0.470, 0.0005),
            (0.6, 0.802, 0.0005),
            (0.7, 0.975, 0.0005),
            (0.8, 0.9996, 0.00005),
        ];
        for (s, p, tol) in table {
            let got = b(20, 5).probability(s);
            assert!((got - p).abs() <= tol, "P({s}) = {got}, textbook {p}");
        }
    }

    #[test]
    fn thresholds_for_100_hashes() {
        for (bands, rows, t) in [
            (50, 2, 0.1414),
            (20, 5, 0.5493),
            (10, 10, 0.7943),
            (5, 20, 0.9227),
        ] {
            let got = b(bands, rows).rule_of_thumb();
            assert!((got - t).abs() < 5e-5, "{bands}x{rows}: {got} vs {t}");
        }
    }

    #[test]
    fn forty_two_by_three_against_thirty_five_by_three() {
        let b42 = b(42, 3);
        assert_eq!(format!("{:.1}", 100.0 * b42.probability(0.5)), "99.6");
        assert_eq!(format!("{:.1}", 100.0 * b42.probability(0.05)), "0.5");
        let b35 = b(35, 3);
        assert!(b35.probability(0.5) >= 0.99);
        assert!(b35.probability(0.05) < b42.probability(0.05));
        // 34x3 misses the recall target: 35 is the fewest bands of 3 rows that meet it.
        assert!(b(34, 3).probability(0.5) < 0.99);
    }

    #[test]
    fn closed_forms_match_numerical_roots_and_derivatives() {
        for (bands, rows) in [(20, 5), (42, 3), (9, 13), (5, 25), (128, 1), (1, 7)] {
            let band = b(bands, rows);
            for p in [1e-6, 0.001, 0.1, 0.5, 0.9, 0.99] {
                let closed = band.crossing(p);
                let root = find_root(|s| band.probability(s), p, 0.0, 1.0);
                assert!(
                    (closed - root).abs() < 1e-9,
                    "{band} p={p}: {closed} vs {root}"
                );
                assert!((band.probability(closed) - p).abs() < 1e-9 * p.max(1e-3));
            }
            if rows > 1 && bands > 1 {
                // The numerical second derivative changes sign at the steepest point.
                let s = band.steepest_point();
                let second = |x: f64| {
                    let h = 1e-4;
                    band.probability(x + h) - 2.0 * band.probability(x) + band.probability(x - h)
                };
                assert!(second(s - 0.01) > 0.0 && second(s + 0.01) < 0.0, "{band}");
            }
            assert!((band.probability(band.half_point()) - 0.5).abs() < 1e-12);
        }
    }

    #[test]
    fn tiny_probabilities_keep_relative_precision() {
        // 1 - (1 - 1e-20)^3 evaluated naively is 0.
        let p = b(3, 10).probability(0.01);
        assert!((p / 3e-20 - 1.0).abs() < 1e-9, "{p}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert_eq!(Banding::new(0, 5, 128), Err(BandingError::ZeroBands));
        assert_eq!(Banding::new(5, 0, 128), Err(BandingError::ZeroRows));
        let err = Banding::new(43, 3, 128).unwrap_err();
        assert!(err.to_string().contains("129 slots"), "{err}");
        assert!(check_threshold(0.0).is_err());
        assert!(check_threshold(1.5).is_err());
        assert!(check_threshold(f64::NAN).is_err());
        assert_eq!(check_threshold(1.0), Ok(1.0));
    }

    #[test]
    fn histogram_predictions() {
        let band = b(20, 5);
        // All mass at s in [0.9, 1): candidates = count * mean P, recall = mean P there.
        let mut h = SimilarityHistogram::new(10);
        h.add(0.95, 100.0);
        h.add(0.05, 1e6);
        let mean_hi: f64 = (0..10_000)
            .map(|i| band.probability(0.9 + 0.1 * (i as f64 + 0.5) / 10_000.0))
            .sum::<f64>()
            / 10_000.0;
        let mean_lo: f64 = (0..10_000)
            .map(|i| band.probability(0.1 * (i as f64 + 0.5) / 10_000.0))
            .sum::<f64>()
            / 10_000.0;
        let expected = 100.0 * mean_hi + 1e6 * mean_lo;
        assert!((h.expected_candidates(&band) - expected).abs() < 1e-6 * expected);
        assert!((h.expected_recall(&band, 0.9).unwrap() - mean_hi).abs() < 1e-9);
        assert_eq!(h.expected_recall(&band, 0.99), None);
    }

    #[test]
    fn options_are_checked_banding_then_step_then_crossings() {
        let ok = ScurveOptions {
            bands: 20,
            rows: 5,
            num_perm: None,
            step: 0.1,
            crossings: vec![0.5],
        };
        assert_eq!(ok.banding().unwrap(), b(20, 5));
        let with = |f: fn(&mut ScurveOptions)| {
            let mut o = ok.clone();
            f(&mut o);
            o.banding().unwrap_err()
        };
        assert_eq!(
            with(|o| o.bands = 0),
            ScurveError::Banding(BandingError::ZeroBands)
        );
        let short = with(|o| o.num_perm = Some(99)).to_string();
        assert!(short.contains("100 slots"), "{short}");
        let step = with(|o| o.step = 0.0);
        assert_eq!(step, ScurveError::Step(0.0));
        assert_eq!(step.to_string(), "--step 0 is outside (0, 1]");
        let crossing = with(|o| o.crossings = vec![0.5, 2.0]);
        assert_eq!(crossing.to_string(), "--crossings: 2 is not a probability");
        assert_eq!(
            with(|o| {
                o.rows = 0;
                o.step = 0.0
            }),
            ScurveError::Banding(BandingError::ZeroRows)
        );
    }
}
