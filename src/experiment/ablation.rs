//! The hash-family ablation for one-permutation hashing, and the Pareto figure: relative MSE against signing
//! speed for every kernel listed (the registry's kernels and the `oph-opt/HASH` families of
//! [`crate::kernel::ophhash`]).
//!
//! Accuracy is measured by the accuracy experiment's protocol (pairs of exact J, a fresh kernel seed per trial)
//! on three kinds of elements: `random` 64-bit ids, `consecutive` integers (where weak families classically
//! break), and `shingles`: real shingle ids of the dataset (each trial takes one document with at least
//! `union` distinct shingles, a uniform subset of `union` of them, and splits it into A only, B only and both,
//! so J is exact while the ids keep the structure the shingler gives them).
//!
//! Speed: every kernel signs the dataset's shingle-id sets (ids in memory, shingling not timed) on one thread,
//! `repeats` rounds, the kernels alternating within a round so machine load hits them alike; the median round
//! gives ids/s and docs/s.
//!
//! Checks: the kernels not listed in `may_fail` get the accuracy experiment's checks (relative MSE against the
//! family's closed form, bias, `same_output_as`), which can fail. A kernel in `may_fail` (a deliberately weak
//! family) is measured the same way, but its outcome is a result, reported in the table "which families keep
//! the theory", not a failed run.

use super::ExperimentError;
use super::accuracy::{self, AccuracyRow, Moments};
use super::chart::{Chart, Figures, Series, Style, kernel_color};
use super::config::{AblationConfig, AccuracySweep};
use super::deps;
use super::report::{Table, f, write_summary};
use super::runner::{CellKey, Checks, Ctx, cell_seed, write_csv};
use super::stats::{bonferroni_level, ertl_z, z_two_sided};
use crate::corpus::pairs::PairShape;
use crate::kernel::KernelSpec;
use crate::shingle::{Normalization, Shingler};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Instant;

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// One kernel's signing speed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SpeedRow {
    /// Registry name.
    pub kernel: String,
    /// The instruction set it ran on.
    pub isa: String,
    /// k.
    pub num_perm: usize,
    /// Documents signed per round.
    pub docs: usize,
    /// Shingle ids signed per round.
    pub ids: usize,
    /// Rounds timed.
    pub repeats: usize,
    /// Median seconds of a round.
    pub seconds: f64,
    /// docs / seconds.
    pub docs_per_s: f64,
    /// ids / seconds, in millions.
    pub mids_per_s: f64,
    /// Provenance: the commit of the code.
    pub git_commit: String,
    /// Provenance: the CPU model.
    pub cpu_model: String,
}

/// The distinct shingle ids of every document with at least `min` of them.
fn shingle_sets(cfg: &AblationConfig, seed: u64, min: usize) -> Result<Vec<Vec<u64>>> {
    let texts = deps::load_texts(&cfg.dataset, seed)?;
    let kind = cfg
        .shingle
        .parse()
        .map_err(|e: String| ExperimentError::Shingle(e))?;
    let shingler = Shingler::new(kind, Normalization::default(), seed);
    let mut out = Vec::new();
    let mut ids = Vec::new();
    for text in &texts.texts {
        shingler.hashes(text, &mut ids);
        ids.sort_unstable();
        ids.dedup();
        if ids.len() >= min.max(1) {
            out.push(ids.clone());
        }
    }
    Ok(out)
}

/// Accuracy on real shingle ids: `trials` pairs of `shape` cut from the documents of `pool`.
fn measure_shingles(
    spec: &KernelSpec,
    k: usize,
    pool: &[Vec<u64>],
    shape: PairShape,
    trials: usize,
    seed: u64,
) -> Result<Moments> {
    let j = shape.jaccard();
    let union = shape.union();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut a, mut b) = (Vec::with_capacity(union), Vec::with_capacity(union));
    let (mut sa, mut sb) = (vec![0u32; k], vec![0u32; k]);
    let mut pick: Vec<u64> = Vec::new();
    let (mut sum, mut sq, mut quad) = (0.0, 0.0, 0.0);
    let mut isa = String::new();
    for t in 0..trials {
        let doc = &pool[(rng.next_u64() % pool.len() as u64) as usize];
        // A uniform `union`-subset in uniform order: a partial Fisher-Yates shuffle.
        pick.clear();
        pick.extend_from_slice(doc);
        for i in 0..union {
            let r = i + (rng.next_u64() % (pick.len() - i) as u64) as usize;
            pick.swap(i, r);
        }
        a.clear();
        b.clear();
        a.extend_from_slice(&pick[..shape.only_a]);
        b.extend_from_slice(&pick[shape.only_a..shape.only_a + shape.only_b]);
        let both = &pick[shape.only_a + shape.only_b..union];
        a.extend_from_slice(both);
        b.extend_from_slice(both);
        let kernel = deps::kernel_of(spec, k, accuracy::trial_seed(seed, t))?;
        if t == 0 {
            isa = kernel.isa().name().to_string();
        }
        kernel.sign(&a, &mut sa);
        kernel.sign(&b, &mut sb);
        let e = kernel.estimate(&sa, &sb) - j;
        sum += e + j;
        sq += e * e;
        quad += e * e * e * e;
    }
    Ok(Moments { sum, sq, quad, isa })
}

fn shingle_rows(
    ctx: &Ctx,
    cfg: &AblationConfig,
    specs: &[&'static KernelSpec],
    pool: &[Vec<u64>],
) -> Result<Vec<AccuracyRow>> {
    let mut jobs = Vec::new();
    for spec in specs {
        for &union in &cfg.union {
            for &jt in &cfg.jaccard {
                let shape = PairShape::for_jaccard(union, jt);
                if shape.both == 0 || shape.both == union {
                    continue;
                }
                jobs.push((*spec, union, jt, shape));
            }
        }
    }
    let per: Vec<Vec<AccuracyRow>> = jobs
        .par_iter()
        .map(|&(spec, union, jt, shape)| {
            let k = cfg.num_perm;
            let seed = cell_seed(
                ctx.seed,
                &format!("shingles|{}|{union}|{k}|{}", cfg.shingle, shape.both),
            );
            let key = CellKey::new()
                .with("kernel", spec.name)
                .with("elements", format!("shingles-{}", cfg.shingle))
                .with("dataset", &cfg.dataset.name)
                .with("union", union)
                .with("k", k)
                .with("both", shape.both)
                .with("trials", cfg.trials)
                .with("seed", ctx.seed);
            ctx.cell(&key, || {
                let started = Instant::now();
                let m = measure_shingles(spec, k, pool, shape, cfg.trials, seed)?;
                Ok(vec![accuracy::row_of(
                    ctx,
                    spec.name,
                    spec.family,
                    "shingles",
                    jt,
                    shape,
                    k,
                    cfg.trials,
                    seed,
                    &m,
                    started.elapsed().as_secs_f64(),
                )])
            })
        })
        .collect::<Result<_>>()?;
    Ok(per.into_iter().flatten().collect())
}

/// Signing speed, one thread, kernels alternating within each round.
fn speed_rows(
    ctx: &Ctx,
    cfg: &AblationConfig,
    specs: &[&'static KernelSpec],
    sets: &[Vec<u64>],
) -> Result<Vec<SpeedRow>> {
    let k = cfg.num_perm;
    let kernels: Vec<_> = specs
        .iter()
        .map(|s| deps::kernel_of(s, k, ctx.seed))
        .collect::<Result<_>>()?;
    let ids: usize = sets.iter().map(|s| s.len()).sum();
    let mut times = vec![Vec::with_capacity(cfg.repeats); kernels.len()];
    let mut out = vec![0u32; k];
    let mut check = 0u64;
    for _ in 0..cfg.repeats.max(1) {
        for (kernel, times) in kernels.iter().zip(&mut times) {
            let started = Instant::now();
            for set in sets {
                kernel.sign(set, &mut out);
                check = check.wrapping_add(out[0] as u64);
            }
            times.push(started.elapsed().as_secs_f64());
        }
    }
    std::hint::black_box(check);
    Ok(kernels
        .iter()
        .zip(times)
        .map(|(kernel, mut t)| {
            t.sort_by(f64::total_cmp);
            let median = t[t.len() / 2];
            SpeedRow {
                kernel: kernel.name().to_string(),
                isa: kernel.isa().name().to_string(),
                num_perm: k,
                docs: sets.len(),
                ids,
                repeats: t.len(),
                seconds: median,
                docs_per_s: sets.len() as f64 / median,
                mids_per_s: ids as f64 / median / 1e6,
                git_commit: ctx.meta.git_commit.clone(),
                cpu_model: ctx.meta.cpu_model.clone(),
            }
        })
        .collect())
}

/// The z-scores of a row: relative MSE against its prediction (NaN without one) and bias.
fn zscores(r: &AccuracyRow) -> (f64, f64) {
    let se = (r.band_hi - r.band_lo) / 2.0 / ertl_z();
    let z_mse = (r.rel_mse - r.predicted_rel_mse) / se;
    let sd = (r.mse - r.bias * r.bias).max(0.0).sqrt();
    let z_bias = r.bias / (sd / (r.trials as f64).sqrt()).max(1e-12);
    (z_mse, z_bias)
}

/// Runs the ablation: `accuracy.csv`, `speed.csv`, the checks, the summary, the Pareto figure.
pub fn run(ctx: &Ctx, cfg: &AblationConfig) -> Result<Checks> {
    let specs: Vec<&'static KernelSpec> = cfg
        .kernels
        .iter()
        .map(|k| crate::kernel::spec(k))
        .collect::<Result<_, _>>()?;
    let synthetic: Vec<String> = cfg
        .elements
        .iter()
        .filter(|e| *e != "shingles")
        .cloned()
        .collect();
    let mut rows = Vec::new();
    if !synthetic.is_empty() {
        let sweep = AccuracySweep {
            kernels: cfg.kernels.clone(),
            num_perm: vec![cfg.num_perm],
            union: cfg.union.clone(),
            jaccard: cfg.jaccard.clone(),
            elements: synthetic,
            trials: cfg.trials,
            bits: vec![32],
        };
        let cells: Vec<_> = specs
            .iter()
            .flat_map(|s| accuracy::sweep_cells(&sweep, s))
            .collect();
        rows = accuracy::run_cells(ctx, &cells)?;
    }
    let max_union = cfg.union.iter().copied().max().unwrap_or(2);
    let sets = shingle_sets(cfg, ctx.seed, 1)?;
    if cfg.elements.iter().any(|e| e == "shingles") {
        let pool: Vec<Vec<u64>> = sets
            .iter()
            .filter(|s| s.len() >= max_union)
            .cloned()
            .collect();
        if pool.is_empty() {
            return Err(ExperimentError::Mismatch(format!(
                "dataset `{}`: no document has {max_union} distinct {} shingles",
                cfg.dataset.name, cfg.shingle
            )));
        }
        rows.extend(shingle_rows(ctx, cfg, &specs, &pool)?);
    }
    write_csv(&ctx.file("accuracy.csv")?, &rows)?;
    let speed = speed_rows(ctx, cfg, &specs, &sets)?;
    write_csv(&ctx.file("speed.csv")?, &speed)?;

    let mut checks = Checks::new("ablation");
    let enforced: Vec<AccuracyRow> = rows
        .iter()
        .filter(|r| !cfg.may_fail.contains(&r.kernel))
        .cloned()
        .collect();
    accuracy::check(&enforced, &mut checks)?;

    // Which families keep the theory: per kernel and element kind, the largest |z| over the cells, against the
    // Bonferroni z of the whole run (the same rule the checks use).
    let z = z_two_sided(bonferroni_level(1e-3, 2 * rows.len().max(1))).max(ertl_z());
    let mut t = Table::new(&[
        "kernel",
        "elements",
        "cells",
        "mean rel. MSE / predicted",
        "max |z| rel. MSE",
        "max |z| bias",
        "keeps the theory",
    ]);
    let kinds = ["random", "consecutive", "shingles"];
    for spec in &specs {
        for kind in kinds {
            let sub: Vec<&AccuracyRow> = rows
                .iter()
                .filter(|r| r.kernel == spec.name && r.elements == kind)
                .collect();
            if sub.is_empty() {
                continue;
            }
            let (mut zm, mut zb, mut ratio) = (0.0f64, 0.0f64, 0.0);
            for r in &sub {
                let (a, b) = zscores(r);
                zm = zm.max(a.abs());
                zb = zb.max(b.abs());
                ratio += r.rel_mse / r.predicted_rel_mse;
            }
            let keeps = zm <= z && zb <= z;
            let weak = cfg.may_fail.contains(&spec.name.to_string());
            if weak {
                checks.note(format!(
                    "{} on {kind} elements (may fail: a result, not a check): {} (max |z| {zm:.1} rel. MSE, \
                     {zb:.1} bias; z = {z:.2})",
                    spec.name,
                    if keeps {
                        "keeps the theory"
                    } else {
                        "BREAKS the theory"
                    }
                ));
            }
            t.row(vec![
                format!("`{}`{}", spec.name, if weak { " (may fail)" } else { "" }),
                kind.to_string(),
                sub.len().to_string(),
                f(ratio / sub.len() as f64, 3),
                f(zm, 1),
                f(zb, 1),
                if keeps { "yes" } else { "**no**" }.to_string(),
            ]);
        }
    }
    let mut sections = vec![(
        "Which families keep the theory".to_string(),
        format!(
            "{}\nPer kernel and element kind: the cells' relative MSE against the family's closed form and \
             their bias, as z-scores; \"keeps the theory\" when every |z| is within z = {z:.2} (Bonferroni over \
             every cell and both tests, family-wise 0.1%). k = {}, unions {:?}, J {:?}, {} trials per cell, \
             shingles: `{}` of `{}`.\n",
            t.to_markdown(),
            cfg.num_perm,
            cfg.union,
            cfg.jaccard,
            cfg.trials,
            cfg.shingle,
            cfg.dataset.name
        ),
    )];
    let mut t = Table::new(&["kernel", "isa", "M ids/s", "docs/s", "vs oph-opt"]);
    let base = speed
        .iter()
        .find(|s| s.kernel == "oph-opt")
        .map(|s| s.mids_per_s);
    for s in &speed {
        t.row(vec![
            format!("`{}`", s.kernel),
            s.isa.clone(),
            f(s.mids_per_s, 2),
            f(s.docs_per_s, 0),
            base.map(|b| f(s.mids_per_s / b, 2)).unwrap_or("-".into()),
        ]);
    }
    sections.push((
        format!("Signing speed (k = {}, one thread)", cfg.num_perm),
        format!(
            "{}\n{} documents, {} shingle ids (`{}`), signed from ids in memory; median of {} rounds, the \
             kernels alternating within each round (ratios are from one run; absolute figures depend on the \
             machine's load).\n",
            t.to_markdown(),
            speed.first().map(|s| s.docs).unwrap_or(0),
            speed.first().map(|s| s.ids).unwrap_or(0),
            cfg.shingle,
            cfg.repeats
        ),
    ));

    // The Pareto figure: relative MSE at the largest union and the J nearest 0.5, against ids/s.
    let mut figs = Figures::new();
    let mut panels = Vec::new();
    let jt = cfg
        .jaccard
        .iter()
        .copied()
        .min_by(|a, b| (a - 0.5).abs().total_cmp(&(b - 0.5).abs()))
        .unwrap_or(0.5);
    for kind in kinds {
        let mut c = Chart::new(
            format!("{kind} elements, union {max_union}, J = {jt}"),
            "signing speed (million ids/s, one thread)",
            "relative MSE",
        );
        // Speeds span two orders of magnitude (scalar MinHash to the fused one-permutation loop).
        c.x_log2 = true;
        for s in &speed {
            if let Some(r) = rows.iter().find(|r| {
                r.kernel == s.kernel
                    && r.elements == kind
                    && r.union == max_union
                    && r.jaccard_target == jt
            }) {
                c.series.push(
                    Series::new(
                        s.kernel.clone(),
                        vec![(s.mids_per_s, r.rel_mse)],
                        Style::Points,
                        pareto_color(&s.kernel),
                    )
                    .with_err(vec![(r.band_lo, r.band_hi)]),
                );
            }
        }
        panels.push(c);
    }
    figs.grid(
        ctx,
        "pareto",
        &format!(
            "Relative MSE against signing speed, k = {} (bars: the band around the family's closed form)",
            cfg.num_perm
        ),
        panels,
        3,
    )?;
    sections.push(figs.section());
    write_summary(
        ctx,
        "Hash-family ablation and the Pareto figure",
        &sections,
        &checks,
    )?;
    Ok(checks)
}

/// A kernel's colour: its registry position (the plot wraps it onto the palette).
fn pareto_color(name: &str) -> usize {
    kernel_color(name)
}
