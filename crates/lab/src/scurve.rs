//! The empirical S-curve: for each (b, r), kernel, union size and J, the fraction of independent synthetic pairs
//! (fresh random elements, exact J) that share at least one band (all r rows of the band equal in both signatures),
//! with Wilson intervals, against P(J) = 1 - (1 - J^r)^b. Plus the per-band agreement probability on small sets,
//! where densification bends the curve (docs/src/published-figures.md: at f = 20, J = 0.5, r = 5, 0.19 under
//! rotation, 0.033 under optimal densification, against J^r = 0.031).
//!
//! Checked, on cells where theory holds (classic MinHash always; OPH and FSS when no bin is expected empty), at
//! a Bonferroni-corrected level over all checked points (family-wise false-alarm rate `family_alpha`), with
//! exact binomial tails (a normal interval fails where J^r is tiny):
//! - where the family's bands are independent (classic MinHash: independent hash functions per slot), each of
//!   the b bands of each of the n pairs is its own Bernoulli(J^r) trial, so the count of agreeing bands is
//!   Binomial(b n, J^r): a test about sqrt(b) times narrower than one draw per pair;
//! - where bands are dependent (one-permutation hashing, fast similarity sketching: an element fills one bin
//!   per round), one Bernoulli(P(J)) per pair, P(J) = 1 - (1 - J^r)^b.
//!
//! On small sets: classic MinHash's band agreement contains J^r (a binomial over every band), a family quoted
//! far above J^r (rotation densification, docs/src/published-figures.md) lies above it.
//!
//! Whether a cell is sparse, whether bands are independent, and the quoted band agreement, come from the
//! registry's [`lshbench_core::kernel::SketchFamily`].

use super::accuracy::{bits_name, split_bits};
use super::chart::{Chart, Series, Style, kernel_color, kernels_in};
use super::config::{BandAgreementSweep, ScurveConfig, ScurveSweep};
use super::deps;
use super::figures::Figures;
use super::report::{Table, f, write_summary};
use super::runner::{CellKey, Checks, Ctx, cell_seed, write_csv};
use super::stats::{binomial_consistent, binomial_tails, bonferroni_level, wilson, z_two_sided};
use crate::error::ExperimentError;
use lshbench_core::corpus::pairs::{ElementKind, PairShape, PairSource};
use lshbench_core::kernel::KernelSpec;
use lshbench_core::kernel::bbit::{self, BBit};
use lshbench_core::lsh::scurve::Banding;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// J^r at f = 20, J = 0.5, r = 5 as docs/src/published-figures.md quotes it (next to each family's
/// [`lshbench_core::kernel::SketchFamily::quoted_band_agreement`]).
const QUOTED_J_R: f64 = 0.031;

/// One (kernel, b x r, union, J) point of an empirical S-curve.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ScurveRow {
    /// Registry name of the kernel.
    pub kernel: String,
    /// The instruction set the kernel ran on.
    pub isa: String,
    /// The cell's seed.
    pub seed: u64,
    /// k, the number of slots per signature.
    pub num_perm: usize,
    /// Synthetic sets, no text: "none".
    pub shingle: String,
    /// Bands, b.
    pub bands: usize,
    /// Rows per band, r.
    pub rows: usize,
    /// |A u B|, the union size of each pair.
    pub union: usize,
    /// The exact J of the pairs.
    pub jaccard: f64,
    /// Independent pairs measured.
    pub trials: usize,
    /// Pairs that shared a band.
    pub candidates: u64,
    /// Bands that agreed, over all pairs (b per pair).
    pub agreeing_bands: u64,
    /// P^r, the probability that one band agrees when slots are independent (P = J, or C + (1 - C) J for
    /// b-bit slots: [`slot_agreement`]).
    pub p_band_theory: f64,
    /// candidates / trials.
    pub p_empirical: f64,
    /// 95% Wilson interval (for plots; the check uses a Bonferroni-corrected level).
    pub wilson_lo: f64,
    /// Upper end of the 95% Wilson interval.
    pub wilson_hi: f64,
    /// The S-curve 1 - (1 - P^r)^b at the slot agreement P ([`slot_agreement`]).
    pub p_theory: f64,
    /// OPH with bins expected empty: densification decides, theory is not checked.
    pub sparse: bool,
    /// Provenance: the commit of the code.
    pub git_commit: String,
    /// Provenance: the CPU model.
    pub cpu_model: String,
}

/// One (kernel, union, J, r, k) cell of the band-agreement sweep.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BandRow {
    /// Registry name of the kernel.
    pub kernel: String,
    /// The instruction set the kernel ran on.
    pub isa: String,
    /// The cell's seed.
    pub seed: u64,
    /// k, the number of slots per signature.
    pub num_perm: usize,
    /// Synthetic sets, no text: "none".
    pub shingle: String,
    /// Rows per band, r.
    pub rows: usize,
    /// |A u B|, the union size of each pair.
    pub union: usize,
    /// The exact J of the pairs.
    pub jaccard: f64,
    /// Independent pairs measured.
    pub trials: usize,
    /// Bands that agreed, over all trials.
    pub agreeing_bands: u64,
    /// Bands per signature, k / r.
    pub bands_per_trial: usize,
    /// The fraction of bands that agreed.
    pub p_band: f64,
    /// J^r, what independent slots give.
    pub p_independent: f64,
    /// Provenance: the commit of the code.
    pub git_commit: String,
    /// Provenance: the CPU model.
    pub cpu_model: String,
}

/// Whether some band of `r` rows agrees in both signatures.
pub fn shares_band(a: &[u32], b: &[u32], br: Banding) -> bool {
    (0..br.bands).any(|i| {
        let s = i * br.rows..(i + 1) * br.rows;
        a[s.clone()] == b[s]
    })
}

/// The probability that one slot agrees at Jaccard `j`: `j` for full-width slots, and for b-bit slots
/// P = C + (1 - C) J with C = 2^-b ([`lshbench_core::kernel::bbit`]), the value the S-curve is taken at (as
/// `dedup --bits` does).
pub fn slot_agreement(j: f64, bits: u32) -> f64 {
    if bits >= 32 {
        j
    } else {
        let c = bbit::chance_collision(bits);
        c + (1.0 - c) * j
    }
}

/// One (kernel, b x r, union) cell over the sweep's J grid. `band_width` is the number of rows the pairs are
/// matched on: `br.rows`, except in the fault-injection run's wrong-band-width fault.
pub(crate) fn run_cell(
    ctx: &Ctx,
    sweep: &ScurveSweep,
    spec: &KernelSpec,
    br: Banding,
    union: usize,
    band_width: usize,
    bits: u32,
) -> Result<Vec<ScurveRow>> {
    let k = br.hashes();
    let family = spec.family;
    let kernel = bits_name(spec.name, bits);
    let matched = Banding {
        bands: k / band_width.max(1),
        rows: band_width.max(1),
    };
    let mut grid: Vec<PairShape> = Vec::new();
    for &j in &sweep.jaccard {
        let s = PairShape::for_jaccard(union, j);
        if !grid.contains(&s) {
            grid.push(s);
        }
    }
    let z95 = z_two_sided(0.95);
    grid.par_iter()
        .map(|&shape| {
            let seed = cell_seed(ctx.seed, &format!("scurve|{br}|{union}|{}", shape.both));
            let kern = BBit::wrap(deps::kernel_of(spec, k, seed, ctx.dispatch)?, bits)?;
            let mut src = PairSource::new(shape, ElementKind::Random, seed);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (mut sa, mut sb) = (vec![0u32; k], vec![0u32; k]);
            let mut hits = 0u64;
            let mut agreeing = 0u64;
            for _ in 0..sweep.trials {
                src.next_pair(&mut a, &mut b);
                kern.sign(&a, &mut sa);
                kern.sign(&b, &mut sb);
                let agree = (0..matched.bands)
                    .filter(|i| {
                        let s = i * matched.rows..(i + 1) * matched.rows;
                        sa[s.clone()] == sb[s]
                    })
                    .count();
                hits += (agree > 0) as u64;
                agreeing += agree as u64;
            }
            let n = sweep.trials as u64;
            let (lo, hi) = wilson(hits, n, z95);
            let j = shape.jaccard();
            // The probability that one slot agrees: J, or C + (1 - C) J for b-bit slots.
            let p = slot_agreement(j, bits);
            Ok(ScurveRow {
                kernel: kernel.clone(),
                isa: kern.isa().name().into(),
                seed,
                num_perm: k,
                shingle: "none".into(),
                bands: br.bands,
                rows: br.rows,
                union,
                jaccard: j,
                trials: sweep.trials,
                candidates: hits,
                agreeing_bands: agreeing,
                p_band_theory: p.powi(br.rows as i32),
                p_empirical: hits as f64 / n as f64,
                wilson_lo: lo,
                wilson_hi: hi,
                p_theory: br.probability(p),
                sparse: family.is_sparse(union, k),
                git_commit: ctx.meta.git_commit.clone(),
                cpu_model: ctx.meta.cpu_model.clone(),
            })
        })
        .collect()
}

fn run_band_cell(
    ctx: &Ctx,
    s: &BandAgreementSweep,
    kernel: &str,
    union: usize,
    j: f64,
    r: usize,
    k: usize,
) -> Result<BandRow> {
    let shape = PairShape::for_jaccard(union, j);
    let seed = cell_seed(ctx.seed, &format!("band|{union}|{}|{r}|{k}", shape.both));
    let kern = deps::kernel(kernel, k, seed, ctx.dispatch)?;
    let mut src = PairSource::new(shape, ElementKind::Random, seed);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut sa, mut sb) = (vec![0u32; k], vec![0u32; k]);
    let bands = k / r;
    let mut agree = 0u64;
    for _ in 0..s.trials {
        src.next_pair(&mut a, &mut b);
        kern.sign(&a, &mut sa);
        kern.sign(&b, &mut sb);
        agree += (0..bands)
            .filter(|i| sa[i * r..(i + 1) * r] == sb[i * r..(i + 1) * r])
            .count() as u64;
    }
    let jx = shape.jaccard();
    Ok(BandRow {
        kernel: kernel.into(),
        isa: kern.isa().name().into(),
        seed,
        num_perm: k,
        shingle: "none".into(),
        rows: r,
        union,
        jaccard: jx,
        trials: s.trials,
        agreeing_bands: agree,
        bands_per_trial: bands,
        p_band: agree as f64 / (s.trials * bands) as f64,
        p_independent: jx.powi(r as i32),
        git_commit: ctx.meta.git_commit.clone(),
        cpu_model: ctx.meta.cpu_model.clone(),
    })
}

/// An interval for the band agreement probability. With independent bands every band of every trial is its
/// own draw: Wilson over `trials * bands`. Otherwise bands within a trial may be correlated (they are under
/// densification), so the per-trial fraction, a [0, 1] variable with variance <= p(1-p), is treated as one
/// draw: Wilson with n = trials (conservative).
pub fn band_interval(r: &BandRow, z: f64, independent: bool) -> (f64, f64) {
    if independent {
        wilson(r.agreeing_bands, (r.trials * r.bands_per_trial) as u64, z)
    } else {
        let successes = (r.p_band * r.trials as f64).round() as u64;
        wilson(successes, r.trials as u64, z)
    }
}

/// How one S-curve point is tested, by its family: where bands are independent, the count of agreeing bands
/// over every band of every pair against Binomial(b n, J^r); where they are dependent, the count of candidate
/// pairs against Binomial(n, P(J)); not at all where the family's bins are expected empty (densification
/// decides there).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PointTest {
    /// Agreeing bands, `x` of `n` draws, each Bernoulli(`p`) = J^r.
    PerBand {
        /// Bands that agreed.
        x: u64,
        /// b times the pairs.
        n: u64,
        /// J^r.
        p: f64,
    },
    /// Candidate pairs, `x` of `n`, each Bernoulli(`p`) = 1 - (1 - J^r)^b.
    PerPair {
        /// Pairs that shared a band.
        x: u64,
        /// Pairs.
        n: u64,
        /// P(J).
        p: f64,
    },
    /// A sparse cell: not tested.
    Untested,
}

impl PointTest {
    /// The exact binomial tails (P(X <= x), P(X >= x)) of the point (1, 1 when untested).
    pub fn tails(self) -> (f64, f64) {
        match self {
            PointTest::PerBand { x, n, p } | PointTest::PerPair { x, n, p } => {
                binomial_tails(x, n, p)
            }
            PointTest::Untested => (1.0, 1.0),
        }
    }

    /// Whether the point is consistent with theory at two-sided level `alpha` (an untested point is).
    pub fn consistent(self, alpha: f64) -> bool {
        match self {
            PointTest::PerBand { x, n, p } | PointTest::PerPair { x, n, p } => {
                binomial_consistent(x, n, p, alpha)
            }
            PointTest::Untested => true,
        }
    }

    /// "per band", "per pair" or "not tested (sparse)", for tables.
    pub fn name(self) -> &'static str {
        match self {
            PointTest::PerBand { .. } => "per band",
            PointTest::PerPair { .. } => "per pair",
            PointTest::Untested => "not tested (sparse)",
        }
    }
}

/// The test of point `r` for a kernel of `family` ([`PointTest`]).
pub fn point_test(family: lshbench_core::kernel::SketchFamily, r: &ScurveRow) -> PointTest {
    if family.is_sparse(r.union, r.num_perm) {
        PointTest::Untested
    } else if family.independent_bands() {
        PointTest::PerBand {
            x: r.agreeing_bands,
            n: (r.trials * r.bands) as u64,
            p: r.p_band_theory,
        }
    } else {
        PointTest::PerPair {
            x: r.candidates,
            n: r.trials as u64,
            p: r.p_theory,
        }
    }
}

/// The self-checks over all rows of an S-curve run. Fails on a row whose kernel is not in the registry.
pub fn check(
    cfg_alpha: f64,
    rows: &[ScurveRow],
    bands: &[BandRow],
    checks: &mut Checks,
) -> Result<()> {
    check_in(&super::accuracy::registry(), cfg_alpha, rows, bands, checks)
}

/// [`check`] against the kernels of `registry` (the fault-injection run adds its broken kernels).
pub fn check_in(
    registry: &[&KernelSpec],
    cfg_alpha: f64,
    rows: &[ScurveRow],
    bands: &[BandRow],
    checks: &mut Checks,
) -> Result<()> {
    let lookup =
        |name: &str| super::accuracy::lookup(registry, split_bits(name).0).map(|s| s.family);
    let mut per_band = Vec::new();
    let mut per_pair = Vec::new();
    for r in rows {
        match point_test(lookup(&r.kernel)?, r) {
            PointTest::PerBand { .. } => per_band.push(r),
            PointTest::PerPair { .. } => per_pair.push(r),
            PointTest::Untested => {}
        }
    }
    // Exact binomial tests (a normal interval fails where J^r is tiny), Bonferroni over every checked point.
    let points = (per_band.len() + per_pair.len()).max(1);
    let alpha = cfg_alpha / points as f64;
    let label = |r: &ScurveRow| {
        format!(
            "{} {}x{} u={} J={:.3}",
            r.kernel, r.bands, r.rows, r.union, r.jaccard
        )
    };
    let bad_band: Vec<String> = per_band
        .iter()
        .filter_map(|r| {
            let n = (r.trials * r.bands) as u64;
            let (lo, hi) = binomial_tails(r.agreeing_bands, n, r.p_band_theory);
            (!point_test(lookup(&r.kernel).ok()?, r).consistent(alpha)).then(|| {
                format!(
                    "{}: {}/{n} bands = {:.4} against J^r = {:.4} (P(X <= x) = {lo:.2e}, P(X >= x) = {hi:.2e})",
                    label(r),
                    r.agreeing_bands,
                    r.agreeing_bands as f64 / n as f64,
                    r.p_band_theory
                )
            })
        })
        .collect();
    let bad_pair: Vec<String> = per_pair
        .iter()
        .filter_map(|r| {
            let (lo, hi) = binomial_tails(r.candidates, r.trials as u64, r.p_theory);
            (!point_test(lookup(&r.kernel).ok()?, r).consistent(alpha)).then(|| {
                format!(
                    "{}: {}/{} = {:.4} against P = {:.4} (P(X <= x) = {lo:.2e}, P(X >= x) = {hi:.2e})",
                    label(r),
                    r.candidates,
                    r.trials,
                    r.p_empirical,
                    r.p_theory
                )
            })
        })
        .collect();
    let detail = |bad: &[String], of: usize, what: &str| {
        if bad.is_empty() {
            format!(
                "{of} (kernel, b x r, union, J) points, {what}; exact binomial test at {alpha:.1e} per \
                 point (family-wise false alarm {cfg_alpha})"
            )
        } else {
            format!(
                "{} of {of} points outside (exact binomial, {alpha:.1e} per point): {}",
                bad.len(),
                bad.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
            )
        }
    };
    if !per_band.is_empty() {
        checks.expect(
            "per-band agreement is Binomial(b n, J^r) where bands are independent",
            bad_band.is_empty(),
            detail(&bad_band, per_band.len(), "every band of every pair a draw"),
        );
    }
    if !per_pair.is_empty() {
        checks.expect(
            "empirical S-curve inside the theory's confidence band where bands are dependent",
            bad_pair.is_empty(),
            detail(&bad_pair, per_pair.len(), "one draw per pair"),
        );
    }
    if !bands.is_empty() {
        let zb = z_two_sided(bonferroni_level(cfg_alpha, bands.len()));
        for r in bands {
            let family = lookup(&r.kernel)?;
            let (lo, hi) = band_interval(r, zb, family.independent_bands());
            let what = format!(
                "{} at f = {}, J = {:.2}, r = {}, k = {}",
                r.kernel, r.union, r.jaccard, r.rows, r.num_perm
            );
            let detail = format!(
                "band agreement {:.4}, interval [{lo:.4}, {hi:.4}], J^r = {:.4}",
                r.p_band, r.p_independent
            );
            if family.independent_bands() {
                checks.expect(
                    format!("band agreement is J^r where bands are independent: {what}"),
                    lo <= r.p_independent && r.p_independent <= hi,
                    detail,
                );
            } else if let Some(quoted) = family.quoted_band_agreement()
                && quoted > 2.0 * QUOTED_J_R
                && family.is_sparse(r.union, r.num_perm)
            {
                checks.expect(
                    format!(
                        "{} bends the band agreement above J^r (quoted {quoted}): {what}",
                        family.name()
                    ),
                    lo > r.p_independent,
                    detail,
                );
            }
        }
    }
    Ok(())
}

/// The rows of `bits`-bit slots, with `jaccard` replaced by the slot agreement P (the S-curve's argument), for
/// the b-bit figures.
fn rows_at_p(rows: &[ScurveRow], bits: u32) -> Vec<ScurveRow> {
    rows.iter()
        .filter(|r| split_bits(&r.kernel).1 == bits)
        .map(|r| ScurveRow {
            jaccard: slot_agreement(r.jaccard, bits),
            ..r.clone()
        })
        .collect()
}

/// The panels of the `bits`-bit rows at `union`, one per banding: the S-curve against J for full-width slots,
/// against the slot agreement P for b-bit ones (the x axis is labelled with what it holds).
fn width_panels(rows: &[ScurveRow], bits: u32, union: usize) -> Vec<Chart> {
    let x_label = if bits < 32 {
        "slot agreement P"
    } else {
        "Jaccard J"
    };
    panels(&rows_at_p(rows, bits), union, x_label)
}

/// One chart per banding of the rows at `union`: the S-curve against the x value each row holds in `jaccard`,
/// labelled `x_label`.
fn panels(rows: &[ScurveRow], union: usize, x_label: &str) -> Vec<Chart> {
    let mut brs: Vec<Banding> = rows
        .iter()
        .filter(|r| r.union == union)
        .map(|r| Banding {
            bands: r.bands,
            rows: r.rows,
        })
        .collect();
    brs.sort_by(|a, b| a.rule_of_thumb().total_cmp(&b.rule_of_thumb()));
    brs.dedup();
    let kernels = kernels_in(rows.iter().map(|r| r.kernel.as_str()));
    brs.iter()
        .map(|&br| {
            let mut c = Chart::new(format!("{br}, |A u B| = {union}"), x_label, "P(candidate)");
            c.x_range = Some((0.0, 1.0));
            c.y_range = Some((-0.02, 1.02));
            let theory = (0..=100)
                .map(|i| {
                    let s = i as f64 / 100.0;
                    (s, br.probability(s))
                })
                .collect();
            c.series
                .push(Series::new("theory", theory, Style::Theory, 0));
            for kern in &kernels {
                let mut pts: Vec<&ScurveRow> = rows
                    .iter()
                    .filter(|r| {
                        r.union == union
                            && r.kernel == *kern
                            && r.bands == br.bands
                            && r.rows == br.rows
                    })
                    .collect();
                pts.sort_by(|a, b| a.jaccard.total_cmp(&b.jaccard));
                if pts.is_empty() {
                    continue;
                }
                c.series.push(
                    Series::new(
                        kern.to_string(),
                        pts.iter().map(|r| (r.jaccard, r.p_empirical)).collect(),
                        Style::Points,
                        kernel_color(split_bits(kern).0),
                    )
                    .with_err(pts.iter().map(|r| (r.wilson_lo, r.wilson_hi)).collect()),
                );
            }
            c
        })
        .collect()
}

/// One S-curve cell to run: sweep, kernel, banding, union size, and the fault-injection offset of the band
/// width the pairs are matched on (0 in every real run).
pub(crate) type ScurveCell<'a> = (&'a ScurveSweep, &'a KernelSpec, Banding, usize, usize, u32);

/// The cells of one sweep for one kernel.
pub(crate) fn sweep_cells<'a>(
    sweep: &'a ScurveSweep,
    spec: &'a KernelSpec,
    width_offset: usize,
) -> Vec<ScurveCell<'a>> {
    let mut cells = Vec::new();
    for &br in &sweep.bands_rows {
        for &union in &sweep.union {
            for &bits in &sweep.bits {
                cells.push((sweep, spec, br, union, width_offset, bits));
            }
        }
    }
    cells
}

/// Every cell's rows (reusing finished cells), in order.
pub(crate) fn run_cells(ctx: &Ctx, cells: &[ScurveCell]) -> Result<Vec<ScurveRow>> {
    Ok(cells
        .par_iter()
        .map(|&(sweep, spec, br, union, offset, bits)| {
            let mut key = CellKey::new()
                .with("kernel", bits_name(spec.name, bits))
                .with("br", br)
                .with("union", union)
                .with("trials", sweep.trials)
                .with("jgrid", sweep.jaccard.len())
                .with("seed", ctx.seed);
            if offset != 0 {
                key = key.with("width_offset", offset);
            }
            ctx.cell(&key, || {
                run_cell(ctx, sweep, spec, br, union, br.rows + offset, bits)
            })
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect())
}

/// Runs an S-curve experiment: the S-curve and band-agreement cells, their CSVs, the checks, the summary and
/// figures.
pub fn run(ctx: &Ctx, cfg: &ScurveConfig) -> Result<Checks> {
    let mut cells = Vec::new();
    for sweep in &cfg.sweep {
        for kernel in &sweep.kernels {
            cells.extend(sweep_cells(sweep, lshbench_core::kernel::spec(kernel)?, 0));
        }
    }
    let rows = run_cells(ctx, &cells)?;
    write_csv(&ctx.file("scurve.csv")?, &rows)?;

    let bands = band_rows(ctx, cfg)?;
    write_csv(&ctx.file("band_agreement.csv")?, &bands)?;

    let mut checks = Checks::new("scurve");
    check(cfg.family_alpha, &rows, &bands, &mut checks)?;

    let mut sections = Vec::new();
    let mut unions: Vec<usize> = rows.iter().map(|r| r.union).collect();
    unions.sort_unstable();
    unions.dedup();
    let mut figs = Figures::new();
    figures(ctx, &rows, &unions, &mut figs)?;
    sections.push(deviation_section(&rows, &unions));
    sections.extend(band_section(&bands));
    sections.push(figs.section());
    write_summary(
        ctx,
        "S-curves: empirical against theory",
        &sections,
        &checks,
    )?;
    Ok(checks)
}

/// The band-agreement cells: how often one band of r slots agrees, per kernel, union, J, r and k.
fn band_rows(ctx: &Ctx, cfg: &ScurveConfig) -> Result<Vec<BandRow>> {
    let mut band_cells = Vec::new();
    for s in &cfg.band_agreement {
        for kernel in &s.kernels {
            for &union in &s.union {
                for &j in &s.jaccard {
                    for &r in &s.rows {
                        for &k in &s.num_perm {
                            band_cells.push((s, kernel.as_str(), union, j, r, k));
                        }
                    }
                }
            }
        }
    }
    band_cells
        .par_iter()
        .map(|&(s, kernel, union, j, r, k)| {
            let key = CellKey::new()
                .with("band", kernel)
                .with("union", union)
                .with("j", j)
                .with("r", r)
                .with("k", k)
                .with("trials", s.trials)
                .with("seed", ctx.seed);
            ctx.cell(&key, || {
                Ok(vec![run_band_cell(ctx, s, kernel, union, j, r, k)?])
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(|cells| cells.into_iter().flatten().collect())
}

/// The figures: one grid per union of the full-width kernels, and per width and union of the b-bit ones
/// (against the S-curve taken at P = C + (1 - C) J, with P on the x axis).
fn figures(ctx: &Ctx, rows: &[ScurveRow], unions: &[usize], figs: &mut Figures) -> Result<()> {
    for &u in unions.iter().rev() {
        figs.grid(
            ctx,
            &format!("scurve_grid_u{u}"),
            &format!(
                "Empirical S-curves, |A u B| = {u} (points: fraction of pairs that share a band, bars: 95% Wilson)"
            ),
            width_panels(rows, 32, u),
            3,
        )?;
    }
    let mut widths: Vec<u32> = rows.iter().map(|r| split_bits(&r.kernel).1).collect();
    widths.sort_unstable();
    widths.dedup();
    for &b in widths.iter().filter(|&&b| b < 32) {
        let mut bunions: Vec<usize> = rows
            .iter()
            .filter(|r| split_bits(&r.kernel).1 == b)
            .map(|r| r.union)
            .collect();
        bunions.sort_unstable();
        bunions.dedup();
        for &u in bunions.iter().rev() {
            figs.grid(
                ctx,
                &format!("scurve_bbit_b{b}_u{u}"),
                &format!(
                    "Empirical S-curves of {b}-bit slots, |A u B| = {u}, against the slot agreement \
                     P = 2^-{b} + (1 - 2^-{b}) J on the x axis (bars: 95% Wilson)"
                ),
                width_panels(rows, b, u),
                3,
            )?;
        }
    }
    Ok(())
}

/// The headline table: the largest deviation from theory per kernel and union.
fn deviation_section(rows: &[ScurveRow], unions: &[usize]) -> (String, String) {
    let mut t = Table::new(&[
        "kernel",
        "|A u B|",
        "points",
        "max |emp - theory|",
        "sparse (OPH bins empty)",
    ]);
    let kernels = kernels_in(rows.iter().map(|r| r.kernel.as_str()));
    for kern in &kernels {
        for &u in unions {
            let sub: Vec<&ScurveRow> = rows
                .iter()
                .filter(|r| r.kernel == *kern && r.union == u)
                .collect();
            if sub.is_empty() {
                continue;
            }
            let dev = sub
                .iter()
                .map(|r| (r.p_empirical - r.p_theory).abs())
                .fold(0.0, f64::max);
            t.row(vec![
                kern.to_string(),
                u.to_string(),
                sub.len().to_string(),
                f(dev, 4),
                sub.iter().any(|r| r.sparse).to_string(),
            ]);
        }
    }
    ("Deviation from the S-curve".into(), t.to_markdown())
}

/// The band-agreement table (densification bends the curve on small sets), or nothing without band rows.
fn band_section(bands: &[BandRow]) -> Option<(String, String)> {
    if bands.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "kernel",
        "f",
        "J",
        "r",
        "k",
        "band agreement",
        "J^r",
        "quoted (published figures)",
    ]);
    for r in bands {
        let quoted = if r.union == 20 && (r.jaccard - 0.5).abs() < 1e-9 && r.rows == 5 {
            super::accuracy::registry()
                .iter()
                .find(|s| s.name == r.kernel)
                .and_then(|s| s.family.quoted_band_agreement())
                .map_or(QUOTED_J_R, |q| q)
                .to_string()
        } else {
            "-".to_string()
        };
        t.row(vec![
            r.kernel.clone(),
            r.union.to_string(),
            f(r.jaccard, 2),
            r.rows.to_string(),
            r.num_perm.to_string(),
            f(r.p_band, 4),
            f(r.p_independent, 4),
            quoted,
        ]);
    }
    Some((
        "Band agreement on small sets (densification bends the curve)".into(),
        t.to_markdown(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kernel: &str, hits: u64, trials: usize, p: f64, sparse: bool) -> ScurveRow {
        ScurveRow {
            kernel: kernel.into(),
            isa: "scalar".into(),
            seed: 0,
            num_perm: 100,
            shingle: "none".into(),
            bands: 20,
            rows: 5,
            union: 1000,
            jaccard: 0.5,
            trials,
            candidates: hits,
            agreeing_bands: 0,
            p_band_theory: 0.5f64.powi(5),
            p_empirical: hits as f64 / trials as f64,
            wilson_lo: 0.0,
            wilson_hi: 1.0,
            p_theory: p,
            sparse,
            git_commit: String::new(),
            cpu_model: String::new(),
        }
    }

    #[test]
    fn b_bit_panels_plot_and_label_the_slot_agreement() {
        let mut full = row("simd", 50, 100, 0.5, false);
        full.jaccard = 0.2;
        let one_bit = ScurveRow {
            kernel: bits_name("simd", 1),
            ..full.clone()
        };
        let rows = [full, one_bit];
        let x_of = |c: &Chart| {
            let points = c.series.iter().find(|s| s.label != "theory").unwrap();
            points.points[0].0
        };
        let j = width_panels(&rows, 32, 1000);
        assert_eq!((j.len(), j[0].x_label.as_str()), (1, "Jaccard J"));
        assert_eq!(x_of(&j[0]), 0.2);
        let p = width_panels(&rows, 1, 1000);
        assert_eq!((p.len(), p[0].x_label.as_str()), (1, "slot agreement P"));
        // P = 1/2 + (1 - 1/2) 0.2 = 0.6 for 1-bit slots.
        assert!((x_of(&p[0]) - 0.6).abs() < 1e-12, "{}", x_of(&p[0]));
    }

    #[test]
    fn the_scurve_check_fails_on_a_curve_that_is_off_and_ignores_sparse_cells() {
        let p = Banding { bands: 20, rows: 5 }.probability(0.5);
        let mut c = Checks::new("scurve");
        check(
            1e-3,
            &[row("fss", (p * 2000.0).round() as u64, 2000, p, false)],
            &[],
            &mut c,
        )
        .unwrap();
        assert!(c.failed().next().is_none());
        // 30% of pairs found where theory says 47%: far outside.
        let mut c = Checks::new("scurve");
        check(1e-3, &[row("fss", 600, 2000, p, false)], &[], &mut c).unwrap();
        assert!(c.failed().next().is_some());
        let mut c = Checks::new("scurve");
        let mut sparse = row("oph-rot", 600, 2000, p, true);
        sparse.union = 20;
        check(1e-3, &[sparse], &[], &mut c).unwrap();
        assert!(c.failed().next().is_none());
        assert!(check(1e-3, &[row("nope", 600, 2000, p, false)], &[], &mut c).is_err());
    }

    #[test]
    fn b_bit_slots_are_checked_against_the_s_curve_at_p_and_fail_against_j() {
        // 1-bit slots of simd, 20x5, J = 0.5: the slot agreement is P = 0.75, so a band agrees with probability
        // 0.75^5 = 0.237, not J^5 = 0.031. Real signatures, the check at P passes and at J fails.
        let (bits, br, union, trials) = (1, Banding { bands: 20, rows: 5 }, 200, 400);
        let shape = PairShape::for_jaccard(union, 0.5);
        let mut src = PairSource::new(shape, ElementKind::Random, 11);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (mut sa, mut sb) = (vec![0u32; br.hashes()], vec![0u32; br.hashes()]);
        let (mut hits, mut agreeing) = (0u64, 0u64);
        for t in 0..trials as u64 {
            src.next_pair(&mut a, &mut b);
            let kern = BBit::wrap(
                deps::kernel(
                    "simd",
                    br.hashes(),
                    t,
                    lshbench_core::arch::Dispatch::detect(),
                )
                .unwrap(),
                bits,
            )
            .unwrap();
            kern.sign(&a, &mut sa);
            kern.sign(&b, &mut sb);
            let agree = (0..br.bands)
                .filter(|i| sa[i * 5..(i + 1) * 5] == sb[i * 5..(i + 1) * 5])
                .count() as u64;
            hits += (agree > 0) as u64;
            agreeing += agree;
        }
        let j = shape.jaccard();
        let p = slot_agreement(j, bits);
        assert!((p - (0.5 + 0.5 * j)).abs() < 1e-12);
        assert_eq!(slot_agreement(j, 32), j);
        let at = |p: f64| {
            let mut r = row(
                &bits_name("simd", bits),
                hits,
                trials as usize,
                br.probability(p),
                false,
            );
            r.union = union;
            r.jaccard = j;
            r.agreeing_bands = agreeing;
            r.p_band_theory = p.powi(5);
            r
        };
        let mut c = Checks::new("scurve");
        check(1e-3, &[at(p)], &[], &mut c).unwrap();
        assert!(c.failed().next().is_none(), "{:?}", c.list);
        let mut c = Checks::new("scurve");
        check(1e-3, &[at(j)], &[], &mut c).unwrap();
        assert!(c.failed().next().is_some(), "{:?}", c.list);
        // A dependent-band family's b-bit row is looked up by its base name and tested per pair.
        let mut r = at(j);
        r.kernel = bits_name("fss", bits);
        let mut c = Checks::new("scurve");
        check(1e-3, &[r], &[], &mut c).unwrap();
        assert!(
            c.failed().any(|c| c.name.starts_with("empirical S-curve")),
            "{:?}",
            c.list
        );
    }

    #[test]
    fn independent_bands_are_tested_per_band() {
        // 20x5 at J = 0.5 over 2000 pairs: 40000 bands, J^r = 1/32, so about 1250 agree (sd about 35).
        let p = Banding { bands: 20, rows: 5 }.probability(0.5);
        let hits = (p * 2000.0).round() as u64;
        let mut good = row("simd", hits, 2000, p, false);
        good.agreeing_bands = 1250;
        let mut c = Checks::new("scurve");
        check(1e-3, &[good.clone()], &[], &mut c).unwrap();
        assert!(c.failed().next().is_none(), "{:?}", c.list);
        // 12% more agreeing bands (4.3 standard errors per band, invisible in the per-pair count): caught.
        let mut off = good.clone();
        off.agreeing_bands = 1400;
        let mut c = Checks::new("scurve");
        check(1e-3, &[off.clone()], &[], &mut c).unwrap();
        assert!(
            c.failed().any(|c| c.name.starts_with("per-band agreement")),
            "{:?}",
            c.list
        );
        // The same counts from a family with dependent bands are tested per pair, and pass.
        off.kernel = "fss".into();
        let mut c = Checks::new("scurve");
        check(1e-3, &[off], &[], &mut c).unwrap();
        assert!(c.failed().next().is_none(), "{:?}", c.list);
    }

    #[test]
    fn bands_agree_only_when_all_rows_agree() {
        let br = Banding { bands: 2, rows: 2 };
        assert!(shares_band(&[1, 2, 3, 4], &[1, 2, 0, 0], br));
        assert!(shares_band(&[1, 2, 3, 4], &[0, 0, 3, 4], br));
        assert!(!shares_band(&[1, 2, 3, 4], &[1, 0, 3, 0], br));
    }

    #[test]
    fn sparseness_follows_the_registry_family() {
        let family = |name: &str| lshbench_core::kernel::spec(name).unwrap().family;
        assert!(family("oph-opt").is_sparse(20, 100));
        assert!(!family("oph-opt").is_sparse(2000, 126));
        assert!(!family("simd").is_sparse(20, 100));
    }

    fn band_row(kernel: &str, p_band: f64) -> BandRow {
        BandRow {
            kernel: kernel.into(),
            isa: "scalar".into(),
            seed: 0,
            num_perm: 100,
            shingle: "none".into(),
            rows: 5,
            union: 20,
            jaccard: 0.5,
            trials: 4000,
            agreeing_bands: (p_band * 4000.0 * 20.0).round() as u64,
            bands_per_trial: 20,
            p_band,
            p_independent: 0.5f64.powi(5),
            git_commit: String::new(),
            cpu_model: String::new(),
        }
    }

    #[test]
    fn band_agreement_checks_follow_the_family_and_the_published_table() {
        let mut c = Checks::new("scurve");
        let bands = [
            band_row("scalar", 0.031),
            band_row("simd", 0.031),
            band_row("oph-rot", 0.19),
            band_row("oph-opt", 0.033),
            band_row("fss", 0.05),
        ];
        check(1e-3, &[], &bands, &mut c).unwrap();
        let names: Vec<&str> = c.list.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names[0].starts_with("band agreement is J^r where bands are independent: scalar"));
        assert!(names[1].starts_with("band agreement is J^r where bands are independent: simd"));
        assert!(names[2].starts_with(
            "one-permutation hashing, rotation densification bends the band agreement above J^r"
        ));
        assert!(c.failed().next().is_none(), "{:?}", c.list);
        assert!(check(1e-3, &[], &[band_row("nope", 0.1)], &mut c).is_err());
    }
}
