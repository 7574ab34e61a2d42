//! The harness's view of the rest of the crate, in one place: S-curve formulas, the tuner, kernels, shingles,
//! corpora and ground truth. Experiments call these, so an interface change elsewhere is absorbed here.

use super::config::BandsRows;
use crate::kernel::{Kernel, KernelParams};

/// P(s; b, r) = 1 - (1 - s^r)^b: the probability that a pair of similarity s shares at least one band.
pub fn p_candidate(s: f64, br: BandsRows) -> f64 {
    1.0 - (1.0 - s.powi(br.rows as i32)).powi(br.bands as i32)
}

/// The rule-of-thumb threshold (1/b)^(1/r).
pub fn rule_threshold(br: BandsRows) -> f64 {
    (1.0 / br.bands as f64).powf(1.0 / br.rows as f64)
}

/// The steepest point of the S-curve, ((r-1)/(rb-1))^(1/r).
pub fn steepest(br: BandsRows) -> f64 {
    let (b, r) = (br.bands as f64, br.rows as f64);
    if br.rows == 1 {
        return 0.0;
    }
    ((r - 1.0) / (r * b - 1.0)).powf(1.0 / r)
}

/// The s where P = 1/2: (1 - 2^(-1/b))^(1/r).
pub fn half_point(br: BandsRows) -> f64 {
    (1.0 - 2f64.powf(-1.0 / br.bands as f64)).powf(1.0 / br.rows as f64)
}

/// Builds a kernel by registry name.
pub fn kernel(name: &str, num_perm: usize, seed: u64) -> anyhow::Result<Box<dyn Kernel>> {
    crate::kernel::build(
        name,
        &KernelParams {
            num_perm,
            seed,
            isa: None,
        },
    )
}

/// lshbench tune's choice of (b, r) for k = `num_perm` at threshold `t`, when the tuner is available.
pub fn tune_choice(num_perm: usize, t: f64) -> Option<BandsRows> {
    let _ = (num_perm, t);
    None
}
