//! Choosing (b, r): enumerate every banding with b*r <= k and keep those whose S-curve meets a recall target at
//! s_hi and a false-positive target at s_lo, found through the S-curve's closed forms; when none meets both, the
//! Pareto front and a stated compromise. Also datasketch's integral-based `_optimal_param`, reproduced so a user can
//! compare, and the default rule `dedup` uses when given only `--threshold`. Backs `lshbench tune`.

use super::scurve::{Banding, BandingError, check_threshold, format_probability, integrate};
use std::fmt::Write;

/// Targets: P(s_hi) >= 1 - max_fn and P(s_lo) <= max_fp.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Targets {
    /// The low similarity, where a pair should rarely become a candidate.
    pub s_lo: f64,
    /// The false-positive target: the largest acceptable P(s_lo).
    pub max_fp: f64,
    /// The high similarity, where a pair should almost always become a candidate.
    pub s_hi: f64,
    /// The false-negative target: the largest acceptable miss rate 1 - P(s_hi).
    pub max_fn: f64,
}

/// One row of the tuning table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuneRow {
    /// The banding this row describes.
    pub banding: Banding,
    /// Its rule-of-thumb threshold (1/b)^(1/r).
    pub rule_of_thumb: f64,
    /// Where its S-curve is steepest ([`Banding::steepest_point`]).
    pub steepest: f64,
    /// P(s_lo): the probability that a pair of similarity s_lo becomes a candidate.
    pub p_lo: f64,
    /// P(s_hi): the probability that a pair of similarity s_hi becomes a candidate.
    pub p_hi: f64,
}

impl TuneRow {
    /// The row of `banding`, with its probabilities at the similarities of `targets`.
    pub fn new(banding: Banding, targets: &Targets) -> TuneRow {
        TuneRow {
            banding,
            rule_of_thumb: banding.rule_of_thumb(),
            steepest: banding.steepest_point(),
            p_lo: banding.probability(targets.s_lo),
            p_hi: banding.probability(targets.s_hi),
        }
    }

    /// Whether P(s_hi) >= 1 - max_fn.
    pub fn meets_recall(&self, t: &Targets) -> bool {
        self.p_hi >= 1.0 - t.max_fn
    }

    /// Whether P(s_lo) <= max_fp.
    pub fn meets_fp(&self, t: &Targets) -> bool {
        self.p_lo <= t.max_fp
    }
}

/// Every banding with b*r <= k, in (b, r) order.
pub fn all_bandings(num_perm: usize) -> Vec<Banding> {
    let mut out = Vec::new();
    for bands in 1..=num_perm {
        for rows in 1..=num_perm / bands {
            out.push(Banding { bands, rows });
        }
    }
    out
}

/// What tuning found.
#[derive(Clone, Debug, PartialEq)]
pub enum TuneOutcome {
    /// Bandings meeting both targets, fewest false positives first (then most recall, then fewest hashes).
    Feasible(Vec<TuneRow>),
    /// No banding meets both. `front`: the Pareto front over (P(s_lo) low, P(s_hi) high), by P(s_lo).
    /// `compromise`: the fewest-false-positive banding meeting the recall target (a missed pair cannot be
    /// recovered later, while verification removes false positives at a cost), or the highest-recall banding
    /// when none meets it.
    Infeasible {
        /// The Pareto front, fewest false positives first.
        front: Vec<TuneRow>,
        /// The banding suggested instead.
        compromise: TuneRow,
        /// Whether the compromise meets the recall target (otherwise it is the highest-recall banding).
        compromise_meets_recall: bool,
    },
}

fn by_fewest_fp(a: &TuneRow, b: &TuneRow) -> std::cmp::Ordering {
    a.p_lo
        .total_cmp(&b.p_lo)
        .then(b.p_hi.total_cmp(&a.p_hi))
        .then(a.banding.hashes().cmp(&b.banding.hashes()))
        .then(a.banding.cmp(&b.banding))
}

/// Scores every (b, r) with b*r <= `num_perm` against `targets`: the bandings meeting both targets, or, when
/// none does, the Pareto front and a compromise. Panics if `num_perm` is 0 ([`TuneOptions::validate`] checks).
pub fn tune(num_perm: usize, targets: &Targets) -> TuneOutcome {
    let rows: Vec<TuneRow> = all_bandings(num_perm)
        .into_iter()
        .map(|b| TuneRow::new(b, targets))
        .collect();
    let mut feasible: Vec<TuneRow> = rows
        .iter()
        .copied()
        .filter(|r| r.meets_recall(targets) && r.meets_fp(targets))
        .collect();
    if !feasible.is_empty() {
        feasible.sort_by(by_fewest_fp);
        return TuneOutcome::Feasible(feasible);
    }
    let mut front = pareto_front(&rows);
    front.sort_by(by_fewest_fp);
    let meeting: Option<TuneRow> = rows
        .iter()
        .copied()
        .filter(|r| r.meets_recall(targets))
        .min_by(by_fewest_fp);
    let (compromise, meets) = match meeting {
        Some(r) => (r, true),
        None => (
            *rows
                .iter()
                .max_by(|a, b| a.p_hi.total_cmp(&b.p_hi).then(by_fewest_fp(b, a)))
                .expect("k >= 1 gives at least one banding"),
            false,
        ),
    };
    TuneOutcome::Infeasible {
        front,
        compromise,
        compromise_meets_recall: meets,
    }
}

/// Rows no other row beats on both P(s_lo) (lower) and P(s_hi) (higher); among equal pairs the fewest hashes.
pub fn pareto_front(rows: &[TuneRow]) -> Vec<TuneRow> {
    let mut sorted: Vec<TuneRow> = rows.to_vec();
    // Ascending P(s_lo); for equal P(s_lo), highest P(s_hi) first.
    sorted.sort_by(by_fewest_fp);
    let mut front = Vec::new();
    let mut best_hi = f64::NEG_INFINITY;
    for r in sorted {
        if r.p_hi > best_hi {
            best_hi = r.p_hi;
            front.push(r);
        }
    }
    front
}

/// The recall `dedup` asks of the S-curve at its threshold when only `--threshold` is given.
pub const DEFAULT_RECALL: f64 = 0.99;

/// The probability that one slot agrees for two sets of similarity `s` when slots keep their low `bits` bits:
/// `C + (1 - C) s` with `C = 2^-bits` (b-bit minwise hashing, the large-universe chance agreement
/// [`crate::kernel::bbit::chance_collision`] uses); `s` itself at 32 bits, the full slot. A band of r b-bit slots
/// agrees with probability about this to the r-th power, so b-bit signatures follow the S-curve at this value.
pub fn slot_agreement(s: f64, bits: u32) -> f64 {
    if bits >= 32 {
        return s;
    }
    let c = crate::kernel::bbit::chance_collision(bits);
    c + (1.0 - c) * s
}

/// The similarity whose `bits`-bit slots agree with probability `p` (the inverse of [`slot_agreement`]),
/// clamped to [0, 1]: an agreement below the chance level `C` is reached by no similarity and gives 0.
pub fn similarity_of_agreement(p: f64, bits: u32) -> f64 {
    if bits >= 32 {
        return p.clamp(0.0, 1.0);
    }
    let c = crate::kernel::bbit::chance_collision(bits);
    ((p - c) / (1.0 - c)).clamp(0.0, 1.0)
}

/// The default rule for `dedup --threshold t` without `--bands/--rows`: among all (b, r) with b*r <= k and
/// P(t) >= 0.99, the one with the smallest P(t/2) (fewest candidates from pairs at half the threshold), ties to
/// fewer hashes. If none reaches 0.99 (only possible for tiny k), the banding with the highest P(t).
/// For k = 128 and t = 0.5 this is 35x3, the textbook's fewest-false-positive setting with P(0.5) >= 99%.
/// Full-width slots; [`default_banding_bits`] tunes for b-bit slots.
pub fn default_banding(num_perm: usize, threshold: f64) -> Result<Banding, BandingError> {
    default_banding_bits(num_perm, threshold, 32)
}

/// [`default_banding`] for slots that keep `bits` bits: the same rule applied to the S-curve in the slot
/// agreement `P(s) = C + (1 - C) s` ([`slot_agreement`]) rather than in s, so P(P(t)) >= 0.99 with the smallest
/// P(P(t/2)). Tuning in s instead would put the curve's threshold far too low (at 1 bit, 35x3 makes nearly every
/// pair a candidate: a band of 3 one-bit slots agrees by chance with probability 1/8).
pub fn default_banding_bits(
    num_perm: usize,
    threshold: f64,
    bits: u32,
) -> Result<Banding, BandingError> {
    check_threshold(threshold)?;
    if num_perm == 0 {
        return Err(BandingError::TooManyHashes {
            bands: 1,
            rows: 1,
            num_perm,
        });
    }
    let targets = Targets {
        s_lo: slot_agreement(threshold / 2.0, bits),
        max_fp: 1.0,
        s_hi: slot_agreement(threshold, bits),
        max_fn: 1.0 - DEFAULT_RECALL,
    };
    match tune(num_perm, &targets) {
        TuneOutcome::Feasible(rows) => Ok(rows[0].banding),
        TuneOutcome::Infeasible { compromise, .. } => Ok(compromise.banding),
    }
}

/// datasketch's integral of P over [0, t] (its "false positive probability") and of 1 - P over [t, 1] (its
/// "false negative probability"). datasketch uses scipy's adaptive quadrature; composite 5-point Gauss-Legendre
/// over 200 panels is accurate to far below the differences that decide its choice.
pub fn datasketch_areas(banding: &Banding, threshold: f64) -> (f64, f64) {
    const PANELS: usize = 200;
    let fp = integrate(|s| banding.probability(s), 0.0, threshold, PANELS);
    let fn_ = integrate(|s| 1.0 - banding.probability(s), threshold, 1.0, PANELS);
    (fp, fn_)
}

/// datasketch's `_optimal_param(threshold, num_perm, fp_weight, fn_weight)`: for b in 1..=k and r in 1..=k/b,
/// minimise fp_weight * area_fp + fn_weight * area_fn, keeping the first minimum (strict `<`). Its defaults are
/// weights (0.5, 0.5).
pub fn datasketch_optimal(num_perm: usize, threshold: f64, weights: (f64, f64)) -> Banding {
    let mut best = (f64::INFINITY, Banding { bands: 1, rows: 1 });
    for banding in all_bandings(num_perm) {
        let (fp, fn_) = datasketch_areas(&banding, threshold);
        let error = fp * weights.0 + fn_ * weights.1;
        if error < best.0 {
            best = (error, banding);
        }
    }
    best.1
}

fn header(t: &Targets) -> String {
    format!(
        "{:>5} {:>5} {:>6} {:>10} {:>9} {:>11} {:>11}",
        "b",
        "r",
        "hashes",
        "threshold",
        "steepest",
        format!("P({})", t.s_lo),
        format!("P({})", t.s_hi)
    )
}

fn row_line(r: &TuneRow) -> String {
    format!(
        "{:>5} {:>5} {:>6} {:>10.4} {:>9.4} {:>11} {:>11}",
        r.banding.bands,
        r.banding.rows,
        r.banding.hashes(),
        r.rule_of_thumb,
        r.steepest,
        format_probability(r.p_lo),
        format_probability(r.p_hi)
    )
}

/// The text `lshbench tune` prints: the feasible bandings (or the Pareto front and a compromise), and with
/// `datasketch = Some((threshold, weights))` datasketch's choice beside the others. Unchecked: see
/// [`TuneOptions::report`].
pub fn report(
    num_perm: usize,
    targets: &Targets,
    top: usize,
    datasketch: Option<(f64, (f64, f64))>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "k = {num_perm}: {} bandings with b*r <= k. Targets: P({}) >= {} (miss at most {}), P({}) <= {}.",
        all_bandings(num_perm).len(),
        targets.s_hi,
        1.0 - targets.max_fn,
        targets.max_fn,
        targets.s_lo,
        targets.max_fp
    );
    let _ = writeln!(
        out,
        "threshold = rule of thumb (1/b)^(1/r); steepest = ((r-1)/(rb-1))^(1/r).\n"
    );
    let chosen = match tune(num_perm, targets) {
        TuneOutcome::Feasible(rows) => {
            let _ = writeln!(
                out,
                "{} bandings meet both targets; fewest false positives first:",
                rows.len()
            );
            let _ = writeln!(out, "{}", header(targets));
            for r in rows.iter().take(top) {
                let _ = writeln!(out, "{}", row_line(r));
            }
            let _ = writeln!(
                out,
                "\nchoice: {} bands x {} rows",
                rows[0].banding.bands, rows[0].banding.rows
            );
            rows[0]
        }
        TuneOutcome::Infeasible {
            front,
            compromise,
            compromise_meets_recall,
        } => {
            let _ = writeln!(
                out,
                "NO banding meets both targets with k = {num_perm}. The Pareto front (no other banding has both a \
                 lower P({}) and a higher P({})), around the recall target:",
                targets.s_lo, targets.s_hi
            );
            let _ = writeln!(out, "{}", header(targets));
            // Show the part of the front near the recall target: the rows just below it and those above.
            let first_ok = front
                .iter()
                .position(|r| r.meets_recall(targets))
                .unwrap_or(front.len());
            let start = first_ok.saturating_sub(top / 2);
            for r in front.iter().skip(start).take(top) {
                let mark = if r.banding == compromise.banding {
                    "  <- compromise"
                } else {
                    ""
                };
                let _ = writeln!(out, "{}{mark}", row_line(r));
            }
            if compromise_meets_recall {
                let _ = writeln!(
                    out,
                    "\ncompromise: {} bands x {} rows, the fewest false positives among the bandings that meet the \
                     recall target (a missed pair is lost for good; a false positive only costs a verification). \
                     P({}) = {} misses the false-positive target {}.",
                    compromise.banding.bands,
                    compromise.banding.rows,
                    targets.s_lo,
                    format_probability(compromise.p_lo),
                    targets.max_fp
                );
            } else {
                let _ = writeln!(
                    out,
                    "\ncompromise: {} bands x {} rows, the highest recall available; even it misses the recall \
                     target: P({}) = {}.",
                    compromise.banding.bands,
                    compromise.banding.rows,
                    targets.s_hi,
                    format_probability(compromise.p_hi)
                );
            }
            compromise
        }
    };
    if let Some((t, weights)) = datasketch {
        let ds = datasketch_optimal(num_perm, t, weights);
        let (fp_area, fn_area) = datasketch_areas(&ds, t);
        let _ = writeln!(
            out,
            "\ndatasketch _optimal_param(threshold={t}, num_perm={num_perm}, weights={weights:?}) minimises \
             {}*integral_0^t P + {}*integral_t^1 (1-P):",
            weights.0, weights.1
        );
        let _ = writeln!(
            out,
            "{:>12} {:>5} {:>5} {:>6} {:>10} {:>9} {:>11} {:>11} {:>11}",
            "method",
            "b",
            "r",
            "hashes",
            "threshold",
            "steepest",
            format!("P({})", targets.s_lo),
            format!("P({t})"),
            format!("P({})", targets.s_hi)
        );
        let default = default_banding(num_perm, t).expect("t was checked");
        for (name, b) in [
            ("datasketch", ds),
            ("dedup-rule", default),
            ("targets", chosen.banding),
        ] {
            let _ = writeln!(
                out,
                "{:>12} {:>5} {:>5} {:>6} {:>10.4} {:>9.4} {:>11} {:>11} {:>11}",
                name,
                b.bands,
                b.rows,
                b.hashes(),
                b.rule_of_thumb(),
                b.steepest_point(),
                format_probability(b.probability(targets.s_lo)),
                format_probability(b.probability(t)),
                format_probability(b.probability(targets.s_hi))
            );
        }
        let _ = writeln!(
            out,
            "datasketch's areas for its choice: fp {fp_area:.5}, fn {fn_area:.5}. It finds pairs of similarity \
             exactly {t} with probability {:.2}; its areas weigh every similarity alike (a uniform prior), not the \
             corpus's pair distribution.",
            ds.probability(t)
        );
        let _ = writeln!(
            out,
            "dedup-rule: what `dedup --threshold {t}` picks (P({t}) >= {DEFAULT_RECALL}, then the smallest P({})). \
             targets: the choice for the --fn/--fp targets above.",
            t / 2.0
        );
    }
    out
}

/// datasketch's side of `lshbench tune --method datasketch`: its choice at `threshold` with weights (FP, FN).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DatasketchOptions {
    /// The threshold datasketch is asked about, in (0, 1].
    pub threshold: f64,
    /// datasketch's weights (FP, FN); its default is (0.5, 0.5).
    pub weights: (f64, f64),
}

/// What `lshbench tune` is asked: every banding of a `num_perm`-slot signature against `targets`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuneOptions {
    /// Signature length k; every (b, r) with b*r <= k is considered.
    pub num_perm: usize,
    /// The recall and false-positive targets.
    pub targets: Targets,
    /// How many rows of the table to show (feasible set or Pareto front).
    pub top: usize,
    /// Also compare with datasketch's integral-based choice.
    pub datasketch: Option<DatasketchOptions>,
}

/// Why tuning options were refused. The messages name the `lshbench tune` flags.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TuneError {
    /// k = 0.
    #[error("--num-perm must be at least 1")]
    ZeroNumPerm,
    /// The false-positive similarity is not below the recall similarity.
    #[error("--fp similarity {s_lo} must be below the --fn similarity {s_hi}")]
    TargetOrder {
        /// The false-positive target's similarity.
        s_lo: f64,
        /// The recall target's similarity.
        s_hi: f64,
    },
    /// A datasketch weight is negative or NaN.
    #[error("--weights must be two non-negative numbers")]
    Weights,
    /// The datasketch threshold is outside (0, 1].
    #[error(transparent)]
    Banding(#[from] BandingError),
}

impl TuneOptions {
    /// Checks k >= 1, s_lo < s_hi, and the datasketch threshold and weights, in that order.
    pub fn validate(&self) -> Result<(), TuneError> {
        if self.num_perm == 0 {
            return Err(TuneError::ZeroNumPerm);
        }
        if self.targets.s_lo >= self.targets.s_hi {
            return Err(TuneError::TargetOrder {
                s_lo: self.targets.s_lo,
                s_hi: self.targets.s_hi,
            });
        }
        if let Some(ds) = &self.datasketch {
            check_threshold(ds.threshold)?;
            let (fp, fn_) = ds.weights;
            if [fp, fn_].iter().any(|w| w.is_nan() || *w < 0.0) {
                return Err(TuneError::Weights);
            }
        }
        Ok(())
    }

    /// The text `lshbench tune` prints ([`report`]), after [`TuneOptions::validate`].
    pub fn report(&self) -> Result<String, TuneError> {
        self.validate()?;
        Ok(report(
            self.num_perm,
            &self.targets,
            self.top,
            self.datasketch.map(|ds| (ds.threshold, ds.weights)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn textbook() -> Targets {
        Targets {
            s_lo: 0.05,
            max_fp: 0.001,
            s_hi: 0.5,
            max_fn: 0.01,
        }
    }

    #[test]
    fn textbook_targets_are_infeasible_at_128_and_the_compromise_is_35x3() {
        match tune(128, &textbook()) {
            TuneOutcome::Infeasible {
                front,
                compromise,
                compromise_meets_recall,
            } => {
                assert!(compromise_meets_recall);
                assert_eq!(compromise.banding, Banding { bands: 35, rows: 3 });
                // 42x3, the seed's pick, is on the front too.
                assert!(
                    front
                        .iter()
                        .any(|r| r.banding == Banding { bands: 42, rows: 3 })
                );
                // Brute-force check of the front: no banding dominates a front row.
                let all: Vec<TuneRow> = all_bandings(128)
                    .into_iter()
                    .map(|b| TuneRow::new(b, &textbook()))
                    .collect();
                for f in &front {
                    assert!(!all.iter().any(|o| (o.p_lo < f.p_lo && o.p_hi >= f.p_hi)
                        || (o.p_lo <= f.p_lo && o.p_hi > f.p_hi)));
                }
            }
            other => panic!("expected infeasible, got {other:?}"),
        }
    }

    #[test]
    fn feasible_targets_list_only_rows_meeting_both() {
        let t = Targets {
            s_lo: 0.2,
            max_fp: 0.01,
            s_hi: 0.8,
            max_fn: 0.01,
        };
        let TuneOutcome::Feasible(rows) = tune(128, &t) else {
            panic!("expected feasible")
        };
        let brute = all_bandings(128)
            .into_iter()
            .filter(|b| b.probability(0.8) >= 0.99 && b.probability(0.2) <= 0.01)
            .count();
        assert_eq!(rows.len(), brute);
        assert!(rows.windows(2).all(|w| w[0].p_lo <= w[1].p_lo));
    }

    #[test]
    fn datasketch_choices_for_128() {
        assert_eq!(
            datasketch_optimal(128, 0.5, (0.5, 0.5)),
            Banding { bands: 25, rows: 5 }
        );
        assert_eq!(
            datasketch_optimal(128, 0.8, (0.5, 0.5)),
            Banding { bands: 9, rows: 13 }
        );
        let b = datasketch_optimal(128, 0.9, (0.5, 0.5));
        assert_eq!(b, Banding { bands: 5, rows: 25 });
        assert_eq!(format!("{:.2}", b.probability(0.9)), "0.31");
        let text = report(128, &textbook(), 5, Some((0.9, (0.5, 0.5))));
        assert!(text.contains("probability 0.31"), "{text}");
    }

    #[test]
    fn options_are_checked_in_order() {
        let ok = TuneOptions {
            num_perm: 128,
            targets: textbook(),
            top: 5,
            datasketch: Some(DatasketchOptions {
                threshold: 0.9,
                weights: (0.5, 0.5),
            }),
        };
        assert_eq!(
            ok.report().unwrap(),
            report(128, &textbook(), 5, Some((0.9, (0.5, 0.5))))
        );
        let zero = TuneOptions {
            num_perm: 0,
            targets: Targets {
                s_lo: 0.6,
                ..textbook()
            },
            ..ok
        };
        assert_eq!(zero.validate(), Err(TuneError::ZeroNumPerm));
        let order = TuneOptions {
            num_perm: 128,
            ..zero
        };
        assert_eq!(
            order.validate().unwrap_err().to_string(),
            "--fp similarity 0.6 must be below the --fn similarity 0.5"
        );
        let threshold = TuneOptions {
            datasketch: Some(DatasketchOptions {
                threshold: 2.0,
                weights: (-1.0, 0.5),
            }),
            ..ok
        };
        assert_eq!(
            threshold.validate().unwrap_err().to_string(),
            "threshold 2 is outside (0, 1]"
        );
        let weights = TuneOptions {
            datasketch: Some(DatasketchOptions {
                threshold: 0.5,
                weights: (0.5, f64::NAN),
            }),
            ..ok
        };
        assert_eq!(weights.validate(), Err(TuneError::Weights));
    }

    #[test]
    fn integration_is_accurate() {
        // integral_0^1 of 1 - (1 - s)^b = 1 - 1/(b+1) for r = 1.
        let b = Banding { bands: 7, rows: 1 };
        let (fp, fn_) = datasketch_areas(&b, 1.0);
        assert!((fp - (1.0 - 1.0 / 8.0)).abs() < 1e-12);
        assert!(fn_.abs() < 1e-15);
    }

    #[test]
    fn default_rule() {
        let b = default_banding(128, 0.5).unwrap();
        assert_eq!(b, Banding { bands: 35, rows: 3 });
        for t in [0.3, 0.5, 0.7, 0.8, 0.9, 1.0] {
            let b = default_banding(128, t).unwrap();
            assert!(b.hashes() <= 128);
            assert!(b.probability(t) >= DEFAULT_RECALL, "t={t}: {b}");
            // Brute force: nothing meeting the recall target has a lower P(t/2).
            for o in all_bandings(128) {
                if o.probability(t) >= DEFAULT_RECALL {
                    assert!(
                        o.probability(t / 2.0) >= b.probability(t / 2.0),
                        "t={t}: {o} beats {b}"
                    );
                }
            }
        }
        assert!(default_banding(128, 0.0).is_err());
        assert!(default_banding(128, 1.01).is_err());
    }

    #[test]
    fn slot_agreement_is_the_b_bit_collision_probability_and_inverts() {
        for bits in crate::kernel::bbit::BITS {
            for s in [0.0, 0.1, 0.25, 0.5, 0.9, 1.0] {
                let p = slot_agreement(s, bits);
                let c = if bits == 32 {
                    0.0
                } else {
                    (-(bits as f64)).exp2()
                };
                assert!((p - (c + (1.0 - c) * s)).abs() < 1e-15, "b={bits} s={s}");
                assert!((similarity_of_agreement(p, bits) - s).abs() < 1e-12);
            }
        }
        assert_eq!(similarity_of_agreement(0.2, 1), 0.0);
    }

    /// With b-bit slots the rule holds in the slot agreement P(s): the chosen banding's S-curve reaches the
    /// recall target at P(t) and nothing meeting it has fewer candidates at P(t/2) (brute force); at 32 bits
    /// it is the full-width rule. The full-width choice would not do: at 1 bit and t = 0.5, 35x3 makes over
    /// 99% of unrelated pairs (s = 0, P = 1/2) candidates.
    #[test]
    fn default_rule_with_b_bit_slots_tunes_in_the_slot_agreement() {
        for bits in crate::kernel::bbit::BITS {
            for t in [0.3, 0.5, 0.8, 0.9] {
                let b = default_banding_bits(128, t, bits).unwrap();
                let (hi, lo) = (slot_agreement(t, bits), slot_agreement(t / 2.0, bits));
                assert!(b.probability(hi) >= DEFAULT_RECALL, "b={bits} t={t}: {b}");
                for o in all_bandings(128) {
                    if o.probability(hi) >= DEFAULT_RECALL {
                        assert!(
                            o.probability(lo) >= b.probability(lo),
                            "b={bits} t={t}: {o} beats {b}"
                        );
                    }
                }
                if bits == 32 {
                    assert_eq!(b, default_banding(128, t).unwrap());
                }
            }
        }
        let full = default_banding(128, 0.5).unwrap();
        assert!(full.probability(slot_agreement(0.0, 1)) > 0.99);
        let one = default_banding_bits(128, 0.5, 1).unwrap();
        assert_eq!(one, Banding { bands: 17, rows: 5 });
        assert_eq!(
            default_banding_bits(128, 0.5, 2).unwrap(),
            Banding { bands: 28, rows: 4 }
        );
        assert!(one.probability(slot_agreement(0.0, 1)) < 0.6, "{one}");
    }
}
