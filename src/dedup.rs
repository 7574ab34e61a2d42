//! The end-to-end dedup job behind `lshbench dedup`: read, shingle and sign the corpus (in parallel batches, in
//! input order), band the signatures, verify the candidate pairs, group them, and write pairs, groups and the kept
//! corpus, with a summary that accounts for every document and every pair the banding did not enumerate.
//!
//! Memory: signatures (n x k x 4 bytes) and the texts are kept; shingle sets are built only for documents that
//! appear in a candidate pair, after banding, and the texts are dropped as soon as nothing needs them.

pub mod state;

use crate::cli::args::KernelArgs;
use crate::cli::args::ReaderArgs;
use crate::cli::args::ShingleArgs;
use crate::exact;
use crate::kernel::Kernel;
use crate::lsh::cluster::{self, Edge, Group, GroupMode, GroupStats};
use crate::lsh::index::{self, BandHasher, CandidateStats};
use crate::lsh::scurve::{Banding, check_threshold};
use crate::lsh::tune;
use crate::shingle::Shingler;
use anyhow::{Context, bail};
use rayon::prelude::*;
use state::{State, StateParams};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

/// How candidate pairs are confirmed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Verify {
    /// Exact Jaccard of the two shingle sets >= threshold.
    #[default]
    Exact,
    /// The signatures' estimated Jaccard >= threshold.
    Estimate,
    /// Keep every candidate.
    None,
}

impl Verify {
    fn name(self) -> &'static str {
        match self {
            Verify::Exact => "exact",
            Verify::Estimate => "estimate",
            Verify::None => "none",
        }
    }
}

/// `lshbench dedup`: near-duplicate pairs and groups of a corpus.
#[derive(clap::Args, Debug, Clone)]
#[command(mut_arg("kernel", |a| a.default_value("oph-opt")))]
pub struct DedupArgs {
    #[command(flatten)]
    pub reader: ReaderArgs,
    #[command(flatten)]
    pub shingle: ShingleArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
    /// Number of bands b (with --rows). Without both, --threshold picks (b, r) by the default rule.
    #[arg(long)]
    pub bands: Option<usize>,
    /// Rows per band r (with --bands).
    #[arg(long)]
    pub rows: Option<usize>,
    /// Similarity threshold in (0, 1] for verification [default: 0.5]. Alone, it also picks (b, r): the banding
    /// with P(threshold) >= 0.99 and the smallest P(threshold/2).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// How candidates are confirmed: exact shingle Jaccard, the signature estimate, or none.
    #[arg(long, value_enum, default_value_t = Verify::Exact)]
    pub verify: Verify,
    /// Grouping: connected components, or `center` (every member has a verified pair with its group's centre).
    #[arg(long, value_enum, default_value_t = GroupMode::Components)]
    pub groups: GroupMode,
    /// Write the verified pairs as CSV (id_a,id_b,estimate,jaccard,verified_by).
    #[arg(long, value_name = "CSV")]
    pub pairs: Option<PathBuf>,
    /// Write group membership as CSV (group,id,size,center,is_center,similarity_to_center).
    #[arg(long, value_name = "CSV")]
    pub clusters: Option<PathBuf>,
    /// Write one row per group as CSV: size, centre, edge and member-pair similarity, chaining counts.
    #[arg(long, value_name = "CSV")]
    pub group_report: Option<PathBuf>,
    /// Write the kept corpus as JSONL {"id","text"}: every document read that is not removed as a duplicate
    /// (singletons, empty documents and each group's centre), in input order.
    #[arg(long, value_name = "JSONL")]
    pub kept: Option<PathBuf>,
    /// Buckets (and classes of identical signatures) larger than this are enumerated as a star; the pairs left
    /// out are counted in the summary.
    #[arg(long, default_value_t = index::DEFAULT_BUCKET_CAP)]
    pub bucket_cap: usize,
    /// Stop with an error when banding emits more candidate pairs than this (counted once per band): a guard
    /// against an S-curve far too permissive for the corpus, which would otherwise exhaust memory.
    #[arg(long, default_value_t = 20_000_000)]
    pub max_candidates: u64,
    /// Member pairs examined per group for the chaining columns; larger groups are sampled (seeded).
    #[arg(long, default_value_t = 2000)]
    pub pair_budget: usize,
    /// Load signatures from a saved state first; only pairs involving a newly read document are reported.
    #[arg(long, value_name = "STATE")]
    pub load: Option<PathBuf>,
    /// Save the signatures of every document (loaded and new) for a later --load.
    #[arg(long, value_name = "STATE")]
    pub save: Option<PathBuf>,
    /// Worker threads (default: all logical CPUs).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// The banding a run uses and why.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BandingChoice {
    pub banding: Banding,
    pub threshold: f64,
    /// Whether --bands/--rows were given (else the default rule picked them).
    pub explicit: bool,
}

/// Resolves --bands/--rows/--threshold, with the errors the issue asks for.
pub fn choose_banding(
    bands: Option<usize>,
    rows: Option<usize>,
    threshold: Option<f64>,
    num_perm: usize,
) -> anyhow::Result<BandingChoice> {
    let t = check_threshold(threshold.unwrap_or(0.5))?;
    match (bands, rows) {
        (Some(b), Some(r)) => {
            let banding = Banding::new(b, r, num_perm)?;
            let p = banding.probability(t);
            if threshold.is_some() && p < 0.5 {
                let suggestion = tune::default_banding(num_perm, t)?;
                bail!(
                    "--threshold {t} contradicts --bands {b} --rows {r}: that banding finds pairs of similarity {t} \
                     with probability only {p:.4}. It implies a threshold near {:.4} (P = 1/2 there; rule of thumb \
                     (1/b)^(1/r) = {:.4}). Drop --bands/--rows to let the tuner pick ({} bands x {} rows, \
                     P({t}) = {:.4}), or lower --threshold.",
                    banding.half_point(),
                    banding.rule_of_thumb(),
                    suggestion.bands,
                    suggestion.rows,
                    suggestion.probability(t)
                );
            }
            Ok(BandingChoice {
                banding,
                threshold: t,
                explicit: true,
            })
        }
        (None, None) => Ok(BandingChoice {
            banding: tune::default_banding(num_perm, t)?,
            threshold: t,
            explicit: false,
        }),
        (Some(_), None) => {
            bail!("--bands needs --rows too (or give neither and let --threshold pick them)")
        }
        (None, Some(_)) => {
            bail!("--rows needs --bands too (or give neither and let --threshold pick them)")
        }
    }
}

/// A candidate pair after verification.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckedPair {
    pub a: u32,
    pub b: u32,
    pub estimate: f64,
    /// Exact Jaccard when both shingle sets were available and `--verify exact`.
    pub jaccard: Option<f64>,
}

/// Everything a run computed, for the writers, the summary and the tests.
pub struct DedupOutcome {
    pub ids: Vec<String>,
    /// Documents 0..loaded came from the state file.
    pub loaded: usize,
    pub empty_documents: u64,
    pub candidates: CandidateStats,
    pub verified: Vec<CheckedPair>,
    pub groups: Vec<Group>,
    pub group_stats: Vec<GroupStats>,
    /// Similarity of each group member to its group's centre, per group, in member order.
    pub to_center: Vec<Vec<f64>>,
    pub choice: BandingChoice,
    pub stage_seconds: Vec<(&'static str, f64)>,
}

pub fn run(args: &DedupArgs) -> anyhow::Result<()> {
    match args.threads {
        Some(0) => bail!("--threads must be at least 1"),
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .context("building the thread pool")?
            .install(|| run_inner(args)),
        None => run_inner(args),
    }
}

fn progress(len_hint: Option<u64>) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = match len_hint {
        Some(n) => indicatif::ProgressBar::new(n),
        None => indicatif::ProgressBar::new_spinner(),
    };
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} {pos} documents [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    pb.set_message("reading and signing");
    pb
}

fn run_inner(args: &DedupArgs) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let kernel = args.kernel.build()?;
    let k = kernel.num_perm();
    let choice = choose_banding(args.bands, args.rows, args.threshold, k)?;
    if args.bucket_cap < 2 {
        bail!("--bucket-cap must be at least 2");
    }
    let shingler = args.shingle.shingler(args.kernel.seed, args.kernel.isa())?;
    let params = StateParams {
        kernel: kernel.name().to_string(),
        num_perm: k,
        seed: args.kernel.seed,
        shingle: args.shingle.shingle.to_string(),
        lowercase: args.shingle.lowercase,
        collapse_whitespace: args.shingle.collapse_whitespace,
        strip_punctuation: args.shingle.strip_punctuation,
    };
    let mut corpus = Corpus::default();
    if let Some(path) = &args.load {
        let state = State::load(path)?;
        state.check_compatible(&params, path)?;
        corpus.ids = state.ids;
        corpus.empty = state.empty;
        corpus.signatures = state.signatures;
        corpus.loaded = corpus.ids.len();
    }
    let keep_text = args.verify == Verify::Exact || args.kept.is_some();
    let mut reader = args.reader.open()?;
    let pb = progress(None);
    crate::pipeline::sketch_corpus(&mut reader, &shingler, kernel.as_ref(), |batch| {
        pb.inc(batch.docs.len() as u64);
        corpus.signatures.extend_from_slice(&batch.signatures);
        corpus.empty.extend_from_slice(&batch.empty);
        for doc in batch.docs {
            corpus.ids.push(doc.id);
            corpus
                .texts
                .push(if keep_text { doc.text } else { String::new() });
        }
        Ok::<(), anyhow::Error>(())
    })?;
    pb.finish_and_clear();
    let read_stats = reader.stats().clone();
    let t_read = t0.elapsed().as_secs_f64();
    if let Some(path) = &args.save {
        state::save_parts(
            path,
            &params,
            &corpus.ids,
            &corpus.empty,
            &corpus.signatures,
        )?;
    }
    let t_save = t0.elapsed().as_secs_f64();
    let config = DedupConfig {
        choice,
        verify: args.verify,
        groups: args.groups,
        bucket_cap: args.bucket_cap,
        pair_budget: args.pair_budget,
        seed: args.kernel.seed,
        max_candidates: args.max_candidates,
    };
    let mut outcome = dedup_signed(
        &mut corpus,
        kernel.as_ref(),
        &shingler,
        &config,
        args.kept.is_some(),
    )
    .with_context(|| {
        format!(
            "banding {} bands x {} rows",
            choice.banding.bands, choice.banding.rows
        )
    })?;
    outcome
        .stage_seconds
        .insert(0, ("read+shingle+sign", t_read));
    if args.save.is_some() {
        outcome
            .stage_seconds
            .insert(1, ("save state", t_save - t_read));
    }
    let t_write = Instant::now();
    if let Some(p) = &args.pairs {
        write_pairs(p, &outcome, args.verify)?;
    }
    if let Some(p) = &args.clusters {
        write_clusters(p, &outcome)?;
    }
    if let Some(p) = &args.group_report {
        write_group_report(p, &outcome, args.verify)?;
    }
    if let Some(p) = &args.kept {
        write_kept(p, &outcome, &corpus.texts)?;
    }
    outcome
        .stage_seconds
        .push(("write", t_write.elapsed().as_secs_f64()));
    let total = t0.elapsed().as_secs_f64();
    print!("{}", summary(&outcome, &read_stats, args, total));
    Ok(())
}

/// Documents in memory: ids, signatures and empty flags for all (loaded first), texts for the ones read now.
#[derive(Default)]
pub struct Corpus {
    pub ids: Vec<String>,
    pub empty: Vec<bool>,
    pub signatures: Vec<u32>,
    /// Texts of documents `loaded..`, in order (empty strings when not kept).
    pub texts: Vec<String>,
    pub loaded: usize,
}

/// The knobs of [`dedup_signed`].
#[derive(Clone, Copy, Debug)]
pub struct DedupConfig {
    pub choice: BandingChoice,
    pub verify: Verify,
    pub groups: GroupMode,
    pub bucket_cap: usize,
    pub pair_budget: usize,
    pub seed: u64,
    pub max_candidates: u64,
}

/// Bands, verifies and groups an already signed corpus. Texts are released unless `keep_texts`.
pub fn dedup_signed(
    corpus: &mut Corpus,
    kernel: &dyn Kernel,
    shingler: &Shingler,
    config: &DedupConfig,
    keep_texts: bool,
) -> Result<DedupOutcome, index::TooManyCandidates> {
    let k = kernel.num_perm();
    let n = corpus.ids.len();
    let t = config.choice.threshold;
    let mut stages = Vec::new();

    // Band.
    let t_band = Instant::now();
    // The band hash seed is derived from the kernel seed; it only has to be fixed within a run.
    let hasher = BandHasher::new(config.choice.banding, config.seed ^ 0x4c53_4842_414e_4453);
    let mut cands = index::batch_candidates_limited(
        &corpus.signatures,
        k,
        &corpus.empty,
        &hasher,
        config.bucket_cap,
        config.max_candidates,
    )?;
    if corpus.loaded > 0 {
        // Pairs among loaded documents were reported by the run that saved them.
        let loaded = corpus.loaded as u32;
        cands.pairs.retain(|&(_, b)| b >= loaded);
        cands.stats.candidates = cands.pairs.len() as u64;
    }
    stages.push(("band", t_band.elapsed().as_secs_f64()));

    // Verify. Shingle sets only for documents in some candidate pair (and read in this run).
    let t_verify = Instant::now();
    let sig = |i: u32| &corpus.signatures[i as usize * k..(i as usize + 1) * k];
    let mut sets: Vec<Option<Vec<u64>>> = vec![None; n];
    if config.verify == Verify::Exact {
        let mut needed: Vec<u32> = cands.pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
        needed.par_sort_unstable();
        needed.dedup();
        needed.retain(|&i| i as usize >= corpus.loaded);
        let built: Vec<(u32, Vec<u64>)> = needed
            .par_iter()
            .map(|&i| {
                (
                    i,
                    exact::shingle_set(shingler, &corpus.texts[i as usize - corpus.loaded]),
                )
            })
            .collect();
        for (i, s) in built {
            sets[i as usize] = Some(s);
        }
        if !keep_texts {
            corpus.texts = Vec::new();
        }
    }
    stages.push(("shingle sets", t_verify.elapsed().as_secs_f64()));
    let t_verify = Instant::now();
    let verified: Vec<CheckedPair> = cands
        .pairs
        .par_iter()
        .filter_map(|&(a, b)| {
            let estimate = kernel.estimate(sig(a), sig(b));
            let jaccard = match (&sets[a as usize], &sets[b as usize]) {
                (Some(x), Some(y)) => {
                    // Length filter: J <= min/max, so a pair whose sizes differ too much fails without a merge
                    // (the rounded ratio bounds the rounded J from above, so no pair at or above t is lost).
                    let (lo, hi) = (x.len().min(y.len()), x.len().max(y.len()));
                    if (lo as f64) / (hi as f64) < t {
                        return None;
                    }
                    let need = exact::required_overlap(t, x.len(), y.len());
                    let inter = exact::intersection_at_least(x, y, need)?;
                    Some(exact::jaccard_from_counts(inter, x.len(), y.len()))
                }
                _ => None,
            };
            let keep = match config.verify {
                Verify::None => true,
                Verify::Estimate => estimate >= t,
                // A loaded document has no text: its pairs fall back to the estimate (said in the pairs file).
                Verify::Exact => jaccard.unwrap_or(estimate) >= t,
            };
            keep.then_some(CheckedPair {
                a,
                b,
                estimate,
                jaccard,
            })
        })
        .collect();
    stages.push(("verify", t_verify.elapsed().as_secs_f64()));

    // Group.
    let t_group = Instant::now();
    let edges: Vec<Edge> = verified
        .iter()
        .map(|p| Edge {
            a: p.a,
            b: p.b,
            similarity: p.jaccard.unwrap_or(p.estimate),
        })
        .collect();
    let groups = cluster::group(n, &edges, config.groups);
    let similarity = |a: u32, b: u32| match (&sets[a as usize], &sets[b as usize]) {
        (Some(x), Some(y)) => exact::jaccard(x, y),
        _ => kernel.estimate(sig(a), sig(b)),
    };
    // Edges per group, by the group of each edge's first document.
    let mut group_of = vec![u32::MAX; n];
    for (g, grp) in groups.iter().enumerate() {
        for &m in &grp.members {
            group_of[m as usize] = g as u32;
        }
    }
    let mut edges_by_group: Vec<Vec<Edge>> = vec![Vec::new(); groups.len()];
    for e in &edges {
        let (ga, gb) = (group_of[e.a as usize], group_of[e.b as usize]);
        if ga != u32::MAX && ga == gb {
            edges_by_group[ga as usize].push(*e);
        }
    }
    let group_stats: Vec<GroupStats> = groups
        .par_iter()
        .zip(edges_by_group.par_iter())
        .map(|(g, es)| cluster::group_stats(g, es, t, config.pair_budget, config.seed, similarity))
        .collect();
    let to_center: Vec<Vec<f64>> = groups
        .par_iter()
        .map(|g| {
            g.members
                .iter()
                .map(|&m| {
                    if m == g.center {
                        1.0
                    } else {
                        similarity(m, g.center)
                    }
                })
                .collect()
        })
        .collect();
    stages.push(("group", t_group.elapsed().as_secs_f64()));

    Ok(DedupOutcome {
        ids: std::mem::take(&mut corpus.ids),
        loaded: corpus.loaded,
        empty_documents: corpus.empty[corpus.loaded..].iter().filter(|&&e| e).count() as u64,
        candidates: cands.stats,
        verified,
        groups,
        group_stats,
        to_center,
        choice: config.choice,
        stage_seconds: stages,
    })
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.6}")).unwrap_or_default()
}

fn fmt_f(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x:.6}")
    }
}

fn write_pairs(path: &std::path::Path, o: &DedupOutcome, verify: Verify) -> anyhow::Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    w.write_record(["id_a", "id_b", "estimate", "jaccard", "verified_by"])?;
    for p in &o.verified {
        let by = match (verify, p.jaccard) {
            (Verify::Exact, Some(_)) => "exact",
            (Verify::Exact, None) => "estimate (loaded document, no text)",
            (v, _) => v.name(),
        };
        w.write_record([
            o.ids[p.a as usize].as_str(),
            o.ids[p.b as usize].as_str(),
            &format!("{:.6}", p.estimate),
            &fmt_opt(p.jaccard),
            by,
        ])?;
    }
    w.flush()?;
    Ok(())
}

fn write_clusters(path: &std::path::Path, o: &DedupOutcome) -> anyhow::Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    w.write_record([
        "group",
        "id",
        "size",
        "center",
        "is_center",
        "similarity_to_center",
    ])?;
    for (g, (grp, sims)) in o.groups.iter().zip(&o.to_center).enumerate() {
        for (&m, &s) in grp.members.iter().zip(sims) {
            w.write_record([
                g.to_string().as_str(),
                o.ids[m as usize].as_str(),
                &grp.members.len().to_string(),
                o.ids[grp.center as usize].as_str(),
                if m == grp.center { "1" } else { "0" },
                &fmt_f(s),
            ])?;
        }
    }
    w.flush()?;
    Ok(())
}

fn write_group_report(
    path: &std::path::Path,
    o: &DedupOutcome,
    verify: Verify,
) -> anyhow::Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    w.write_record([
        "group",
        "size",
        "center",
        "edges",
        "min_edge",
        "mean_edge",
        "similarity",
        "pairs_examined",
        "pairs_basis",
        "min_pair",
        "mean_pair",
        "pairs_below_threshold",
        "pairs_disjoint",
    ])?;
    let basis = if verify == Verify::Exact {
        "exact"
    } else {
        "estimate"
    };
    for (g, (grp, s)) in o.groups.iter().zip(&o.group_stats).enumerate() {
        w.write_record([
            g.to_string().as_str(),
            &s.size.to_string(),
            o.ids[grp.center as usize].as_str(),
            &s.edges.to_string(),
            &fmt_f(s.min_edge),
            &fmt_f(s.mean_edge),
            basis,
            &s.pairs_examined.to_string(),
            if s.sampled { "sample" } else { "all" },
            &fmt_f(s.min_pair),
            &fmt_f(s.mean_pair),
            &s.pairs_below_threshold.to_string(),
            &s.pairs_disjoint.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

/// The documents removed as duplicates: every group member except its centre.
fn removed(o: &DedupOutcome) -> Vec<bool> {
    let mut out = vec![false; o.ids.len()];
    for g in &o.groups {
        for &m in &g.members {
            out[m as usize] = m != g.center;
        }
    }
    out
}

fn write_kept(path: &std::path::Path, o: &DedupOutcome, texts: &[String]) -> anyhow::Result<()> {
    let removed = removed(o);
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    for (j, text) in texts.iter().enumerate() {
        let i = o.loaded + j;
        if !removed[i] {
            serde_json::to_writer(&mut w, &serde_json::json!({"id": o.ids[i], "text": text}))?;
            w.write_all(b"\n")?;
        }
    }
    w.flush()?;
    Ok(())
}

fn summary(
    o: &DedupOutcome,
    read: &crate::corpus::ReadStats,
    args: &DedupArgs,
    total: f64,
) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let c = &o.candidates;
    let b = o.choice.banding;
    let t = o.choice.threshold;
    let _ = writeln!(s, "{}", read.report());
    let new_docs = o.ids.len() - o.loaded;
    let _ = writeln!(
        s,
        "documents: {new_docs} read now{}, {} empty (never candidates), {} banded",
        if o.loaded > 0 {
            format!(" + {} loaded from state", o.loaded)
        } else {
            String::new()
        },
        o.empty_documents,
        c.documents
    );
    let _ = writeln!(
        s,
        "banding: {} bands x {} rows ({}); P({t}) = {:.4}, P = 1/2 at s = {:.4}",
        b.bands,
        b.rows,
        if o.choice.explicit {
            "given".to_string()
        } else {
            format!("default rule for --threshold {t}: P(t) >= 0.99, then the smallest P(t/2)")
        },
        b.probability(t),
        b.half_point()
    );
    if o.choice.explicit && b.probability(t) < 0.5 {
        // An explicit --threshold that contradicts the banding is refused in `choose_banding`; the default
        // threshold is not refused (the banding was the user's choice), but the contradiction is said plainly.
        let _ = writeln!(
            s,
            "warning: this banding finds pairs at the verification threshold {t} (the default) with probability \
             only {:.4}; pass --threshold to say which similarity you are after",
            b.probability(t)
        );
    }
    let _ = writeln!(
        s,
        "candidates: {} pairs; {} classes of identical banded signatures hold {} documents (largest {}); largest \
         bucket {} documents",
        c.candidates,
        c.duplicate_classes,
        c.documents_in_duplicate_classes,
        c.largest_duplicate_class,
        c.largest_bucket
    );
    if c.pairs_not_enumerated > 0 {
        let _ = writeln!(
            s,
            "NOT ENUMERATED: {} buckets over --bucket-cap {} were walked as stars; {} pairs sharing a band (counted \
             once per band) were not listed. Their documents stay connected through the star's centre.",
            c.capped_groups, args.bucket_cap, c.pairs_not_enumerated
        );
    }
    let _ = writeln!(
        s,
        "verified ({}{}): {} pairs",
        args.verify.name(),
        if args.verify == Verify::None {
            String::new()
        } else {
            format!(", similarity >= {t}")
        },
        o.verified.len()
    );
    let in_groups: usize = o.groups.iter().map(|g| g.members.len()).sum();
    let largest = o.groups.iter().map(|g| g.members.len()).max().unwrap_or(0);
    let chained = o
        .group_stats
        .iter()
        .filter(|g| g.pairs_below_threshold > 0)
        .count();
    let disjoint = o
        .group_stats
        .iter()
        .filter(|g| g.pairs_disjoint > 0)
        .count();
    let _ = writeln!(
        s,
        "groups ({:?}): {} groups of 2+ documents covering {in_groups}; largest {largest}; {chained} with a member \
         pair below the threshold, {disjoint} with a member pair sharing no shingle",
        args.groups,
        o.groups.len()
    );
    let _ = writeln!(
        s,
        "kept: {} documents, {} removed as duplicates",
        new_docs - removed(o)[o.loaded..].iter().filter(|&&r| r).count(),
        removed(o)[o.loaded..].iter().filter(|&&r| r).count()
    );
    let mut order: Vec<usize> = (0..o.groups.len()).collect();
    order.sort_by_key(|&g| (std::cmp::Reverse(o.groups[g].members.len()), g));
    if !order.is_empty() {
        let _ = writeln!(
            s,
            "largest groups (member pairs: min/mean similarity, below threshold, sharing nothing):"
        );
        for &g in order.iter().take(5) {
            let st = &o.group_stats[g];
            let _ = writeln!(
                s,
                "  group {g}: {} documents, centre {}, {} {} pairs: min {:.3} mean {:.3}, {} below {t}, {} disjoint",
                st.size,
                o.ids[o.groups[g].center as usize],
                if st.sampled { "sampled" } else { "all" },
                st.pairs_examined,
                st.min_pair,
                st.mean_pair,
                st.pairs_below_threshold,
                st.pairs_disjoint
            );
        }
    }
    let stages: Vec<String> = o
        .stage_seconds
        .iter()
        .map(|(n, x)| format!("{n} {x:.3} s"))
        .collect();
    let _ = writeln!(s, "time: {}; total {total:.3} s", stages.join(", "));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banding_choice_errors_are_clear() {
        let e = |b, r, t| choose_banding(b, r, t, 128).unwrap_err().to_string();
        assert!(e(Some(43), Some(3), None).contains("129 slots"));
        assert!(e(Some(0), Some(3), None).contains("--bands must be at least 1"));
        assert!(e(Some(3), Some(0), None).contains("--rows must be at least 1"));
        assert!(e(None, None, Some(0.0)).contains("outside (0, 1]"));
        assert!(e(None, None, Some(1.2)).contains("outside (0, 1]"));
        assert!(e(Some(4), None, None).contains("--bands needs --rows"));
        let msg = e(Some(5), Some(25), Some(0.5));
        assert!(msg.contains("contradicts --bands 5 --rows 25"), "{msg}");
        assert!(msg.contains("35 bands x 3 rows"), "{msg}");
        let ok = choose_banding(Some(42), Some(3), Some(0.5), 128).unwrap();
        assert!(ok.explicit);
        let auto = choose_banding(None, None, Some(0.5), 128).unwrap();
        assert_eq!(auto.banding, Banding { bands: 35, rows: 3 });
        assert!(!auto.explicit);
    }
}
