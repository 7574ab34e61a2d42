//! b-bit slots (Li and König 2010) against bytes per document: for each slot width b and storage budget B
//! bytes per document, a signature of k = 8B/b slots. Two studies:
//!
//! - **Accuracy**: the corrected estimator's MSE on pairs of exact J (the accuracy experiment's cells, with
//!   `bits`), checked against the b-bit variance `P(1-P) / (k (1-C)^2)`, P = C + (1-C) J, and for bias
//!   ([`super::accuracy::check`]). Reported as RMSE at equal bytes, so one reads off which b is cheapest for
//!   a given error.
//! - **Recall**: LSH banding on the b-bit slots, with two bandings: the one `lshbench tune` picks for k at the
//!   threshold for full-width slots, and the one `dedup --bits` picks ([`lshbench_core::lsh::tune::default_banding_bits`]:
//!   the same rule in the slot agreement P, at P(t) and P(t/2)). A band of r slots matches with probability
//!   P^r when the k slots are independent (classic MinHash), so a pair is a candidate with probability
//!   `1 - (1 - P^r)^bands`: the S-curve of P, not of J. Planted pairs above the threshold measure recall; below
//!   it, the candidate rate (what chance collisions of short slots cost). The check: every cell's candidate
//!   count lies within the Wilson interval of that prediction (Bonferroni over the cells).
//!
//! Both predictions need independent slots; for a kernel of another family the accuracy cells check the bias
//! only and the recall cells are notes.

use super::accuracy::{self, AccuracyRow, bits_name};
use super::chart::{Chart, Series, Style};
use super::config::{AccuracySweep, BbitConfig};
use super::deps;
use super::figures::Figures;
use super::report::{Table, f, write_summary};
use super::runner::{CellKey, Checks, Ctx, cell_seed, write_csv};
use super::stats::{bonferroni_level, wilson, z_two_sided};
use crate::error::ExperimentError;
use lshbench_core::arch::Dispatch;
use lshbench_core::corpus::pairs::{ElementKind, PairShape, PairSource};
use lshbench_core::kernel::bbit::{chance_collision, mask};
use lshbench_core::kernel::{KernelSpec, SketchFamily};
use lshbench_core::lsh::scurve::Banding;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// One (b, bytes, J) recall cell.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RecallRow {
    /// The kernel, `NAME/bB` below 32 bits.
    pub kernel: String,
    /// Slot width b.
    pub bits: u32,
    /// k, the slots per signature.
    pub num_perm: usize,
    /// k b / 8.
    pub bytes_per_doc: f64,
    /// Which banding: `full` (lshbench tune's for k at the threshold, as for full-width slots) or `bbit`
    /// (`dedup --bits`'s: the default rule in the slot agreement P = C + (1 - C) J, P(P(t)) >= 0.99 with the
    /// fewest candidates at P(t/2), so the S-curve of P crosses where the S-curve of J would).
    pub banding: String,
    /// Bands of the banding.
    pub bands: usize,
    /// Rows per band.
    pub rows: usize,
    /// The threshold the banding was tuned for.
    pub threshold: f64,
    /// |A u B| of the pairs.
    pub union: usize,
    /// The exact J of the pairs.
    pub jaccard: f64,
    /// The cell's seed.
    pub seed: u64,
    /// Pairs signed (a fresh kernel seed each).
    pub trials: usize,
    /// Pairs that share at least one band.
    pub candidates: u64,
    /// candidates / trials: recall when J is at or above the threshold, else the candidate rate.
    pub rate: f64,
    /// The S-curve of P = C + (1 - C) J at this banding.
    pub predicted: f64,
    /// The S-curve of J at this banding (what full-width slots would give).
    pub predicted_full: f64,
    /// Provenance: the commit of the code.
    pub git_commit: String,
    /// Provenance: the CPU model.
    pub cpu_model: String,
}

/// The slots per signature for `bytes` bytes per document at `bits` bits per slot, if whole and at least 1.
pub fn slots_for(bytes: usize, bits: u32) -> Option<usize> {
    let total = 8 * bytes;
    (total.is_multiple_of(bits as usize) && total >= bits as usize).then(|| total / bits as usize)
}

/// Whether two signatures share a band of `banding` in their low `bits` bits.
pub fn shares_band(a: &[u32], b: &[u32], banding: Banding, bits: u32) -> bool {
    let m = mask(bits);
    (0..banding.bands).any(|band| {
        let r = band * banding.rows..(band + 1) * banding.rows;
        a[r.clone()]
            .iter()
            .zip(&b[r])
            .all(|(x, y)| (x ^ y) & m == 0)
    })
}

/// The probability that a pair of Jaccard `j` shares a band of `banding` with `bits`-bit independent slots.
pub fn predicted_candidate(banding: Banding, j: f64, bits: u32) -> f64 {
    let c = if bits >= 32 {
        0.0
    } else {
        chance_collision(bits)
    };
    banding.probability(c + (1.0 - c) * j)
}

/// The threshold a banding for `bits`-bit slots is tuned at so that it acts at Jaccard `t`: P(t).
pub fn bbit_threshold(t: f64, bits: u32) -> f64 {
    let c = if bits >= 32 {
        0.0
    } else {
        chance_collision(bits)
    };
    c + (1.0 - c) * t
}

/// Signs `trials` pairs of `shape` with a fresh `spec` kernel of k slots each (on `dispatch`) and counts, for
/// every (width, banding) in `variants`, the pairs that share a band.
fn count_candidates(
    dispatch: Dispatch,
    spec: &KernelSpec,
    k: usize,
    shape: PairShape,
    variants: &[(u32, Banding)],
    trials: usize,
    seed: u64,
) -> Result<Vec<u64>> {
    let mut src = PairSource::new(shape, ElementKind::Random, seed);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut sa, mut sb) = (vec![0u32; k], vec![0u32; k]);
    let mut counts = vec![0u64; variants.len()];
    for t in 0..trials {
        let kernel = deps::kernel_of(spec, k, accuracy::trial_seed(seed, t), dispatch)?;
        src.next_pair(&mut a, &mut b);
        kernel.sign(&a, &mut sa);
        kernel.sign(&b, &mut sb);
        for (count, &(w, banding)) in counts.iter_mut().zip(variants) {
            *count += shares_band(&sa, &sb, banding, w) as u64;
        }
    }
    Ok(counts)
}

fn recall_rows(ctx: &Ctx, cfg: &BbitConfig, spec: &KernelSpec) -> Result<Vec<RecallRow>> {
    // One cell per (k, J): every width whose budget gives that k is counted on the same pairs.
    let mut cells: Vec<(usize, Vec<u32>)> = Vec::new();
    for &bytes in &cfg.bytes_per_doc {
        for &bits in &cfg.bits {
            if let Some(k) = slots_for(bytes, bits) {
                match cells.iter_mut().find(|(ck, _)| *ck == k) {
                    Some((_, list)) if !list.contains(&bits) => list.push(bits),
                    Some(_) => {}
                    None => cells.push((k, vec![bits])),
                }
            }
        }
    }
    let mut jobs = Vec::new();
    for (k, bits) in &cells {
        for &j in &cfg.recall_jaccard {
            jobs.push((*k, bits.clone(), j));
        }
    }
    let per: Vec<Vec<RecallRow>> = jobs
        .par_iter()
        .map(|(k, bits, jt)| {
            let k = *k;
            // Per width: the full-width banding, and the one tuned at P(t) (the same at 32 bits).
            let mut variants = Vec::new();
            for &b in bits {
                if let Some(full) = deps::tune_choice(k, cfg.threshold) {
                    variants.push((b, full, "full"));
                }
                if b < 32
                    && let Ok(tuned) =
                        lshbench_core::lsh::tune::default_banding_bits(k, cfg.threshold, b)
                {
                    variants.push((b, tuned, "bbit"));
                }
            }
            let shape = PairShape::for_jaccard(cfg.recall_union, *jt);
            let seed = cell_seed(
                ctx.seed,
                &format!("bbit recall|{}|{k}|{}", cfg.recall_union, shape.both),
            );
            let key = CellKey::new()
                .with("study", "recall")
                .with("kernel", spec.name)
                .with("k", k)
                .with(
                    "bits",
                    bits.iter()
                        .map(|b| b.to_string())
                        .collect::<Vec<_>>()
                        .join("-"),
                )
                .with("union", cfg.recall_union)
                .with("both", shape.both)
                .with("t", cfg.threshold)
                .with("tuning", "dedup-bits")
                .with("trials", cfg.recall_trials)
                .with("seed", ctx.seed);
            ctx.cell(&key, || {
                let pairs: Vec<(u32, Banding)> = variants.iter().map(|v| (v.0, v.1)).collect();
                let counts = count_candidates(
                    ctx.dispatch,
                    spec,
                    k,
                    shape,
                    &pairs,
                    cfg.recall_trials,
                    seed,
                )?;
                let j = shape.jaccard();
                Ok(variants
                    .iter()
                    .zip(counts)
                    .map(|(&(b, banding, which), candidates)| RecallRow {
                        kernel: bits_name(spec.name, b),
                        bits: b,
                        num_perm: k,
                        bytes_per_doc: (k * b as usize) as f64 / 8.0,
                        banding: which.to_string(),
                        bands: banding.bands,
                        rows: banding.rows,
                        threshold: cfg.threshold,
                        union: cfg.recall_union,
                        jaccard: j,
                        seed,
                        trials: cfg.recall_trials,
                        candidates,
                        rate: candidates as f64 / cfg.recall_trials as f64,
                        predicted: predicted_candidate(banding, j, b),
                        predicted_full: banding.probability(j),
                        git_commit: ctx.meta.git_commit.clone(),
                        cpu_model: ctx.meta.cpu_model.clone(),
                    })
                    .collect())
            })
        })
        .collect::<Result<_>>()?;
    let mut rows: Vec<RecallRow> = per.into_iter().flatten().collect();
    rows.sort_by(|a, b| {
        (a.bits, a.num_perm)
            .cmp(&(b.bits, b.num_perm))
            .then(a.banding.cmp(&b.banding))
            .then(a.jaccard.total_cmp(&b.jaccard))
    });
    Ok(rows)
}

/// The recall check: every cell's count within the Wilson interval around its S-curve prediction, at a
/// Bonferroni-corrected z (family-wise false alarm 0.1%). Only for kernels with independent slots.
pub fn check_recall(rows: &[RecallRow], family: SketchFamily, checks: &mut Checks) {
    if rows.is_empty() {
        return;
    }
    if family != SketchFamily::Classic {
        checks.note(format!(
            "recall cells are not checked: the b-bit S-curve needs independent slots, and the kernel's family \
             is {}",
            family.name()
        ));
        return;
    }
    let z = z_two_sided(bonferroni_level(1e-3, rows.len()));
    let mut bad = Vec::new();
    for r in rows {
        let (lo, hi) = wilson(r.candidates, r.trials as u64, z);
        if r.predicted < lo || r.predicted > hi {
            bad.push(format!(
                "{} k={} {}x{} J={:.3}: {} of {} candidates, predicted {:.4} outside [{lo:.4}, {hi:.4}]",
                r.kernel, r.num_perm, r.bands, r.rows, r.jaccard, r.candidates, r.trials, r.predicted
            ));
        }
    }
    checks.expect(
        "candidate rate with b-bit band keys matches the S-curve of P = C + (1-C) J",
        bad.is_empty(),
        if bad.is_empty() {
            format!(
                "all {} cells within their Wilson interval (z = {z:.2})",
                rows.len()
            )
        } else {
            format!(
                "{} of {} cells outside (z = {z:.2}): {}",
                bad.len(),
                rows.len(),
                bad.iter().take(6).cloned().collect::<Vec<_>>().join("; ")
            )
        },
    );
}

/// The width of a row's kernel name.
fn row_bits(r: &AccuracyRow) -> u32 {
    accuracy::split_bits(&r.kernel).1
}

/// Runs the b-bit experiment: `accuracy.csv`, `recall.csv`, the checks, the summary and figures.
pub fn run(ctx: &Ctx, cfg: &BbitConfig) -> Result<Checks> {
    let spec = lshbench_core::kernel::spec(&cfg.kernel)?;
    let acc = accuracy_rows(ctx, cfg, spec)?;
    let rec = recall_rows(ctx, cfg, spec)?;
    write_csv(&ctx.file("recall.csv")?, &rec)?;

    let mut checks = Checks::new("bbit");
    accuracy::check(&acc, &mut checks)?;
    check_recall(&rec, spec.family, &mut checks);

    let axes = Axes::of(&acc);
    let mut sections = rmse_sections(cfg, &acc, &axes);
    sections.extend(recall_section(cfg, &rec));
    let mut figs = Figures::new();
    rmse_figure(ctx, cfg, &acc, &axes, &mut figs)?;
    candidates_figure(ctx, cfg, &rec, &mut figs)?;
    sections.push(figs.section());
    write_summary(
        ctx,
        "b-bit slots against bytes per document",
        &sections,
        &checks,
    )?;
    Ok(checks)
}

/// The accuracy cells: one sweep per width, with the k values its byte budgets give; written to `accuracy.csv`.
fn accuracy_rows(
    ctx: &Ctx,
    cfg: &BbitConfig,
    spec: &'static KernelSpec,
) -> Result<Vec<AccuracyRow>> {
    let sweeps: Vec<AccuracySweep> = cfg
        .bits
        .iter()
        .filter_map(|&bits| {
            let num_perm: Vec<usize> = cfg
                .bytes_per_doc
                .iter()
                .filter_map(|&bytes| slots_for(bytes, bits))
                .collect();
            (!num_perm.is_empty()).then(|| AccuracySweep {
                kernels: vec![cfg.kernel.clone()],
                num_perm,
                union: vec![cfg.union],
                jaccard: cfg.jaccard.clone(),
                elements: vec!["random".into()],
                trials: cfg.trials,
                bits: vec![bits],
            })
        })
        .collect();
    let cells: Vec<_> = sweeps
        .iter()
        .flat_map(|s| accuracy::sweep_cells(s, spec))
        .collect();
    let acc = accuracy::run_cells(ctx, &cells)?;
    write_csv(&ctx.file("accuracy.csv")?, &acc)?;
    Ok(acc)
}

/// The storage sizes and Jaccard values the accuracy rows cover, in order.
struct Axes {
    /// Bytes per document.
    bytes: Vec<f64>,
    /// (target, measured) Jaccard similarity.
    js: Vec<(f64, f64)>,
}

impl Axes {
    fn of(acc: &[AccuracyRow]) -> Axes {
        let mut bytes: Vec<f64> = acc
            .iter()
            .map(|r| (r.num_perm * row_bits(r) as usize) as f64 / 8.0)
            .collect();
        bytes.sort_by(f64::total_cmp);
        bytes.dedup();
        let mut js: Vec<(f64, f64)> = acc.iter().map(|r| (r.jaccard_target, r.jaccard)).collect();
        js.sort_by(|a, b| a.0.total_cmp(&b.0));
        js.dedup();
        Axes { bytes, js }
    }
}

/// The accuracy row of width `bits` at `bytes` per document and target J `jt`.
fn find(acc: &[AccuracyRow], bits: u32, bytes: f64, jt: f64) -> Option<&AccuracyRow> {
    acc.iter().find(|r| {
        row_bits(r) == bits
            && (r.num_perm * bits as usize) as f64 / 8.0 == bytes
            && r.jaccard_target == jt
    })
}

/// One table per J: the measured RMSE of each width at equal storage, with its prediction and the best width.
fn rmse_sections(cfg: &BbitConfig, acc: &[AccuracyRow], axes: &Axes) -> Vec<(String, String)> {
    let mut sections = Vec::new();
    let mut header = vec!["bytes / doc".to_string()];
    header.extend(cfg.bits.iter().map(|b| format!("b = {b}")));
    header.push("best b".into());
    for &(jt, j) in &axes.js {
        let mut t = Table::new(&header);
        for &by in &axes.bytes {
            let mut row = vec![f(by, 0)];
            let mut best: Option<(f64, u32)> = None;
            for &b in &cfg.bits {
                match find(acc, b, by, jt) {
                    Some(r) => {
                        let rmse = r.mse.sqrt();
                        let pred = (r.predicted_rel_mse * j * (1.0 - j) / r.num_perm as f64).sqrt();
                        row.push(format!(
                            "{} ({}, k = {})",
                            f(rmse, 4),
                            f(pred, 4),
                            r.num_perm
                        ));
                        if best.is_none_or(|(v, _)| rmse < v) {
                            best = Some((rmse, b));
                        }
                    }
                    None => row.push("-".into()),
                }
            }
            row.push(best.map(|(_, b)| b.to_string()).unwrap_or("-".into()));
            t.row(row);
        }
        sections.push((
            format!("RMSE of the estimate at equal storage, J = {j:.3}"),
            format!(
                "{}\nEach cell: measured RMSE (predicted RMSE, slots k = 8 bytes / b); {} trials per cell, union \
                 {}, random elements, kernel `{}`. \"best b\": the lowest measured RMSE in the row.\n",
                t.to_markdown(),
                cfg.trials,
                cfg.union,
                cfg.kernel
            ),
        ));
    }
    sections
}

/// The candidate rates of b-bit band keys against the S-curve of P, or nothing without recall rows.
fn recall_section(cfg: &BbitConfig, rec: &[RecallRow]) -> Option<(String, String)> {
    if rec.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "b",
        "k",
        "bytes / doc",
        "tuned for",
        "banding",
        "J",
        "rate",
        "predicted (b bits)",
        "full width",
    ]);
    for r in rec {
        t.row(vec![
            r.bits.to_string(),
            r.num_perm.to_string(),
            f(r.bytes_per_doc, 0),
            if r.banding == "full" {
                format!("t = {}", r.threshold)
            } else {
                format!("P(t) = {:.3}", bbit_threshold(r.threshold, r.bits))
            },
            format!("{}x{}", r.bands, r.rows),
            f(r.jaccard, 3),
            f(r.rate, 4),
            f(r.predicted, 4),
            f(r.predicted_full, 4),
        ]);
    }
    Some((
        format!(
            "LSH candidates with b-bit band keys (threshold {}, {} pairs per cell, union {})",
            cfg.threshold, cfg.recall_trials, cfg.recall_union
        ),
        format!(
            "{}\nThe banding is `lshbench tune`'s for k, tuned at the threshold t (as for full-width slots) \
             or `dedup --bits`'s, the same rule at P(t) = 2^-b + (1 - 2^-b) t and P(t/2) (b-bit aware: the \
             S-curve of P then crosses where full width's crosses at t). rate: the fraction of planted pairs that share a band (recall for J at or above the \
             threshold, the candidate rate below it); predicted: 1 - (1 - P^r)^bands with P = 2^-b + \
             (1 - 2^-b) J; full width: the same with P = J.\n",
            t.to_markdown()
        ),
    ))
}

/// The RMSE against bytes per document, one panel per J (points measured, lines predicted).
fn rmse_figure(
    ctx: &Ctx,
    cfg: &BbitConfig,
    acc: &[AccuracyRow],
    axes: &Axes,
    figs: &mut Figures,
) -> Result<()> {
    let mut panels = Vec::new();
    for &(jt, j) in &axes.js {
        let mut c = Chart::new(
            format!("J = {j:.3}"),
            "bytes per document (k b / 8)",
            "RMSE of the estimate",
        );
        c.x_log2 = true;
        for (i, &b) in cfg.bits.iter().enumerate() {
            let mut pts: Vec<(f64, f64, f64)> = axes
                .bytes
                .iter()
                .filter_map(|&by| {
                    find(acc, b, by, jt).map(|r| {
                        let pred = (r.predicted_rel_mse * j * (1.0 - j) / r.num_perm as f64).sqrt();
                        (by, r.mse.sqrt(), pred)
                    })
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            c.series.push(Series::new(
                format!("b = {b}"),
                pts.iter().map(|p| (p.0, p.1)).collect(),
                Style::Points,
                i,
            ));
            c.series.push(Series::new(
                "",
                pts.iter().map(|p| (p.0, p.2)).collect(),
                Style::Line,
                i,
            ));
        }
        panels.push(c);
    }
    figs.grid(
        ctx,
        "rmse_vs_bytes",
        "b-bit slots: RMSE against bytes per document (points: measured; lines: P(1-P)/(k(1-C)^2))",
        panels,
        2,
    )?;
    Ok(())
}

/// The candidate rate of b-bit band keys against bytes per document, one panel per J.
fn candidates_figure(
    ctx: &Ctx,
    cfg: &BbitConfig,
    rec: &[RecallRow],
    figs: &mut Figures,
) -> Result<()> {
    let mut rjs: Vec<f64> = rec.iter().map(|r| r.jaccard).collect();
    rjs.sort_by(f64::total_cmp);
    rjs.dedup();
    let mut panels = Vec::new();
    for &j in &rjs {
        let mut c = Chart::new(
            format!("J = {j:.3}"),
            "bytes per document (k b / 8)",
            "fraction of pairs that are candidates",
        );
        c.x_log2 = true;
        c.y_range = Some((0.0, 1.0));
        for (i, &b) in cfg.bits.iter().enumerate() {
            let pts: Vec<&RecallRow> = rec
                .iter()
                .filter(|r| r.bits == b && r.jaccard == j && (r.banding == "bbit" || r.bits == 32))
                .collect();
            c.series.push(Series::new(
                format!("b = {b}"),
                pts.iter().map(|r| (r.bytes_per_doc, r.rate)).collect(),
                Style::Points,
                i,
            ));
            c.series.push(Series::new(
                "",
                pts.iter().map(|r| (r.bytes_per_doc, r.predicted)).collect(),
                Style::Line,
                i,
            ));
        }
        panels.push(c);
    }
    figs.grid(
        ctx,
        "candidates_vs_bytes",
        &format!(
            "b-bit band keys, banding tuned at P(t), t = {}: candidate rate (points) and the S-curve of P (lines)",
            cfg.threshold
        ),
        panels,
        2,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_byte_budget() {
        assert_eq!(slots_for(16, 1), Some(128));
        assert_eq!(slots_for(16, 32), Some(4));
        assert_eq!(slots_for(2, 32), None);
        assert_eq!(slots_for(3, 16), None);
        assert_eq!(slots_for(4, 16), Some(2));
    }

    #[test]
    fn band_sharing_looks_at_the_low_bits_only() {
        let banding = Banding::new(2, 2, 4).unwrap();
        let a = [0x10u32, 0x21, 0x30, 0x40];
        let b = [0x00u32, 0x01, 0x31, 0x41];
        // Low 4 bits: band 0 (0,1) vs (0,1) agrees; at 8 bits neither band agrees.
        assert!(shares_band(&a, &b, banding, 4));
        assert!(!shares_band(&a, &b, banding, 8));
        assert!(!shares_band(&a, &b, banding, 32));
        // One bit: band 1 (0,0) vs (1,1) differs, band 0 agrees.
        assert!(shares_band(&a, &b, banding, 1));
    }

    #[test]
    fn the_prediction_is_the_s_curve_of_p() {
        let banding = Banding::new(20, 5, 100).unwrap();
        assert_eq!(
            predicted_candidate(banding, 0.6, 32),
            banding.probability(0.6)
        );
        // b = 1: P = (1 + J)/2.
        assert!((predicted_candidate(banding, 0.6, 1) - banding.probability(0.8)).abs() < 1e-15);
    }

    /// A rate far from the prediction fails the check; the predicted rate passes.
    #[test]
    fn the_recall_check_can_fail() {
        let row = |candidates: u64| RecallRow {
            kernel: "simd/b4".into(),
            bits: 4,
            num_perm: 128,
            bytes_per_doc: 64.0,
            banding: "full".into(),
            bands: 20,
            rows: 6,
            threshold: 0.8,
            union: 50,
            jaccard: 0.5,
            seed: 1,
            trials: 1000,
            candidates,
            rate: candidates as f64 / 1000.0,
            predicted: 0.4,
            predicted_full: 0.3,
            git_commit: String::new(),
            cpu_model: String::new(),
        };
        let mut checks = Checks::new("bbit");
        check_recall(&[row(405)], SketchFamily::Classic, &mut checks);
        assert!(checks.failed().next().is_none(), "{:?}", checks.list);
        let mut checks = Checks::new("bbit");
        check_recall(&[row(300)], SketchFamily::Classic, &mut checks);
        assert!(checks.failed().next().is_some());
    }
}
