//! Throughput of every kernel by k and shingle kind, on real and synthetic corpora, on one thread and on all
//! threads: docs/s, MB/s of text and shingles/s, with shingling timed apart from signing, plus the fused
//! text-in/signatures-out time. Timings are data, not checks (medians of `repeats` runs; a shared machine
//! makes them noisy). The one check: signatures are identical whatever the thread count.

use super::accuracy::bits_name;
use super::chart::{Chart, Series, Style, kernel_color};
use super::config::{DatasetSpec, ThroughputConfig};
use super::deps;
use super::figures::Figures;
use super::report::{Table, f, write_summary};
use super::runner::{CellKey, Checks, Ctx, dash_joined, write_csv};
use crate::error::ExperimentError;
use lshbench_core::kernel::bbit::{self, BBit};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Instant;

type Result<T, E = ExperimentError> = std::result::Result<T, E>;

/// One (dataset, shingle, kernel, k, threads) row of timings.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ThroughputRow {
    /// The dataset's name.
    pub dataset: String,
    /// Documents timed.
    pub docs: usize,
    /// Bytes of text.
    pub bytes: usize,
    /// Registry name of the kernel.
    pub kernel: String,
    /// The instruction set the kernel ran on.
    pub isa: String,
    /// The experiment seed.
    pub seed: u64,
    /// k, the number of slots per signature.
    pub num_perm: usize,
    /// The shingle spec.
    pub shingle: String,
    /// Worker threads.
    pub threads: usize,
    /// Timed repetitions; the times are their medians.
    pub repeats: usize,
    /// Shingle ids produced (with repeats), i.e. what the kernel consumed.
    pub shingles: u64,
    /// Median seconds: shingling alone, signing pre-split shingles alone, and both fused per document.
    pub shingle_seconds: f64,
    /// Median seconds signing pre-split shingle ids.
    pub sign_seconds: f64,
    /// Median seconds from text to signatures, per document.
    pub fused_seconds: f64,
    /// Documents per second, fused.
    pub fused_docs_per_s: f64,
    /// MB of text per second, fused.
    pub fused_mb_per_s: f64,
    /// MB of text per second, shingling alone.
    pub shingle_mb_per_s: f64,
    /// Shingle ids per second, signing alone.
    pub sign_shingles_per_s: f64,
    /// xxh3 of all signatures, to confirm thread-count invariance.
    pub signature_digest: String,
    /// Provenance: the commit of the code.
    pub git_commit: String,
    /// Provenance: the CPU model.
    pub cpu_model: String,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn timed<T>(repeats: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut times = Vec::with_capacity(repeats);
    let mut last = None;
    for _ in 0..repeats {
        let t = Instant::now();
        let out = f();
        times.push(t.elapsed().as_secs_f64());
        last = Some(out);
    }
    (median(times), last.expect("repeats >= 1"))
}

thread_local! {
    static IDS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn run_cell(
    ctx: &Ctx,
    cfg: &ThroughputConfig,
    texts: &deps::Texts,
    dataset: &str,
    shingle: &str,
) -> Result<Vec<ThroughputRow>> {
    let shingler = deps::shingler(shingle, false, ctx.seed, ctx.dispatch)?;
    let mut threads: Vec<usize> = cfg
        .threads
        .iter()
        .map(|&t| if t == 0 { ctx.threads } else { t })
        .collect();
    threads.dedup();
    let mb = texts.bytes as f64 / 1e6;
    let mut rows = Vec::new();
    for &t in &threads {
        let pool = lshbench_core::exec::thread_pool(Some(t))?;
        let (shingle_s, ids) = pool.install(|| {
            timed(cfg.repeats, || {
                texts
                    .texts
                    .par_iter()
                    .map(|text| {
                        let mut v = Vec::new();
                        shingler.hashes(text, &mut v);
                        v
                    })
                    .collect::<Vec<Vec<u64>>>()
            })
        });
        let shingles: u64 = ids.iter().map(|v| v.len() as u64).sum();
        for kname in &cfg.kernels {
            for &bits in &cfg.bits {
                for &k in &cfg.num_perm {
                    let kernel = BBit::wrap(deps::kernel(kname, k, ctx.seed, ctx.dispatch)?, bits)?;
                    let name = bits_name(kname, bits);
                    // b-bit slots are packed as they are signed (the storage dedup --bits and sketch use).
                    let w = if bits < 32 { bbit::words(k, bits) } else { 0 };
                    let n = texts.texts.len();
                    let mut sigs = vec![0u32; n * k];
                    // (Full-width slots are not packed; their rows keep a one-word placeholder each.)
                    let mut packed = vec![0u64; n * w.max(1)];
                    let pack = |out: &[u32], p: &mut [u64]| {
                        if bits < 32 {
                            bbit::pack_into(out, bits, p);
                        }
                    };
                    let (sign_s, ()) = pool.install(|| {
                        timed(cfg.repeats, || {
                            sigs.par_chunks_mut(k)
                                .zip(packed.par_chunks_mut(w.max(1)))
                                .zip(ids.par_iter())
                                .with_min_len(8)
                                .for_each(|((out, p), v)| {
                                    kernel.sign(v, out);
                                    pack(out, p);
                                });
                        })
                    });
                    let digest_of = |sigs: &[u32], packed: &[u64]| {
                        if bits < 32 {
                            xxhash_rust::xxh3::xxh3_64(
                                &packed
                                    .iter()
                                    .flat_map(|x| x.to_le_bytes())
                                    .collect::<Vec<u8>>(),
                            )
                        } else {
                            xxhash_rust::xxh3::xxh3_64(
                                &sigs
                                    .iter()
                                    .flat_map(|x| x.to_le_bytes())
                                    .collect::<Vec<u8>>(),
                            )
                        }
                    };
                    let digest_sign = digest_of(&sigs, &packed);
                    let (fused_s, ()) = pool.install(|| {
                        timed(cfg.repeats, || {
                            sigs.par_chunks_mut(k)
                                .zip(packed.par_chunks_mut(w.max(1)))
                                .zip(texts.texts.par_iter())
                                .with_min_len(8)
                                .for_each(|((out, p), text)| {
                                    IDS.with_borrow_mut(|v| {
                                        kernel.sign_text(&shingler, text, v, out);
                                    });
                                    pack(out, p);
                                });
                        })
                    });
                    let digest = digest_of(&sigs, &packed);
                    if digest != digest_sign {
                        return Err(ExperimentError::Mismatch(format!(
                            "{name} k={k}: fused and split signing disagree"
                        )));
                    }
                    if bits < 32 {
                        check_packed(ctx, kname, k, bits, &ids, &sigs, &packed)?;
                    }
                    rows.push(ThroughputRow {
                        dataset: dataset.to_string(),
                        docs: texts.texts.len(),
                        bytes: texts.bytes,
                        kernel: name.clone(),
                        isa: kernel.isa().name().into(),
                        seed: ctx.seed,
                        num_perm: k,
                        shingle: shingle.to_string(),
                        threads: t,
                        repeats: cfg.repeats,
                        shingles,
                        shingle_seconds: shingle_s,
                        sign_seconds: sign_s,
                        fused_seconds: fused_s,
                        fused_docs_per_s: texts.texts.len() as f64 / fused_s,
                        fused_mb_per_s: mb / fused_s,
                        shingle_mb_per_s: mb / shingle_s,
                        sign_shingles_per_s: shingles as f64 / sign_s,
                        signature_digest: format!("{digest:016x}"),
                        git_commit: ctx.meta.git_commit.clone(),
                        cpu_model: ctx.meta.cpu_model.clone(),
                    });
                }
            }
        }
    }
    Ok(rows)
}

/// Checks a b-bit cell's output: every packed signature unpacks to its b-bit slots, and those are the low `bits`
/// bits of the full-width kernel's slots on the same shingles (the all-`u32::MAX` empty signature aside).
fn check_packed(
    ctx: &Ctx,
    kname: &str,
    k: usize,
    bits: u32,
    ids: &[Vec<u64>],
    sigs: &[u32],
    packed: &[u64],
) -> Result<()> {
    let full = deps::kernel(kname, k, ctx.seed, ctx.dispatch)?;
    let w = bbit::words(k, bits);
    let bad = ids.par_iter().enumerate().find_any(|&(d, v)| {
        let sig = &sigs[d * k..(d + 1) * k];
        let words = &packed[d * w..(d + 1) * w];
        let mut want = vec![0u32; k];
        full.sign(v, &mut want);
        let cut_ok = v.is_empty()
            || sig
                .iter()
                .zip(&want)
                .all(|(&s, &f)| s == f & bbit::mask(bits));
        let packed_ok =
            (0..k).all(|i| bbit::unpack_slot(words, bits, i) == sig[i] & bbit::mask(bits));
        !(cut_ok && packed_ok)
    });
    match bad {
        None => Ok(()),
        Some((d, _)) => Err(ExperimentError::Mismatch(format!(
            "{} k={k}: document {d}'s packed {bits}-bit signature is not the low bits of {kname}'s slots",
            bits_name(kname, bits)
        ))),
    }
}

/// Runs a throughput experiment: a cell per (dataset, shingle) timing every kernel, k and thread count,
/// `throughput.csv`, the thread-count check, the summary and a figure.
pub fn run(ctx: &Ctx, cfg: &ThroughputConfig) -> Result<Checks> {
    let mut rows = Vec::new();
    // Cells run one at a time (they time themselves); each loads its dataset only when it must run.
    for ds in &cfg.datasets {
        let mut texts: Option<deps::Texts> = None;
        for shingle in &cfg.shingles {
            let got = ctx.cell(&cell_key(ctx, cfg, ds, shingle), || {
                if texts.is_none() {
                    texts = Some(deps::load_texts(ds, ctx.seed, ctx.dispatch)?);
                }
                run_cell(ctx, cfg, texts.as_ref().expect("loaded"), &ds.name, shingle)
            })?;
            rows.extend(got);
        }
    }
    write_csv(&ctx.file("throughput.csv")?, &rows)?;

    let mut checks = Checks::new("throughput");
    check_threads(&rows, &mut checks);

    let mut sections = vec![table_section(&rows)];
    let mut figs = Figures::new();
    sections.extend(figure(ctx, cfg, &rows, &mut figs)?);
    sections.extend(figs.not_drawn());
    write_summary(ctx, "Throughput", &sections, &checks)?;
    Ok(checks)
}

/// The cache key of one cell: the dataset, shingle, kernels, k values, thread counts, repeats, seed and widths.
fn cell_key(ctx: &Ctx, cfg: &ThroughputConfig, ds: &DatasetSpec, shingle: &str) -> CellKey {
    let key = CellKey::new()
        .with("dataset", &ds.name)
        .with(
            "docs",
            ds.limit
                .or(ds.docs)
                .map_or("all".to_string(), |n| n.to_string()),
        )
        .with("shingle", shingle)
        .with("kernels", cfg.kernels.join("-"))
        .with("k", dash_joined(&cfg.num_perm))
        .with("threads", dash_joined(&cfg.threads))
        .with("repeats", cfg.repeats)
        .with("seed", ctx.seed);
    // Full-width runs keep their old cell names.
    if cfg.bits == [32] {
        key
    } else {
        key.with("bits", dash_joined(&cfg.bits))
    }
}

/// The thread-count check: every row's signatures have the digest of the same cell at every other thread count.
fn check_threads(rows: &[ThroughputRow], checks: &mut Checks) {
    let mut mismatched = Vec::new();
    for r in rows {
        let other = rows.iter().find(|o| {
            o.dataset == r.dataset
                && o.shingle == r.shingle
                && o.kernel == r.kernel
                && o.num_perm == r.num_perm
                && o.threads != r.threads
        });
        if other.is_some_and(|o| o.signature_digest != r.signature_digest) {
            mismatched.push(format!(
                "{} {} {} k={}",
                r.dataset, r.shingle, r.kernel, r.num_perm
            ));
        }
    }
    mismatched.dedup();
    checks.expect(
        "signatures are identical for every thread count",
        mismatched.is_empty(),
        if mismatched.is_empty() {
            format!("{} rows compared by digest", rows.len())
        } else {
            mismatched.join("; ")
        },
    );
}

/// The throughput table (medians): fused, shingling and signing rates per row.
fn table_section(rows: &[ThroughputRow]) -> (String, String) {
    let mut t = Table::new(&[
        "dataset",
        "shingle",
        "kernel (ISA)",
        "k",
        "threads",
        "fused MB/s",
        "docs/s",
        "shingling MB/s",
        "signing Mshingles/s",
    ]);
    for r in rows {
        t.row(vec![
            format!(
                "{} ({} docs, {:.1} MB)",
                r.dataset,
                r.docs,
                r.bytes as f64 / 1e6
            ),
            r.shingle.clone(),
            format!("{} ({})", r.kernel, r.isa),
            r.num_perm.to_string(),
            r.threads.to_string(),
            f(r.fused_mb_per_s, 1),
            f(r.fused_docs_per_s, 0),
            f(r.shingle_mb_per_s, 1),
            f(r.sign_shingles_per_s / 1e6, 1),
        ]);
    }
    (
        "Throughput (medians)".into(),
        format!(
            "{}\nFused: text in, signatures out, per document. Shingling and signing are also timed apart \
             (signing from pre-split shingle ids).\n",
            t.to_markdown()
        ),
    )
}

/// The figure: fused MB/s against k per kernel and thread count, on the first dataset and shingle.
fn figure(
    ctx: &Ctx,
    cfg: &ThroughputConfig,
    rows: &[ThroughputRow],
    figs: &mut Figures,
) -> Result<Option<(String, String)>> {
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let mut c = Chart::new(
        format!(
            "{} ({}), text in, signatures out",
            first.dataset, first.shingle
        ),
        "k (slots)",
        "MB/s of text",
    );
    c.x_log2 = true;
    let mut threads: Vec<usize> = rows.iter().map(|r| r.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    for kern in &cfg.kernels {
        for (ti, &th) in threads.iter().enumerate() {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| {
                    r.dataset == first.dataset
                        && r.shingle == first.shingle
                        && &r.kernel == kern
                        && r.threads == th
                })
                .map(|r| (r.num_perm as f64, r.fused_mb_per_s))
                .collect();
            c.series.push(Series::new(
                format!("{kern}, {th} thread{}", if th == 1 { "" } else { "s" }),
                pts,
                if ti == 0 {
                    Style::LinePoints
                } else {
                    Style::Points
                },
                kernel_color(kern),
            ));
        }
    }
    Ok(figs
        .chart(ctx, "throughput", &c)?
        .map(|link| ("Figure".to_string(), link)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
