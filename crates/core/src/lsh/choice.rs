//! The banding policy a run uses: `--bands`, `--rows` and `--threshold` resolved for slots of a given width (or
//! picked by the default rule), and refused when they contradict each other; the largest bucket cap; and the
//! seed of the band hash. `dedup`, the online index and the Python binding all take their banding from here, so
//! they band alike.

use super::index::BandHasher;
use super::scurve::{Banding, BandingError, check_threshold};
use super::tune;

/// Why a banding was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChoiceError {
    /// The banding or the threshold is out of range.
    #[error(transparent)]
    Banding(#[from] BandingError),
    /// A slot width that is not one of 1, 2, 4, 8, 16 or 32 bits.
    #[error(transparent)]
    Bits(#[from] crate::kernel::bbit::BadBits),
    /// An explicit threshold that the explicit banding would find with probability below 1/2.
    #[error(
        "--threshold {threshold} contradicts --bands {bands} --rows {rows}: that banding finds pairs of similarity \
         {threshold} with probability only {probability:.4}. It implies a threshold near {half_point:.4} (P = 1/2 \
         there; rule of thumb (1/b)^(1/r) = {rule_of_thumb:.4}). Drop --bands/--rows to let the tuner pick \
         ({suggested_bands} bands x {suggested_rows} rows, P({threshold}) = {suggested_probability:.4}), or lower \
         --threshold."
    )]
    Contradiction {
        /// The threshold asked for.
        threshold: f64,
        /// The bands asked for.
        bands: usize,
        /// The rows per band asked for.
        rows: usize,
        /// The banding's probability of finding a pair at `threshold`.
        probability: f64,
        /// The similarity the banding finds with probability 1/2.
        half_point: f64,
        /// (1/b)^(1/r).
        rule_of_thumb: f64,
        /// The default rule's bands for `threshold`.
        suggested_bands: usize,
        /// The default rule's rows for `threshold`.
        suggested_rows: usize,
        /// The default rule's probability at `threshold`.
        suggested_probability: f64,
    },
    /// Bands without rows.
    #[error("--bands needs --rows too (or give neither and let --threshold pick them)")]
    BandsWithoutRows,
    /// Rows without bands.
    #[error("--rows needs --bands too (or give neither and let --threshold pick them)")]
    RowsWithoutBands,
}

/// The largest `--bucket-cap`: a bucket is enumerated as all its pairs up to the cap (cap^2 / 2 of them), so
/// a larger cap would let one bucket exhaust memory.
pub const MAX_BUCKET_CAP: usize = 100_000;

/// The banding a run uses and why.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BandingChoice {
    /// b bands of r rows.
    pub banding: Banding,
    /// The verification threshold.
    pub threshold: f64,
    /// Whether --bands/--rows were given (else the default rule picked them).
    pub explicit: bool,
    /// Bits each slot keeps (`--bits`; 32: the full slot). With fewer, a slot agrees with probability
    /// [`tune::slot_agreement`] and the S-curve is taken there.
    pub bits: u32,
}

impl BandingChoice {
    /// The probability that a pair of similarity `s` becomes a candidate: the S-curve at the slot agreement
    /// of `bits`-bit slots, `1 - (1 - P(s)^r)^b` with `P(s) = C + (1 - C) s` (s itself at 32 bits).
    pub fn probability(&self, s: f64) -> f64 {
        self.banding.probability(tune::slot_agreement(s, self.bits))
    }

    /// The similarity a pair is found at with probability 1/2 (0 when chance agreement alone passes 1/2).
    pub fn half_point(&self) -> f64 {
        tune::similarity_of_agreement(self.banding.half_point(), self.bits)
    }
}

/// Resolves --bands/--rows/--threshold for slots of `bits` bits: both of bands and rows, or neither (the
/// default rule of [`tune::default_banding_bits`] picks them for the threshold, 0.5 when not given, in the
/// slot agreement of `bits`-bit slots). An explicit threshold the explicit banding finds with probability below
/// 1/2 is refused.
pub fn choose_banding(
    bands: Option<usize>,
    rows: Option<usize>,
    threshold: Option<f64>,
    num_perm: usize,
    bits: u32,
) -> Result<BandingChoice, ChoiceError> {
    let t = check_threshold(threshold.unwrap_or(0.5))?;
    let bits = crate::kernel::bbit::check_bits(bits)?;
    match (bands, rows) {
        (Some(b), Some(r)) => {
            let choice = BandingChoice {
                banding: Banding::new(b, r, num_perm)?,
                threshold: t,
                explicit: true,
                bits,
            };
            let p = choice.probability(t);
            if threshold.is_some() && p < 0.5 {
                let suggestion = BandingChoice {
                    banding: tune::default_banding_bits(num_perm, t, bits)?,
                    ..choice
                };
                return Err(ChoiceError::Contradiction {
                    threshold: t,
                    bands: b,
                    rows: r,
                    probability: p,
                    half_point: choice.half_point(),
                    rule_of_thumb: tune::similarity_of_agreement(
                        choice.banding.rule_of_thumb(),
                        bits,
                    ),
                    suggested_bands: suggestion.banding.bands,
                    suggested_rows: suggestion.banding.rows,
                    suggested_probability: suggestion.probability(t),
                });
            }
            Ok(choice)
        }
        (None, None) => Ok(BandingChoice {
            banding: tune::default_banding_bits(num_perm, t, bits)?,
            threshold: t,
            explicit: false,
            bits,
        }),
        (Some(_), None) => Err(ChoiceError::BandsWithoutRows),
        (None, Some(_)) => Err(ChoiceError::RowsWithoutBands),
    }
}

/// The seed of the band hash a run with kernel seed `seed` uses (fixed, so keys can be recomputed outside a run,
/// e.g. by the Python binding's `band_keys` and its streaming index).
pub fn band_seed(seed: u64) -> u64 {
    seed ^ 0x4c53_4842_414e_4453
}

/// The band hasher `dedup` bands with, for `banding` and the kernel seed `seed`.
pub fn band_hasher(banding: Banding, seed: u64) -> BandHasher {
    BandHasher::new(banding, band_seed(seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banding_choice_errors_are_clear() {
        let e = |b, r, t| choose_banding(b, r, t, 128, 32).unwrap_err().to_string();
        assert!(e(Some(43), Some(3), None).contains("129 slots"));
        assert!(e(Some(0), Some(3), None).contains("--bands must be at least 1"));
        assert!(e(Some(3), Some(0), None).contains("--rows must be at least 1"));
        assert!(e(None, None, Some(0.0)).contains("outside (0, 1]"));
        assert!(e(None, None, Some(1.2)).contains("outside (0, 1]"));
        assert!(e(Some(4), None, None).contains("--bands needs --rows"));
        let msg = e(Some(5), Some(25), Some(0.5));
        assert!(msg.contains("contradicts --bands 5 --rows 25"), "{msg}");
        assert!(msg.contains("35 bands x 3 rows"), "{msg}");
        let ok = choose_banding(Some(42), Some(3), Some(0.5), 128, 32).unwrap();
        assert!(ok.explicit);
        let auto = choose_banding(None, None, Some(0.5), 128, 32).unwrap();
        assert_eq!(auto.banding, Banding { bands: 35, rows: 3 });
        assert!(!auto.explicit);
    }
}
