//! Accuracy by Ertl's protocol: pairs with fixed |A\B|, |B\A| and |A n B| (so exact J), fresh elements every
//! trial; bias, MSE and relative MSE = MSE / (J(1-J)/k) per kernel, union size, k and J, with Ertl's
//! acceptance band. Every trial signs its pair with a kernel built from a fresh seed (random and consecutive
//! elements alike), so a cell measures the method averaged over its hash functions, not one draw of them.
//! Random elements test the algorithm; runs of consecutive integers test the hash family.
//!
//! What theory predicts, and what is checked, in every cell (the family comes from the registry,
//! [`lshbench_core::kernel::KernelSpec::family`], and its closed form from [`lshbench_core::kernel::variance`]):
//! - the relative MSE equals the family's prediction: 1 for classic MinHash (the estimator is Binomial(k, J)/k),
//!   the closed forms of optimal and rotation densification for `oph-*` (1 - (k-1)/(f-1) once no bin is
//!   empty), and of fast similarity sketching for `fss`. The z-score divides by the standard error of the MSE
//!   over the c trials: for classic MinHash Ertl's, sqrt((2 + (1/(J(1-J)) - 6)/k)/c) in relative units (from
//!   the binomial's fourth moment); for the other families the sample one, sqrt((mean e^4 - MSE^2)/c), as their
//!   fourth moment has no closed form here.
//! - the mean estimate is J (z-score over the sample standard error).
//! - b-bit slots (a sweep's `bits`; the row's kernel reads `NAME/bB`): the corrected estimator
//!   R = (P_hat - C)/(1 - C) is an affine map of the fraction of equal b-bit slots, so for classic MinHash (k
//!   independent slots, each equal with probability P = C + (1 - C) J) its relative MSE is
//!   P(1 - P) / ((1 - C)^2 J(1 - J)) and the standard error of the MSE is Ertl's with P in place of J
//!   ([`predicted_rel_mse`]). For the other families a b-bit cell checks the bias only (their b-bit variance
//!   has no closed form here).
//! - a kernel whose registry entry says it reproduces another's signatures (`same_output_as`, e.g. `simd` and
//!   `scalar`): on the same pairs their rows are identical.
//!
//! Published tables (docs/src/published-figures.md) are compared in notes that name the table and its own
//! uncertainty.

use super::chart::{Chart, Series, Style, kernels_in};
use super::config::{AccuracyConfig, AccuracySweep};
use super::deps;
use super::figures::Figures;
use super::report::{Table, f, write_summary};
use super::runner::{CellKey, Checks, Ctx, cell_seed, write_csv};
use super::stats::{bonferroni_level, ertl_band_half_width, ertl_z, z_two_sided};
use crate::error::ExperimentError;
use lshbench_core::corpus::pairs::{ElementKind, PairShape, PairSource};
use lshbench_core::kernel::bbit::{self, BBit};
use lshbench_core::kernel::{Kernel, KernelSpec, SketchFamily};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Instant;

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// One (kernel, elements, union, k, J) cell's outcome.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AccuracyRow {
    /// Registry name of the kernel.
    pub kernel: String,
    /// The instruction set the kernel ran on.
    pub isa: String,
    /// The cell's seed (pairs and kernel seeds; the same for every kernel).
    pub seed: u64,
    /// k, the number of slots per signature.
    pub num_perm: usize,
    /// Synthetic sets, no text: "none".
    pub shingle: String,
    /// `random` or `consecutive`.
    pub elements: String,
    /// |A u B|, the union size of each pair.
    pub union: usize,
    /// The J asked for; the pairs have the nearest achievable one.
    pub jaccard_target: f64,
    /// The exact J of the pairs: |A n B| / |A u B|.
    pub jaccard: f64,
    /// Independent pairs measured.
    pub trials: usize,
    /// Mean of the estimates.
    pub mean_estimate: f64,
    /// Mean estimate minus J.
    pub bias: f64,
    /// Mean squared error of the estimate.
    pub mse: f64,
    /// MSE / (J(1-J)/k): 1 for classic MinHash.
    pub rel_mse: f64,
    /// The standard error of the MSE over the trials, from the sample: sqrt((mean e^4 - MSE^2) / trials).
    pub mse_se: f64,
    /// The acceptance band around the prediction at Ertl's z = sqrt(2) erfinv(0.9999) (for plots and tables;
    /// the check corrects z for the number of cells).
    pub band_lo: f64,
    /// Upper end of the acceptance band.
    pub band_hi: f64,
    /// Whether the relative MSE lies in that band.
    pub in_band: bool,
    /// What the family's theory predicts for this cell, or NaN where it predicts nothing.
    pub predicted_rel_mse: f64,
    /// Compute time of the cell.
    pub seconds: f64,
    /// Provenance: the commit of the code.
    pub git_commit: String,
    /// Provenance: the CPU model.
    pub cpu_model: String,
}

/// The distinct achievable shapes for a union size and J grid, without J = 0 or 1 (no relative MSE there).
fn shapes(union: usize, grid: &[f64]) -> Vec<(f64, PairShape)> {
    let mut out: Vec<(f64, PairShape)> = Vec::new();
    for &j in grid {
        let s = PairShape::for_jaccard(union, j);
        if s.both == 0 || s.both == union || out.iter().any(|(_, o)| *o == s) {
            continue;
        }
        out.push((j, s));
    }
    out
}

/// The sums a cell's statistics come from.
#[derive(Clone, Debug, PartialEq)]
pub struct Moments {
    /// Sum of the estimates.
    pub sum: f64,
    /// Sum of the squared errors (estimate - J)^2.
    pub sq: f64,
    /// Sum of the fourth powers of the errors (the MSE's own variance).
    pub quad: f64,
    /// The instruction set the kernel ran on.
    pub isa: String,
}

/// The seed of trial `t`'s kernel in a cell with seed `seed`.
pub fn trial_seed(seed: u64, t: usize) -> u64 {
    cell_seed(seed, &format!("trial {t}"))
}

/// Runs `trials` pairs of `shape`, each signed by a kernel that `build` makes from a fresh seed
/// ([`trial_seed`]), so the cell averages over the hash functions (for a fixed structured set that is the only
/// randomness) and measures the method rather than one draw of its functions.
pub fn measure(
    build: &dyn Fn(u64) -> Result<Box<dyn Kernel>>,
    shape: PairShape,
    kind: ElementKind,
    trials: usize,
    seed: u64,
) -> Result<Moments> {
    let j = shape.jaccard();
    let mut src = PairSource::new(shape, kind, seed);
    let mut isa = String::new();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    let (mut sum, mut sq, mut quad) = (0.0, 0.0, 0.0);
    for t in 0..trials {
        let kernel = build(trial_seed(seed, t))?;
        if t == 0 {
            isa = kernel.isa().name().to_string();
        }
        let k = kernel.num_perm();
        sa.resize(k, 0u32);
        sb.resize(k, 0u32);
        src.next_pair(&mut a, &mut b);
        kernel.sign(&a, &mut sa);
        kernel.sign(&b, &mut sb);
        let est = kernel.estimate(&sa, &sb);
        let e2 = (est - j) * (est - j);
        sum += est;
        sq += e2;
        quad += e2 * e2;
    }
    Ok(Moments { sum, sq, quad, isa })
}

/// The standard error of a relative MSE: Ertl's, from the binomial's fourth moment, for classic MinHash
/// (with b < 32 bits: the binomial of P = C + (1 - C) J, scaled by the predicted relative MSE, since R is an
/// affine map of it); the sample one (`mse_se` in relative units) for other families.
fn rel_mse_se(
    family: SketchFamily,
    bits: u32,
    j: f64,
    k: usize,
    trials: usize,
    mse_se: f64,
) -> f64 {
    match (family, bits) {
        (SketchFamily::Classic, 32) => ertl_band_half_width(j, k, trials, 1.0),
        (SketchFamily::Classic, _) => {
            let c = bbit::chance_collision(bits);
            let p = c + (1.0 - c) * j;
            let pred = bbit::variance(j, k, bits) / (j * (1.0 - j) / k as f64);
            pred * ertl_band_half_width(p, k, trials, 1.0)
        }
        _ => mse_se / (j * (1.0 - j) / k as f64),
    }
}

/// What theory predicts for the relative MSE of `family` with `bits`-bit slots at union `union`, k slots and
/// Jaccard `j`: the family's closed form at 32 bits; for classic MinHash with b < 32 bits the b-bit variance
/// divided by J(1-J)/k; `None` where no closed form is known (other families with b < 32).
pub fn predicted_rel_mse(
    family: SketchFamily,
    bits: u32,
    union: usize,
    k: usize,
    j: f64,
) -> Option<f64> {
    match (family, bits) {
        (_, 32) => family.predicted_rel_mse(union, k),
        (SketchFamily::Classic, _) => Some(bbit::variance(j, k, bits) / (j * (1.0 - j) / k as f64)),
        _ => None,
    }
}

/// The name of `kernel` with `bits`-bit slots, as rows carry it: `NAME` at 32 bits, else `NAME/bB`.
pub fn bits_name(kernel: &str, bits: u32) -> String {
    if bits == 32 {
        kernel.to_string()
    } else {
        format!("{kernel}/b{bits}")
    }
}

/// Splits a row's kernel name into the registry name and the slot width (`simd/b4` -> (`simd`, 4)).
pub fn split_bits(name: &str) -> (&str, u32) {
    if let Some((base, b)) = name.rsplit_once("/b")
        && let Ok(bits) = b.parse::<u32>()
        && bbit::check_bits(bits).is_ok()
    {
        return (base, bits);
    }
    (name, 32)
}

/// The row of one cell from its moments.
#[allow(clippy::too_many_arguments)]
pub fn row_of(
    ctx: &Ctx,
    kernel: &str,
    family: SketchFamily,
    elements: &str,
    target: f64,
    shape: PairShape,
    k: usize,
    trials: usize,
    seed: u64,
    m: &Moments,
    seconds: f64,
) -> AccuracyRow {
    let n = trials as f64;
    let j = shape.jaccard();
    let union = shape.union();
    let mse = m.sq / n;
    let rel = mse / (j * (1.0 - j) / k as f64);
    let mse_se = ((m.quad / n - mse * mse).max(0.0) / n).sqrt();
    let bits = split_bits(kernel).1;
    let pred = predicted_rel_mse(family, bits, union, k, j).unwrap_or(f64::NAN);
    let half = ertl_z() * rel_mse_se(family, bits, j, k, trials, mse_se);
    AccuracyRow {
        kernel: kernel.to_string(),
        isa: m.isa.clone(),
        seed,
        num_perm: k,
        shingle: "none".into(),
        elements: elements.to_string(),
        union,
        jaccard_target: target,
        jaccard: j,
        trials,
        mean_estimate: m.sum / n,
        bias: m.sum / n - j,
        mse,
        rel_mse: rel,
        mse_se,
        band_lo: pred - half,
        band_hi: pred + half,
        in_band: (rel - pred).abs() <= half,
        predicted_rel_mse: pred,
        seconds,
        git_commit: ctx.meta.git_commit.clone(),
        cpu_model: ctx.meta.cpu_model.clone(),
    }
}

/// One (kernel, elements, union, k) cell: every J of the sweep's grid.
pub(crate) struct Cell<'a> {
    pub(crate) sweep: &'a AccuracySweep,
    pub(crate) spec: &'a KernelSpec,
    pub(crate) elements: &'a str,
    pub(crate) union: usize,
    pub(crate) k: usize,
    /// Slot width: 32, or b-bit slots through [`BBit`].
    pub(crate) bits: u32,
}

fn run_cell(ctx: &Ctx, c: &Cell) -> Result<Vec<AccuracyRow>> {
    let kind = if c.elements == "random" {
        ElementKind::Random
    } else {
        ElementKind::Consecutive
    };
    let shapes = shapes(c.union, &c.sweep.jaccard);
    let k = c.k;
    shapes
        .par_iter()
        .map(|&(target, shape)| {
            // The seed leaves out the kernel, so every kernel sees the same pairs and kernel seeds.
            let seed = cell_seed(
                ctx.seed,
                &format!("{}|{}|{}|{}", c.elements, c.union, k, shape.both),
            );
            let started = Instant::now();
            let build = |s: u64| -> Result<Box<dyn Kernel>> {
                Ok(BBit::wrap(
                    deps::kernel_of(c.spec, k, s, ctx.dispatch)?,
                    c.bits,
                )?)
            };
            let m = measure(&build, shape, kind, c.sweep.trials, seed)?;
            Ok(row_of(
                ctx,
                &bits_name(c.spec.name, c.bits),
                c.spec.family,
                c.elements,
                target,
                shape,
                k,
                c.sweep.trials,
                seed,
                &m,
                started.elapsed().as_secs_f64(),
            ))
        })
        .collect()
}

/// Every cell's rows (reusing finished cells), in order.
pub(crate) fn run_cells(ctx: &Ctx, cells: &[Cell]) -> Result<Vec<AccuracyRow>> {
    let per_cell: Vec<Vec<AccuracyRow>> = cells
        .par_iter()
        .map(|c| {
            let key = CellKey::new()
                .with("kernel", bits_name(c.spec.name, c.bits))
                .with("elements", c.elements)
                .with("union", c.union)
                .with("k", c.k)
                .with("trials", c.sweep.trials)
                .with("jgrid", c.sweep.jaccard.len())
                .with("seeding", "per-trial")
                .with("seed", ctx.seed);
            ctx.cell(&key, || run_cell(ctx, c))
        })
        .collect::<Result<_>>()?;
    Ok(per_cell.into_iter().flatten().collect())
}

/// The relative-MSE table at m = 32, J = 0.5 quoted in docs/src/published-figures.md. Its source and trial count are
/// not confirmed, so it is compared in notes, never enforced.
const PUBLISHED: &[(&str, [(usize, f64); 4])] = &[
    (
        "MinHash",
        [(8, 1.05), (32, 0.97), (128, 1.03), (1024, 0.98)],
    ),
    (
        "OPH with optimal densification",
        [(8, 1.33), (32, 0.98), (128, 0.78), (1024, 0.93)],
    ),
];
/// The lshbench kernels compared with each published row (the first is named in the summary's table).
const PUBLISHED_KERNELS: [(&str, &[&str]); 2] = [
    ("MinHash", &["simd", "scalar"]),
    ("OPH with optimal densification", &["oph-opt"]),
];
/// Trials assumed behind the published figures (Ertl's protocol; not confirmed for that table).
const PUBLISHED_TRIALS: usize = 10_000;

/// The registry the experiments check against: every kernel of [`lshbench_core::kernel::KERNELS`].
pub fn registry() -> Vec<&'static KernelSpec> {
    lshbench_core::kernel::KERNELS.iter().collect()
}

/// The entry called `name` in `registry`, or the registry's error.
pub(crate) fn lookup<'a>(registry: &[&'a KernelSpec], name: &str) -> Result<&'a KernelSpec> {
    registry
        .iter()
        .find(|s| s.name == name)
        .copied()
        .ok_or_else(|| {
            lshbench_core::kernel::KernelError::Unknown {
                name: name.to_string(),
                available: registry
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            }
            .into()
        })
}

/// The self-checks over all rows of an accuracy run. Fails on a row whose kernel is not in the registry.
pub fn check(rows: &[AccuracyRow], checks: &mut Checks) -> Result<()> {
    check_in(&registry(), rows, checks)
}

/// [`check`] against the kernels of `registry` (the fault-injection run adds its broken kernels).
pub fn check_in(registry: &[&KernelSpec], rows: &[AccuracyRow], checks: &mut Checks) -> Result<()> {
    let mut families = Vec::with_capacity(rows.len());
    for r in rows {
        let (base, bits) = split_bits(&r.kernel);
        families.push((lookup(registry, base)?.family, bits));
    }
    // The prediction from the family in the registry (not the row's copy), once per (family, union, k) at
    // full width (the b-bit predictions depend on J too and are cheap).
    let mut predicted: HashMap<(String, usize, usize), Option<f64>> = HashMap::new();
    let mut checked = Vec::new();
    for (r, &(family, bits)) in rows.iter().zip(&families) {
        let pred = if bits == 32 {
            *predicted
                .entry((family.name().to_string(), r.union, r.num_perm))
                .or_insert_with(|| family.predicted_rel_mse(r.union, r.num_perm))
        } else {
            predicted_rel_mse(family, bits, r.union, r.num_perm, r.jaccard)
        };
        if let Some(pred) = pred {
            checked.push((r, family, bits, pred));
        }
    }
    // Bias is checked on every row, predicted or not (b-bit slots of every family are unbiased).
    let unpredicted: Vec<&AccuracyRow> = rows
        .iter()
        .zip(&families)
        .filter(|(r, (family, bits))| {
            *bits != 32
                && predicted_rel_mse(*family, *bits, r.union, r.num_perm, r.jaccard).is_none()
        })
        .map(|(r, _)| r)
        .collect();
    // Bonferroni over every checked cell (two tests each) keeps the whole run's false-alarm rate at 0.1%; where
    // that band is narrower than Ertl's (few cells) Ertl's z = 3.89 is used, as his protocol states.
    let z = z_two_sided(bonferroni_level(
        1e-3,
        (2 * checked.len() + unpredicted.len()).max(1),
    ))
    .max(ertl_z());
    let mut bad_mse = Vec::new();
    let mut bad_bias = Vec::new();
    for &(r, family, bits, pred) in &checked {
        let se = rel_mse_se(family, bits, r.jaccard, r.num_perm, r.trials, r.mse_se);
        if (r.rel_mse - pred).abs() > z * se {
            bad_mse.push(format!(
                "{} {} u={} k={} J={:.3}: rel MSE {:.3}, predicted {:.3} +- {:.3}",
                r.kernel,
                r.elements,
                r.union,
                r.num_perm,
                r.jaccard,
                r.rel_mse,
                pred,
                z * se
            ));
        }
    }
    for r in checked
        .iter()
        .map(|c| c.0)
        .chain(unpredicted.iter().copied())
    {
        let sd = (r.mse - r.bias * r.bias).max(0.0).sqrt();
        let se = sd / (r.trials as f64).sqrt();
        if r.bias.abs() > z * se.max(1e-12) {
            bad_bias.push(format!(
                "{} {} u={} k={} J={:.3}: bias {:+.5} beyond {:.5}",
                r.kernel,
                r.elements,
                r.union,
                r.num_perm,
                r.jaccard,
                r.bias,
                z * se
            ));
        }
    }
    let summary = |bad: &[String], n: usize| {
        if bad.is_empty() {
            format!("all {n} predicted cells agree (z = {z:.2})")
        } else {
            format!(
                "{} of {n} cells disagree (z = {z:.2}): {}",
                bad.len(),
                bad.iter().take(6).cloned().collect::<Vec<_>>().join("; ")
            )
        }
    };
    checks.expect(
        "relative MSE matches the family's closed form",
        bad_mse.is_empty(),
        summary(&bad_mse, checked.len()),
    );
    checks.expect(
        "mean estimate is unbiased",
        bad_bias.is_empty(),
        summary(&bad_bias, checked.len() + unpredicted.len()),
    );

    // A kernel that reproduces another's signatures (simd and scalar): identical rows on identical pairs.
    for spec in registry {
        if let Some(reference) = spec.same_output_as {
            check_same_output(rows, spec.name, reference, checks);
        }
    }
    Ok(())
}

/// Notes our relative MSE next to the quoted table at m = 32, J = 0.5: a two-sample z with each side's
/// standard error from Ertl's band (the table's assuming 10^4 trials). Never a check: the table's source is not
/// confirmed and it does not fit its own trial count where theory is exact (MinHash at u = 8: 1.05).
fn note_published(rows: &[AccuracyRow], checks: &mut Checks) {
    let z_pub = ertl_z();
    for (label, kernels) in PUBLISHED_KERNELS {
        let published = PUBLISHED.iter().find(|(l, _)| *l == label).unwrap().1;
        for (u, want) in published {
            let Some(r) = rows.iter().find(|r| {
                kernels.contains(&r.kernel.as_str())
                    && r.elements == "random"
                    && r.union == u
                    && r.num_perm == 32
                    && (r.jaccard - 0.5).abs() < 1e-9
            }) else {
                continue;
            };
            let se_ours = r.rel_mse * ertl_band_half_width(0.5, 32, r.trials, 1.0);
            let se_pub = want * ertl_band_half_width(0.5, 32, PUBLISHED_TRIALS, 1.0);
            let zscore = (r.rel_mse - want) / (se_ours * se_ours + se_pub * se_pub).sqrt();
            checks.note(format!(
                "{label} at m = 32, J = 0.5, u = {u}: the quoted table (source unconfirmed) gives {want} \
                 +- {se_pub:.3} (one standard error if it had {PUBLISHED_TRIALS} trials); `{}` gives {:.3} +- \
                 {se_ours:.3} ({} trials, closed form {:.3}), z = {zscore:+.2}{}",
                r.kernel,
                r.rel_mse,
                r.trials,
                r.predicted_rel_mse,
                if zscore.abs() <= z_pub {
                    ""
                } else {
                    " -- DIFFERS"
                }
            ));
        }
    }
}

/// Checks that `kernel`'s rows equal `reference`'s on the same pairs, when the run has both.
fn check_same_output(rows: &[AccuracyRow], kernel: &str, reference: &str, checks: &mut Checks) {
    let mut compared = 0;
    let mut differ = Vec::new();
    for s in rows.iter().filter(|r| r.kernel == reference) {
        if let Some(v) = rows.iter().find(|r| {
            r.kernel == kernel
                && r.elements == s.elements
                && r.union == s.union
                && r.num_perm == s.num_perm
                && r.jaccard == s.jaccard
                && r.trials == s.trials
                && r.seed == s.seed
        }) {
            compared += 1;
            if v.mean_estimate != s.mean_estimate || v.mse != s.mse {
                differ.push(format!("u={} k={} J={:.3}", s.union, s.num_perm, s.jaccard));
            }
        }
    }
    if compared > 0 {
        checks.expect(
            format!("same estimates as the kernel it reproduces: {kernel} = {reference}"),
            differ.is_empty(),
            format!(
                "{compared} cells compared; differing: {}",
                if differ.is_empty() {
                    "none".into()
                } else {
                    differ.join(", ")
                }
            ),
        );
    }
}

/// Measured variances at f = 14, k = 40, J = 4/14 (docs/src/published-figures.md): classic MinHash, and OPH under
/// rotation and optimal densification.
const PUBLISHED_F14: &[(&str, &str, f64)] = &[
    ("MinHash", "simd", 0.0051),
    ("rotation", "oph-rot", 0.0145),
    ("optimal", "oph-opt", 0.0066),
];

/// Notes our MSE next to the quoted variances at f = 14, k = 40 (no source or trial count stated there, so
/// a note; the closed forms are enforced by [`check`]).
fn note_f14(rows: &[AccuracyRow], checks: &mut Checks) {
    for (label, kernel, want) in PUBLISHED_F14 {
        if let Some(r) = rows.iter().find(|r| {
            r.kernel == *kernel
                && r.elements == "random"
                && r.union == 14
                && r.num_perm == 40
                && (r.jaccard - 4.0 / 14.0).abs() < 1e-9
        }) {
            // The table's own uncertainty: at T trials an MSE has a relative standard error of about
            // sqrt(2/T); the quoted figures state no source or trial count, so only its rounding is known.
            let se = r.mse_se;
            checks.note(format!(
                "f = 14, k = 40, J = 0.286, {label}: the quoted measured variance {want} (source and trial \
                 count not stated; rounded to 4 decimals, so +- 0.00005 from rounding alone), lshbench \
                 `{kernel}` MSE {:.5} +- {se:.5} ({} trials), closed form {:.5}",
                r.mse,
                r.trials,
                r.predicted_rel_mse * r.jaccard * (1.0 - r.jaccard) / r.num_perm as f64
            ));
        }
    }
}

fn plots(ctx: &Ctx, rows: &[AccuracyRow], figs: &mut Figures) -> Result<()> {
    let kernels = kernels_in(rows.iter().map(|r| r.kernel.as_str()));
    let mut unions: Vec<usize> = rows.iter().map(|r| r.union).collect();
    unions.sort_unstable();
    unions.dedup();
    for elements in ["random", "consecutive"] {
        let sub: Vec<&AccuracyRow> = rows.iter().filter(|r| r.elements == elements).collect();
        if sub.is_empty() {
            continue;
        }
        // Relative MSE against k at J closest to 0.5, one panel per kernel, one line per union size.
        let mut panels = Vec::new();
        for kern in &kernels {
            let mut c = Chart::new(
                format!("{kern}, {elements} elements, J ~ 0.5"),
                "k (slots)",
                "relative MSE",
            );
            c.x_log2 = true;
            c.hlines = vec![1.0];
            for (ui, &u) in unions.iter().enumerate() {
                let mut pts: Vec<(f64, f64, f64, f64)> = sub
                    .iter()
                    .filter(|r| r.kernel == *kern && r.union == u)
                    .filter(|r| (r.jaccard_target - 0.5).abs() < 1e-9)
                    .map(|r| (r.num_perm as f64, r.rel_mse, r.band_lo, r.band_hi))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                if pts.is_empty() {
                    continue;
                }
                c.series.push(
                    Series::new(
                        format!("u = {u}"),
                        pts.iter().map(|p| (p.0, p.1)).collect(),
                        Style::LinePoints,
                        ui,
                    )
                    .with_err(pts.iter().map(|p| (p.2, p.3)).collect()),
                );
            }
            panels.push(c);
        }
        figs.grid(
            ctx,
            &format!("rel_mse_vs_k_{elements}"),
            &format!(
                "Relative MSE against k ({elements} elements; bars: Ertl's acceptance band, z = 3.89)"
            ),
            panels,
            2,
        )?;
        // Bias against J at the largest k per union, one panel per kernel.
        let mut panels = Vec::new();
        for kern in &kernels {
            let mut c = Chart::new(format!("{kern}, {elements} elements"), "exact J", "bias");
            c.hlines = vec![0.0];
            for (ui, &u) in unions.iter().enumerate() {
                let kmax = sub
                    .iter()
                    .filter(|r| r.kernel == *kern && r.union == u)
                    .map(|r| r.num_perm)
                    .max();
                let Some(kmax) = kmax else { continue };
                let mut pts: Vec<(f64, f64, f64)> = sub
                    .iter()
                    .filter(|r| r.kernel == *kern && r.union == u && r.num_perm == kmax)
                    .map(|r| {
                        let sd = (r.mse - r.bias * r.bias).max(0.0).sqrt();
                        (r.jaccard, r.bias, 2.0 * sd / (r.trials as f64).sqrt())
                    })
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                c.series.push(
                    Series::new(
                        format!("u = {u}, k = {kmax}"),
                        pts.iter().map(|p| (p.0, p.1)).collect(),
                        Style::LinePoints,
                        ui,
                    )
                    .with_err(pts.iter().map(|p| (p.1 - p.2, p.1 + p.2)).collect()),
                );
            }
            panels.push(c);
        }
        figs.grid(
            ctx,
            &format!("bias_vs_j_{elements}"),
            &format!(
                "Bias of the estimate against J ({elements} elements; bars: +-2 standard errors)"
            ),
            panels,
            2,
        )?;
    }
    Ok(())
}

/// The cells of one sweep for one kernel.
pub(crate) fn sweep_cells<'a>(sweep: &'a AccuracySweep, spec: &'a KernelSpec) -> Vec<Cell<'a>> {
    let mut cells = Vec::new();
    for elements in &sweep.elements {
        for &union in &sweep.union {
            for &k in &sweep.num_perm {
                for &bits in &sweep.bits {
                    cells.push(Cell {
                        sweep,
                        spec,
                        elements,
                        union,
                        k,
                        bits,
                    });
                }
            }
        }
    }
    cells
}

/// Runs an accuracy experiment: every cell of every sweep, `accuracy.csv`, the checks, the summary and figures.
pub fn run(ctx: &Ctx, cfg: &AccuracyConfig) -> Result<Checks> {
    let mut cells = Vec::new();
    for sweep in &cfg.sweep {
        for kernel in &sweep.kernels {
            let spec = lshbench_core::kernel::spec(kernel)?;
            cells.extend(sweep_cells(sweep, spec));
        }
    }
    let rows = run_cells(ctx, &cells)?;
    write_csv(&ctx.file("accuracy.csv")?, &rows)?;

    let mut checks = Checks::new("accuracy");
    check(&rows, &mut checks)?;
    note_published(&rows, &mut checks);
    note_f14(&rows, &mut checks);

    let mut sections = Vec::new();
    // Headline: relative MSE at J = 0.5 per kernel and union size, at each k.
    let mut unions: Vec<usize> = rows.iter().map(|r| r.union).collect();
    unions.sort_unstable();
    unions.dedup();
    let mut ks: Vec<usize> = rows.iter().map(|r| r.num_perm).collect();
    ks.sort_unstable();
    ks.dedup();
    let kernels = kernels_in(rows.iter().map(|r| r.kernel.as_str()));
    for elements in ["random", "consecutive"] {
        let mut header = vec!["kernel".to_string(), "k".to_string()];
        header.extend(unions.iter().map(|u| format!("u = {u}")));
        let mut t = Table::new(&header);
        for kern in &kernels {
            for &k in &ks {
                let cells: Vec<String> = unions
                    .iter()
                    .map(|&u| {
                        rows.iter()
                            .find(|r| {
                                r.kernel == *kern
                                    && r.elements == elements
                                    && r.union == u
                                    && r.num_perm == k
                                    && (r.jaccard_target - 0.5).abs() < 1e-9
                            })
                            .map(|r| {
                                let mark = if r.in_band { "" } else { " *" };
                                format!("{}{mark}", f(r.rel_mse, 3))
                            })
                            .unwrap_or("-".into())
                    })
                    .collect();
                if cells.iter().all(|c| c == "-") {
                    continue;
                }
                let mut row = vec![kern.to_string(), k.to_string()];
                row.extend(cells);
                t.row(row);
            }
        }
        if !t.is_empty() {
            sections.push((
                format!("Relative MSE at J = 0.5, {elements} elements"),
                format!(
                    "{}\n`*`: outside the band around the family's predicted relative MSE at z = 3.89 (the \
                     check itself corrects z for the number of cells).\n",
                    t.to_markdown()
                ),
            ));
        }
    }
    // The published table next to ours.
    let mut t = Table::new(&["", "u = 8", "u = 32", "u = 128", "u = 1024"]);
    for (label, kernels) in PUBLISHED_KERNELS {
        let published = PUBLISHED.iter().find(|(l, _)| *l == label).unwrap().1;
        t.row(
            std::iter::once(format!("{label}, published"))
                .chain(published.iter().map(|(_, v)| f(*v, 2)))
                .collect(),
        );
        t.row(
            std::iter::once(format!("{label}, lshbench `{}`", kernels[0]))
                .chain(published.iter().map(|(u, _)| {
                    rows.iter()
                        .find(|r| {
                            kernels.contains(&r.kernel.as_str())
                                && r.elements == "random"
                                && r.union == *u
                                && r.num_perm == 32
                                && (r.jaccard - 0.5).abs() < 1e-9
                        })
                        .map(|r| f(r.rel_mse, 2))
                        .unwrap_or("-".into())
                }))
                .collect(),
        );
    }
    sections.push((
        "Relative MSE at m = 32, J = 0.5: the published table and ours".into(),
        t.to_markdown(),
    ));
    let cpu: f64 = rows.iter().map(|r| r.seconds).sum();
    sections.push((
        "Cost".into(),
        format!(
            "{} rows; {cpu:.1} s of compute summed over cells (divide by the thread count for wall time).\n",
            rows.len()
        ),
    ));
    let mut figs = Figures::new();
    plots(ctx, &rows, &mut figs)?;
    sections.push(figs.section());
    write_summary(ctx, "Accuracy (Ertl's protocol)", &sections, &checks)?;
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lshbench_core::kernel::Isa;

    /// A true-random-ish classic MinHash over xxh3 with k seeds: what a correct kernel looks like.
    struct IdealMinHash {
        k: usize,
        seed: u64,
    }
    impl Kernel for IdealMinHash {
        fn name(&self) -> &'static str {
            "ideal"
        }
        fn num_perm(&self) -> usize {
            self.k
        }
        fn isa(&self) -> Isa {
            Isa::Scalar
        }
        fn sign(&self, ids: &[u64], out: &mut [u32]) {
            for (i, o) in out.iter_mut().enumerate() {
                *o = ids
                    .iter()
                    .map(|&x| {
                        (xxhash_rust::xxh3::xxh3_64_with_seed(
                            &x.to_le_bytes(),
                            self.seed ^ i as u64,
                        ) >> 32) as u32
                    })
                    .min()
                    .unwrap_or(u32::MAX);
            }
        }
    }

    /// A deliberately wrong kernel: it copies slot 0 into every other slot a quarter of the time, so slots are
    /// correlated and the variance is far above J(1-J)/k, while each slot is still unbiased.
    struct Correlated(IdealMinHash);
    impl Kernel for Correlated {
        fn name(&self) -> &'static str {
            "correlated"
        }
        fn num_perm(&self) -> usize {
            self.0.k
        }
        fn isa(&self) -> Isa {
            Isa::Scalar
        }
        fn sign(&self, ids: &[u64], out: &mut [u32]) {
            self.0.sign(ids, out);
            for i in 1..out.len() {
                if i % 4 == 0 {
                    out[i] = out[0];
                }
            }
        }
    }

    /// A biased kernel: slot 0 always agrees, so the estimate is high by (1 - J)/k.
    struct Biased(IdealMinHash);
    impl Kernel for Biased {
        fn name(&self) -> &'static str {
            "biased"
        }
        fn num_perm(&self) -> usize {
            self.0.k
        }
        fn isa(&self) -> Isa {
            Isa::Scalar
        }
        fn sign(&self, ids: &[u64], out: &mut [u32]) {
            self.0.sign(ids, out);
            out[0] = 7;
        }
    }

    fn rows_for(
        kernel: &str,
        build: &dyn Fn(u64) -> Result<Box<dyn Kernel>>,
        k: usize,
    ) -> Vec<AccuracyRow> {
        let z = ertl_z();
        let mut rows = Vec::new();
        for (u, jt) in [(64usize, 0.5f64), (200, 0.2)] {
            let shape = PairShape::for_jaccard(u, jt);
            let trials = 2000;
            let m = measure(build, shape, ElementKind::Random, trials, 11).unwrap();
            let (sum, sq) = (m.sum, m.sq);
            let j = shape.jaccard();
            let n = trials as f64;
            let rel = sq / n / (j * (1.0 - j) / k as f64);
            let half = ertl_band_half_width(j, k, trials, z);
            rows.push(AccuracyRow {
                kernel: kernel.into(),
                isa: m.isa,
                seed: 11,
                num_perm: k,
                shingle: "none".into(),
                elements: "random".into(),
                union: u,
                jaccard_target: jt,
                jaccard: j,
                trials,
                mean_estimate: sum / n,
                bias: sum / n - j,
                mse: sq / n,
                rel_mse: rel,
                mse_se: ((m.quad / n - (sq / n).powi(2)).max(0.0) / n).sqrt(),
                band_lo: 1.0 - half,
                band_hi: 1.0 + half,
                in_band: (rel - 1.0).abs() <= half,
                predicted_rel_mse: 1.0,
                seconds: 0.0,
                git_commit: String::new(),
                cpu_model: String::new(),
            });
        }
        rows
    }

    #[test]
    fn an_ideal_minhash_passes_and_wrong_kernels_fail_the_checks() {
        let k = 32;
        let ideal =
            |s: u64| -> Result<Box<dyn Kernel>> { Ok(Box::new(IdealMinHash { k, seed: s })) };
        let mut checks = Checks::new("accuracy");
        check(&rows_for("simd", &ideal, k), &mut checks).unwrap();
        assert!(checks.failed().next().is_none(), "{:?}", checks.list);

        let corr = |s: u64| -> Result<Box<dyn Kernel>> {
            Ok(Box::new(Correlated(IdealMinHash { k, seed: s })))
        };
        let mut checks = Checks::new("accuracy");
        check(&rows_for("simd", &corr, k), &mut checks).unwrap();
        let failed: Vec<_> = checks.failed().map(|c| c.name.clone()).collect();
        assert!(
            failed.iter().any(|n| n.contains("relative MSE")),
            "{failed:?}"
        );

        let biased = |s: u64| -> Result<Box<dyn Kernel>> {
            Ok(Box::new(Biased(IdealMinHash { k, seed: s })))
        };
        let mut checks = Checks::new("accuracy");
        check(&rows_for("simd", &biased, k), &mut checks).unwrap();
        let failed: Vec<_> = checks.failed().map(|c| c.name.clone()).collect();
        assert!(failed.iter().any(|n| n.contains("unbiased")), "{failed:?}");

        // A kernel that ignores its seed: on a fixed set every trial gives the same estimate.
        let fixed =
            |_: u64| -> Result<Box<dyn Kernel>> { Ok(Box::new(IdealMinHash { k, seed: 5 })) };
        let shape = PairShape::for_jaccard(64, 0.5);
        let m = measure(&fixed, shape, ElementKind::Consecutive, 50, 3).unwrap();
        assert_eq!(m.sq * m.sq, m.quad * 50.0, "one estimate repeated");
    }

    #[test]
    fn every_trial_gets_its_own_kernel_seed() {
        let seen = std::sync::Mutex::new(Vec::new());
        let build = |s: u64| -> Result<Box<dyn Kernel>> {
            seen.lock().unwrap().push(s);
            Ok(Box::new(IdealMinHash { k: 8, seed: s }))
        };
        let shape = PairShape::for_jaccard(16, 0.5);
        measure(&build, shape, ElementKind::Random, 100, 9).unwrap();
        let mut seeds = seen.into_inner().unwrap();
        assert_eq!(seeds.len(), 100);
        seeds.sort_unstable();
        seeds.dedup();
        assert_eq!(seeds.len(), 100, "a seed repeated");
    }

    #[test]
    fn the_registry_decides_the_prediction() {
        let family = |name: &str| lshbench_core::kernel::spec(name).unwrap().family;
        assert_eq!(family("simd").predicted_rel_mse(8, 512), Some(1.0));
        let p = family("oph-opt").predicted_rel_mse(8, 32).unwrap();
        assert!((p - 1.353).abs() < 1e-3, "{p}");
        let p = family("oph-opt").predicted_rel_mse(10_000, 32).unwrap();
        assert!((p - (1.0 - 31.0 / 9999.0)).abs() < 1e-12);
        let rot = family("oph-rot").predicted_rel_mse(8, 32).unwrap();
        assert!((rot - 3.603).abs() < 1e-3, "{rot}");
        let fss = family("fss").predicted_rel_mse(8, 32).unwrap();
        assert!((fss - 0.502).abs() < 1e-3, "{fss}");
    }

    #[test]
    fn a_kernel_outside_the_registry_is_an_error() {
        let k = 32;
        let ideal =
            |s: u64| -> Result<Box<dyn Kernel>> { Ok(Box::new(IdealMinHash { k, seed: s })) };
        let err = check(&rows_for("ideal", &ideal, k), &mut Checks::new("accuracy")).unwrap_err();
        assert!(err.to_string().contains("unknown kernel `ideal`"), "{err}");
    }

    #[test]
    fn same_output_pairs_come_from_the_registry() {
        let k = 32;
        let ideal =
            |s: u64| -> Result<Box<dyn Kernel>> { Ok(Box::new(IdealMinHash { k, seed: s })) };
        let mut rows = rows_for("scalar", &ideal, k);
        let mut simd = rows_for("simd", &ideal, k);
        let mut checks = Checks::new("accuracy");
        check(&[rows.clone(), simd.clone()].concat(), &mut checks).unwrap();
        let same: Vec<_> = checks
            .list
            .iter()
            .filter(|c| c.name == "same estimates as the kernel it reproduces: simd = scalar")
            .collect();
        assert_eq!(same.len(), 1, "{:?}", checks.list);
        assert!(same[0].passed, "{:?}", same[0]);
        // A simd row that differs from scalar's fails it.
        simd[0].mse *= 1.5;
        rows.extend(simd);
        let mut checks = Checks::new("accuracy");
        check(&rows, &mut checks).unwrap();
        assert!(checks.failed().any(|c| c.name.ends_with("simd = scalar")));
    }

    #[test]
    fn shapes_are_distinct_and_skip_j_zero_and_one() {
        let s = shapes(8, &[0.05, 0.1, 0.15, 0.5, 0.95]);
        let js: Vec<f64> = s.iter().map(|(_, s)| s.jaccard()).collect();
        assert_eq!(js, vec![0.125, 0.5]);
    }
}
