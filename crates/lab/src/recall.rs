//! Recall and precision of LSH banding against exact ground truth on a real corpus.
//!
//! For each study (dataset, shingles, k) the exact all-pairs join (`lshbench_core::exact`) gives every pair with
//! J >= t. For each kernel the corpus is signed once; for each (b, r) the banding index's batch mode
//! (`lshbench_core::lsh::index::batch_candidates`, over the first b*r slots) gives the candidates, and we report
//! candidates, recall, precision before verification, and after verification by exact J (precision 1 by
//! construction) and by the signature estimate, with the time of each stage.
//!
//! Checked: the pairs found are not below what the S-curve predicts from the true pairs' exact similarities,
//! sum_i P(J_i; b, r), by more than a one-sided normal bound, at a Bonferroni-corrected level over all rows
//! (family-wise false-alarm rate `family_alpha`). Pairs are not independent draws: every pair sees the same
//! hash functions, and pairs inside a cluster of near-duplicates share most shingles, so their collisions are
//! correlated. The bound therefore groups the true pairs by connected component of the truth graph and takes
//! the worst case (perfect correlation) inside a component, independence across components.

use super::accuracy::{bits_name, split_bits};
use super::chart::{Chart, Series, Style, kernel_color};
use super::config::{RecallConfig, RecallStudy};
use super::deps;
use super::figures::Figures;
use super::report::{Table, f, write_summary};
use super::runner::{CellKey, Checks, Ctx, dash_joined, write_csv};
use super::scurve::slot_agreement;
use super::stats::{grouped_bernoulli_lower, z_one_sided};
use crate::error::ExperimentError;
use lshbench_core::exact::SimilarPair;
use lshbench_core::kernel::bbit::BBit;
use lshbench_core::lsh::cluster::UnionFind;
use lshbench_core::lsh::index::{BandHasher, batch_candidates};
use lshbench_core::lsh::scurve::Banding;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// One (study, kernel, b x r, threshold) row.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RecallRow {
    /// The study's name.
    pub study: String,
    /// The dataset's name.
    pub dataset: String,
    /// Documents in the corpus.
    pub docs: usize,
    /// Registry name of the kernel.
    pub kernel: String,
    /// The instruction set the kernel ran on.
    pub isa: String,
    /// The experiment seed (kernel, shingles, band hashes).
    pub seed: u64,
    /// k, the number of slots per signature.
    pub num_perm: usize,
    /// The shingle spec, `+lowercase` when lowercased.
    pub shingle: String,
    /// Bands, b.
    pub bands: usize,
    /// Rows per band, r.
    pub rows: usize,
    /// The similarity threshold t of the ground truth.
    pub threshold: f64,
    /// Pairs with exact J >= t.
    pub true_pairs: usize,
    /// Pairs sharing at least one band.
    pub candidates: usize,
    /// True pairs among the candidates.
    pub found: usize,
    /// found / true pairs.
    pub recall: f64,
    /// sum of P(J_i) over the true pairs, divided by their number.
    pub predicted_recall: f64,
    /// found / candidates, before verification.
    pub precision_before: f64,
    /// Candidates kept by exact verification (J >= t); precision after it is 1, recall unchanged.
    pub verified_exact: usize,
    /// Precision after exact verification: verified candidates that are true pairs, over verified candidates.
    pub precision_after_exact: f64,
    /// True pairs among the candidates whose recomputed exact J falls below t (the join and the verification
    /// disagree; 0 when both are right).
    pub true_below_threshold: usize,
    /// Candidates at or above t by recomputed exact J that the ground truth lacks (0 when both are right).
    pub verified_not_true: usize,
    /// Candidates kept by the signature estimate (>= t), over all k slots.
    pub kept_estimate: usize,
    /// Recall after verification by the estimate.
    pub recall_after_estimate: f64,
    /// Precision after verification by the estimate.
    pub precision_after_estimate: f64,
    /// Pairs sharing a band that the index did not enumerate (bucket cap); 0 here, as no cap is set.
    pub pairs_not_enumerated: u64,
    /// Time to sign the corpus.
    pub sign_seconds: f64,
    /// Time to band it and list the candidates.
    pub band_seconds: f64,
    /// Time to score every candidate (exact J and estimate).
    pub verify_seconds: f64,
    /// Provenance: the commit of the code.
    pub git_commit: String,
    /// Provenance: the CPU model.
    pub cpu_model: String,
}

/// A study's corpus as shingle sets, and the exact pairs at its lowest threshold.
struct Prepared {
    sets: Vec<Vec<u64>>,
    truth: Vec<SimilarPair>,
    shingle_label: String,
}

fn prepare(ctx: &Ctx, study: &RecallStudy) -> Result<Prepared> {
    let texts = deps::load_texts(&study.dataset, ctx.seed, ctx.dispatch)?;
    let shingler = deps::shingler(&study.shingle, study.lowercase, ctx.seed, ctx.dispatch)?;
    let sets: Vec<Vec<u64>> = texts
        .texts
        .par_iter()
        .map(|t| lshbench_core::sets::shingle_set(&shingler, t))
        .collect();
    let t_min = study
        .thresholds
        .iter()
        .cloned()
        .fold(f64::INFINITY, f64::min);
    let started = Instant::now();
    let truth = lshbench_core::exact::all_pairs(&sets, t_min);
    ctx.progress.stage(&format!(
        "[{}] {}: {} documents ({} empty), {} exact pairs with J >= {t_min} in {:.2} s",
        ctx.name,
        study.name,
        sets.len(),
        sets.iter().filter(|s| s.is_empty()).count(),
        truth.len(),
        started.elapsed().as_secs_f64()
    ));
    let shingle_label = if study.lowercase {
        format!("{}+lowercase", study.shingle)
    } else {
        study.shingle.clone()
    };
    Ok(Prepared {
        sets,
        truth,
        shingle_label,
    })
}

fn run_cell(
    ctx: &Ctx,
    study: &RecallStudy,
    prep: &Prepared,
    kernel_name: &str,
    bits: u32,
) -> Result<Vec<RecallRow>> {
    let k = study.num_perm;
    let kernel = BBit::wrap(deps::kernel(kernel_name, k, ctx.seed, ctx.dispatch)?, bits)?;
    let row_kernel = bits_name(kernel_name, bits);
    let n = prep.sets.len();
    let started = Instant::now();
    let mut sigs = vec![0u32; n * k];
    sigs.par_chunks_mut(k)
        .zip(prep.sets.par_iter())
        .for_each(|(out, set)| kernel.sign(set, out));
    let sign_seconds = started.elapsed().as_secs_f64();
    let empty: Vec<bool> = prep.sets.iter().map(|s| s.is_empty()).collect();
    let sig = |i: u32| &sigs[i as usize * k..(i as usize + 1) * k];

    let mut rows = Vec::new();
    for br in bandings(study, bits)? {
        let hasher = BandHasher::new(br, ctx.seed);
        let started = Instant::now();
        let cands = batch_candidates(&sigs, k, &empty, &hasher, usize::MAX);
        let band_seconds = started.elapsed().as_secs_f64();
        // Exact J and the estimate of every candidate, once for all thresholds.
        let started = Instant::now();
        let scored: Vec<(u32, u32, f64, f64)> = cands
            .pairs
            .par_iter()
            .map(|&(a, b)| {
                let j =
                    lshbench_core::sets::jaccard(&prep.sets[a as usize], &prep.sets[b as usize]);
                (a, b, j, kernel.estimate(sig(a), sig(b)))
            })
            .collect();
        let verify_seconds = started.elapsed().as_secs_f64();
        for &t in &study.thresholds {
            let truth: Vec<(u32, u32, f64)> = prep
                .truth
                .iter()
                .filter(|p| p.jaccard >= t)
                .map(|p| (p.a.min(p.b), p.a.max(p.b), p.jaccard))
                .collect();
            let truth_set: rustc_hash::FxHashSet<(u32, u32)> =
                truth.iter().map(|&(a, b, _)| (a, b)).collect();
            let found = scored
                .iter()
                .filter(|(a, b, _, _)| truth_set.contains(&(*a, *b)))
                .count();
            let verified = scored.iter().filter(|s| s.2 >= t).count();
            // Every true pair among the candidates is looked at, whatever its recomputed J.
            let true_below = scored
                .iter()
                .filter(|(a, b, j, _)| *j < t && truth_set.contains(&(*a, *b)))
                .count();
            let verified_not_true = scored
                .iter()
                .filter(|(a, b, j, _)| *j >= t && !truth_set.contains(&(*a, *b)))
                .count();
            let kept_est: Vec<&(u32, u32, f64, f64)> = scored.iter().filter(|s| s.3 >= t).collect();
            let kept_true = kept_est
                .iter()
                .filter(|(a, b, _, _)| truth_set.contains(&(*a, *b)))
                .count();
            let predicted: f64 = truth
                .iter()
                .map(|p| br.probability(slot_agreement(p.2, bits)))
                .sum();
            let ratio = |a: usize, b: usize| {
                if b == 0 {
                    f64::NAN
                } else {
                    a as f64 / b as f64
                }
            };
            rows.push(RecallRow {
                study: study.name.clone(),
                dataset: study.dataset.name.clone(),
                docs: n,
                kernel: row_kernel.clone(),
                isa: kernel.isa().name().into(),
                seed: ctx.seed,
                num_perm: k,
                shingle: prep.shingle_label.clone(),
                bands: br.bands,
                rows: br.rows,
                threshold: t,
                true_pairs: truth.len(),
                candidates: scored.len(),
                found,
                recall: ratio(found, truth.len()),
                predicted_recall: if truth.is_empty() {
                    f64::NAN
                } else {
                    predicted / truth.len() as f64
                },
                precision_before: ratio(found, scored.len()),
                verified_exact: verified,
                precision_after_exact: ratio(verified - verified_not_true, verified),
                true_below_threshold: true_below,
                verified_not_true,
                kept_estimate: kept_est.len(),
                recall_after_estimate: ratio(kept_true, truth.len()),
                precision_after_estimate: ratio(kept_true, kept_est.len()),
                pairs_not_enumerated: cands.stats.pairs_not_enumerated,
                sign_seconds,
                band_seconds,
                verify_seconds,
                git_commit: ctx.meta.git_commit.clone(),
                cpu_model: ctx.meta.cpu_model.clone(),
            });
        }
    }
    Ok(rows)
}

/// The bandings a cell runs: the study's `bands_rows` at full width; for b-bit slots `dedup --bits`'s default
/// banding at each threshold ([`lshbench_core::lsh::tune::default_banding_bits`]), each once.
fn bandings(study: &RecallStudy, bits: u32) -> Result<Vec<Banding>> {
    if bits >= 32 {
        return Ok(study.bands_rows.clone());
    }
    let mut out: Vec<Banding> = Vec::new();
    for &t in &study.thresholds {
        let br = lshbench_core::lsh::tune::default_banding_bits(study.num_perm, t, bits)
            .map_err(|e| ExperimentError::Mismatch(format!("{}: {e}", study.name)))?;
        if !out.contains(&br) {
            out.push(br);
        }
    }
    Ok(out)
}

/// The S-curve check over all rows: `found >= E[found] - z sd`, with E and sd of the Poisson-binomial count
/// of the true pairs' P(J_i). `ps_of` gives a row's per-pair probabilities.
pub fn check(
    family_alpha: f64,
    rows: &[RecallRow],
    ps_of: &dyn Fn(&RecallRow) -> Vec<(usize, f64)>,
    checks: &mut Checks,
) {
    let checked: Vec<&RecallRow> = rows.iter().filter(|r| r.true_pairs > 0).collect();
    let z = z_one_sided(1.0 - family_alpha / checked.len().max(1) as f64);
    let mut bad = Vec::new();
    for r in &checked {
        let lower = grouped_bernoulli_lower(&ps_of(r), z);
        if (r.found as f64) < lower {
            bad.push(format!(
                "{} {} {}x{} t={}: found {} of {} true pairs, S-curve lower bound {:.1} (predicted recall {:.3})",
                r.study, r.kernel, r.bands, r.rows, r.threshold, r.found, r.true_pairs, lower, r.predicted_recall
            ));
        }
    }
    checks.expect(
        "recall not below the S-curve's prediction",
        bad.is_empty(),
        if bad.is_empty() {
            format!(
                "{} rows; one-sided z = {z:.2} (family-wise false alarm {family_alpha})",
                checked.len()
            )
        } else {
            bad.join("; ")
        },
    );
    // Exact verification must keep exactly the true pairs among the candidates: no true pair whose recomputed J
    // falls below t, no verified pair the truth lacks.
    let bad_precision: Vec<String> = rows
        .iter()
        .filter(|r| r.true_below_threshold > 0 || r.verified_not_true > 0)
        .map(|r| {
            format!(
                "{} {} {}x{} t={}: {} true pairs recomputed below t, {} verified pairs not in the truth",
                r.study,
                r.kernel,
                r.bands,
                r.rows,
                r.threshold,
                r.true_below_threshold,
                r.verified_not_true
            )
        })
        .collect();
    checks.expect(
        "exact verification keeps exactly the true pairs among the candidates",
        bad_precision.is_empty(),
        if bad_precision.is_empty() {
            "every true pair among the candidates verifies, and every verified pair is true, in every row"
                .to_string()
        } else {
            bad_precision.join("; ")
        },
    );
}

/// The connected component (a representative) of every document under the given edges.
fn components(n: usize, edges: impl Iterator<Item = (u32, u32)>) -> Vec<usize> {
    let mut sets = UnionFind::new(n);
    for (a, b) in edges {
        sets.union(a, b);
    }
    (0..n as u32).map(|i| sets.find(i) as usize).collect()
}

/// Runs a recall experiment: every study's corpus and ground truth, a cell per (study, kernel), `recall.csv`,
/// the checks, the summary and figures.
pub fn run(ctx: &Ctx, cfg: &RecallConfig) -> Result<Checks> {
    let prepared: Vec<OnceLock<Result<Prepared, Arc<ExperimentError>>>> =
        cfg.study.iter().map(|_| OnceLock::new()).collect();
    let get = |i: usize| -> Result<&Prepared> {
        prepared[i]
            .get_or_init(|| prepare(ctx, &cfg.study[i]).map_err(Arc::new))
            .as_ref()
            .map_err(|cause| ExperimentError::Study {
                name: cfg.study[i].name.clone(),
                cause: cause.clone(),
            })
    };
    let mut cells = Vec::new();
    for (i, s) in cfg.study.iter().enumerate() {
        for kern in &s.kernels {
            for &bits in &s.bits {
                cells.push((i, kern.as_str(), bits));
            }
        }
    }
    // Cells run one after another: each is already parallel inside (signing, banding, verification).
    let mut rows = Vec::new();
    for &(i, kern, bits) in &cells {
        let s = &cfg.study[i];
        rows.extend(ctx.cell(&cell_key(ctx, s, kern, bits), || {
            run_cell(ctx, s, get(i)?, kern, bits)
        })?);
    }
    write_csv(&ctx.file("recall.csv")?, &rows)?;

    let mut checks = Checks::new("recall");
    // The per-pair probabilities need the exact J of every true pair; recompute from the prepared truth.
    let ps_of = |r: &RecallRow| -> Vec<(usize, f64)> {
        let Some(i) = cfg.study.iter().position(|s| s.name == r.study) else {
            return Vec::new();
        };
        let Ok(prep) = get(i) else { return Vec::new() };
        let br = Banding {
            bands: r.bands,
            rows: r.rows,
        };
        let pairs: Vec<&SimilarPair> = prep
            .truth
            .iter()
            .filter(|p| p.jaccard >= r.threshold)
            .collect();
        let components = components(prep.sets.len(), pairs.iter().map(|p| (p.a, p.b)));
        pairs
            .iter()
            .map(|p| {
                let at = slot_agreement(p.jaccard, split_bits(&r.kernel).1);
                (components[p.a as usize], br.probability(at))
            })
            .collect()
    };
    check(cfg.family_alpha, &rows, &ps_of, &mut checks);

    let mut sections = Vec::new();
    let mut figs = Figures::new();
    for s in &cfg.study {
        sections.push(study_section(s, &rows));
        sections.extend(study_figure(ctx, s, &rows, &mut figs)?);
    }
    sections.extend(figs.not_drawn());
    write_summary(ctx, "Recall against exact ground truth", &sections, &checks)?;
    Ok(checks)
}

/// The cache key of one cell: the study's corpus, shingles, kernel and width, k, bandings, thresholds and seed.
fn cell_key(ctx: &Ctx, s: &RecallStudy, kern: &str, bits: u32) -> CellKey {
    CellKey::new()
        .with("study", &s.name)
        .with("dataset", &s.dataset.name)
        .with(
            "docs",
            s.dataset
                .limit
                .or(s.dataset.docs)
                .map_or("all".to_string(), |n| n.to_string()),
        )
        .with("shingle", &s.shingle)
        .with("lower", s.lowercase)
        .with("kernel", bits_name(kern, bits))
        .with("k", s.num_perm)
        .with("br", dash_joined(&s.bands_rows))
        .with("t", dash_joined(&s.thresholds))
        .with("seed", ctx.seed)
}

/// A study's table: per kernel and banding, recall and precision before and after verification, and timings.
fn study_section(s: &RecallStudy, rows: &[RecallRow]) -> (String, String) {
    let mut t = Table::new(&[
        "kernel",
        "b x r",
        "t",
        "true pairs",
        "candidates",
        "recall",
        "S-curve recall",
        "precision before",
        "after exact",
        "recall / precision after estimate",
        "band s",
        "verify s",
    ]);
    for r in rows.iter().filter(|r| r.study == s.name) {
        t.row(vec![
            r.kernel.clone(),
            format!("{}x{}", r.bands, r.rows),
            f(r.threshold, 2),
            r.true_pairs.to_string(),
            r.candidates.to_string(),
            f(r.recall, 4),
            f(r.predicted_recall, 4),
            f(r.precision_before, 4),
            f(r.precision_after_exact, 2),
            format!(
                "{} / {}",
                f(r.recall_after_estimate, 3),
                f(r.precision_after_estimate, 3)
            ),
            f(r.band_seconds, 3),
            f(r.verify_seconds, 3),
        ]);
    }
    let first = rows.iter().find(|r| r.study == s.name);
    (
        format!(
            "Study `{}`: {} ({} documents), {}, k = {}",
            s.name,
            s.dataset.name,
            first.map_or(0, |r| r.docs),
            first.map_or(s.shingle.clone(), |r| r.shingle.clone()),
            s.num_perm
        ),
        format!(
            "{}\nSigning time per kernel: {}.\n",
            t.to_markdown(),
            s.kernels
                .iter()
                .filter_map(|k| rows
                    .iter()
                    .find(|r| r.study == s.name && &r.kernel == k)
                    .map(|r| format!("{k} {:.3} s", r.sign_seconds)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
}

/// A study's figure: recall against candidates per (b, r), one panel per threshold, one series per kernel.
fn study_figure(
    ctx: &Ctx,
    s: &RecallStudy,
    rows: &[RecallRow],
    figs: &mut Figures,
) -> Result<Option<(String, String)>> {
    let mut ts = s.thresholds.clone();
    ts.sort_by(f64::total_cmp);
    let panels: Vec<Chart> = ts
        .iter()
        .map(|&t| {
            let mut c = Chart::new(format!("t = {t}"), "candidates (log10)", "recall");
            c.y_range = Some((0.0, 1.05));
            for kern in &s.kernels {
                let mut pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| r.study == s.name && &r.kernel == kern && r.threshold == t)
                    .map(|r| ((r.candidates.max(1) as f64).log10(), r.recall))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                c.series.push(Series::new(
                    kern.as_str(),
                    pts,
                    Style::LinePoints,
                    kernel_color(kern),
                ));
            }
            c
        })
        .collect();
    let title = format!("{}: recall against candidates, per (b, r)", s.name);
    let stem = format!("recall_{}", s.name);
    Ok(figs
        .grid(ctx, &stem, &title, panels, ts.len().min(3))?
        .map(|link| (format!("Figure ({})", s.name), link)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(found: usize, true_pairs: usize) -> RecallRow {
        RecallRow {
            study: "s".into(),
            dataset: "d".into(),
            docs: 10,
            kernel: "simd".into(),
            isa: "scalar".into(),
            seed: 0,
            num_perm: 128,
            shingle: "char:5".into(),
            bands: 42,
            rows: 3,
            threshold: 0.5,
            true_pairs,
            candidates: found,
            found,
            recall: found as f64 / true_pairs as f64,
            predicted_recall: 0.996,
            precision_before: 1.0,
            verified_exact: found,
            precision_after_exact: 1.0,
            true_below_threshold: 0,
            verified_not_true: 0,
            kept_estimate: 0,
            recall_after_estimate: 0.0,
            precision_after_estimate: 0.0,
            pairs_not_enumerated: 0,
            sign_seconds: 0.0,
            band_seconds: 0.0,
            verify_seconds: 0.0,
            git_commit: String::new(),
            cpu_model: String::new(),
        }
    }

    #[test]
    fn recall_check_fails_when_pairs_go_missing() {
        // 1000 true pairs at J = 0.5 under 42x3: P = 0.9963 each, so about 996 expected, sd about 1.9.
        // Independent pairs (each its own component).
        let p = Banding { bands: 42, rows: 3 }.probability(0.5);
        let ps = |_: &RecallRow| (0..1000).map(|i| (i, p)).collect::<Vec<_>>();
        let mut c = Checks::new("recall");
        check(1e-3, &[row(995, 1000)], &ps, &mut c);
        assert!(c.failed().next().is_none(), "{:?}", c.list);
        let mut c = Checks::new("recall");
        check(1e-3, &[row(900, 1000)], &ps, &mut c);
        assert!(c.failed().next().is_some());
    }

    #[test]
    fn a_true_pair_recomputed_below_the_threshold_fails_the_verification_check() {
        let p = Banding { bands: 42, rows: 3 }.probability(0.5);
        let ps = |_: &RecallRow| (0..1000).map(|i| (i, p)).collect::<Vec<_>>();
        let mut r = row(996, 1000);
        r.true_below_threshold = 1;
        let mut c = Checks::new("recall");
        check(1e-3, &[r.clone()], &ps, &mut c);
        let failed: Vec<_> = c.failed().map(|c| c.name.as_str()).collect();
        assert_eq!(
            failed,
            ["exact verification keeps exactly the true pairs among the candidates"]
        );
        r.true_below_threshold = 0;
        r.verified_not_true = 2;
        let mut c = Checks::new("recall");
        check(1e-3, &[r], &ps, &mut c);
        assert_eq!(c.failed().count(), 1);
    }

    #[test]
    fn components_follow_the_edges() {
        let c = components(5, [(0u32, 1u32), (1, 2)].into_iter());
        assert_eq!(c[0], c[2]);
        assert_ne!(c[0], c[3]);
        assert_ne!(c[3], c[4]);
    }
}
