//! The end-to-end dedup job: read, shingle and sign the corpus (in parallel batches, in input order), band the
//! signatures, verify the candidate pairs, group them, and write pairs, groups and the kept corpus, with a summary
//! that accounts for every document and every pair the banding did not enumerate. `lshbench dedup` (in
//! `cli::dedup`) is its command-line front end; [`run`] is the whole job, [`dedup_signed`] the part after signing.
//!
//! Memory: signatures (n x k x 4 bytes) and the texts are kept; shingle sets are built only for documents that
//! appear in a candidate pair, after banding, and the texts are dropped as soon as nothing needs them.
//!
//! The work runs on the current rayon pool; the outputs do not depend on its size.

mod error;
pub mod external;
pub mod kept;
mod memory;
mod options;
mod outcome;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod spill;
pub mod state;
mod steps;
pub mod survivor;
#[cfg(feature = "arrow")]
pub mod tables;
mod write;

pub use error::DedupError;
pub use options::{
    DEFAULT_MAX_CANDIDATES, DEFAULT_PAIR_BUDGET, DedupConfig, DedupOptions, DedupOutputs, Verify,
};
pub use outcome::{CheckedPair, DedupOutcome, DedupReport, kept_mask};
pub use steps::{check_pair, short_documents, text_length};
use steps::{check_rank_field, group_verified, short_removals, unband_short};
use write::write_outputs;
pub use write::{write_clusters, write_group_report, write_pairs, write_removed};

use crate::corpus::{CorpusReader, ReadError};
use crate::exec::Progress;
use crate::kernel::Kernel;
use crate::lsh::choice::band_hasher;
use crate::lsh::cluster::{self, GroupStats};
use crate::lsh::index::{self};
use crate::sets;
use crate::shingle::Shingler;
use rayon::prelude::*;
use state::{State, StateParams};
use std::time::Instant;

/// The whole job on the current rayon pool: checks the options, loads the state (if any), reads and signs the
/// corpus (counting documents into `progress`), saves the state (if asked), bands, verifies and groups, and
/// writes the outputs `options` names. `kernel` and `shingler` must be made with `options.seed`.
pub fn run(
    reader: &mut CorpusReader,
    shingler: &Shingler,
    kernel: &dyn Kernel,
    options: &DedupOptions,
    progress: &dyn Progress,
) -> Result<DedupReport, DedupError> {
    let t0 = Instant::now();
    let config = options.config(kernel.num_perm(), kernel.slot_bits())?;
    #[cfg(not(feature = "parquet"))]
    write::refuse_parquet_outputs(&options.outputs)?;
    if let Some(target) = &options.outputs.kept {
        kept::check_target(reader.path(), &target.path)?;
        if !kept::is_directory_target(
            &target.path,
            reader.format() == crate::corpus::InputFormat::Dir,
        ) {
            kept::check_named_form(&target.path, reader.format())?;
        }
    }
    if let Some(limit) = &options.memory_limit {
        return external::run(reader, shingler, kernel, options, limit, config, progress);
    }
    let params = StateParams::new(kernel, shingler, options.seed);
    let mut corpus = Corpus::default();
    if let Some(path) = &options.load {
        let state = State::load(path)?;
        state.check_compatible(&params, path)?;
        corpus.ids = state.ids;
        corpus.empty = state.empty;
        corpus.signatures = state.signatures;
        corpus.loaded = corpus.ids.len();
    }
    let outputs = &options.outputs;
    let keep_text = options.verify == Verify::Exact;
    let arena = sets::SetArena::tuned(&options.tuning);
    check_rank_field(options, reader)?;
    corpus.short = options.short;
    corpus.keep = options.keep.clone();
    let mut rank_inputs = survivor::RankInputs::default();
    let read_result = crate::pipeline::sketch_corpus(reader, shingler, kernel, |batch| {
        progress.inc(batch.docs.len() as u64);
        let first = corpus.ids.len();
        corpus.short_docs.extend(
            unband_short(batch, shingler, options.short)
                .into_iter()
                .map(|i| (first + i) as u32),
        );
        corpus.signatures.extend_from_slice(&batch.signatures);
        corpus.empty.extend_from_slice(&batch.empty);
        for doc in &mut batch.docs {
            if options.keep.needs_lengths() {
                rank_inputs.lengths.push(text_length(&doc.text));
            }
            corpus.ids.push(std::mem::take(&mut doc.id));
            corpus.texts.push(if keep_text {
                std::mem::take(&mut doc.text)
            } else {
                String::new()
            });
        }
        Ok::<(), ReadError>(())
    });
    read_result?;
    let read = reader.stats().clone();
    rank_inputs.values = reader.take_rank_values();
    corpus.rank = survivor::ranking(
        &options.keep,
        corpus.loaded,
        corpus.ids.len() - corpus.loaded,
        &rank_inputs,
        &corpus.ids,
    )?;
    drop(rank_inputs);
    let t_read = t0.elapsed().as_secs_f64();
    if let Some(path) = &options.save {
        progress.stage("saving state");
        state::save_parts(
            path,
            &params,
            &corpus.ids,
            &corpus.empty,
            &corpus.signatures,
        )?;
    }
    let t_save = t0.elapsed().as_secs_f64();
    progress.stage("banding, verifying, grouping");
    let outcome = dedup_signed_in(&mut corpus, kernel, shingler, &config, false, &arena);
    let mut outcome = outcome?;
    outcome
        .stage_seconds
        .insert(0, ("read+shingle+sign", t_read));
    if options.save.is_some() {
        outcome
            .stage_seconds
            .insert(1, ("save state", t_save - t_read));
    }
    progress.stage("writing");
    let t_write = Instant::now();
    drop(corpus);
    write_outputs(outputs, &outcome, reader)?;
    outcome
        .stage_seconds
        .push(("write", t_write.elapsed().as_secs_f64()));
    Ok(DedupReport {
        outcome,
        read,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Documents in memory: ids, signatures and empty flags for all (loaded first), texts for the ones read now.
#[derive(Default)]
pub struct Corpus {
    /// Ids by position.
    pub ids: Vec<String>,
    /// Whether each document's shingle set was empty.
    pub empty: Vec<bool>,
    /// `ids.len() * num_perm` slots, row-major.
    pub signatures: Vec<u32>,
    /// Texts of documents `loaded..`, in order (empty strings when not kept).
    pub texts: Vec<String>,
    /// Documents `0..loaded` came from a saved state (and have no text).
    pub loaded: usize,
    /// The survivor ranking ([`survivor::ranking`]; `None`: each group's most connected member survives).
    pub rank: Option<Vec<u32>>,
    /// The short documents read now, when the short-document policy takes them out of banding (they are
    /// marked empty).
    pub short_docs: Vec<u32>,
    /// What happens to short documents.
    pub short: survivor::Short,
    /// The survivor policy `rank` comes from (recorded in the outcome and the audit).
    pub keep: survivor::Keep,
}

/// Bands, verifies and groups an already signed corpus. Texts are released unless `keep_texts`.
pub fn dedup_signed(
    corpus: &mut Corpus,
    kernel: &dyn Kernel,
    shingler: &Shingler,
    config: &DedupConfig,
    keep_texts: bool,
) -> Result<DedupOutcome, DedupError> {
    let arena = sets::SetArena::new();
    dedup_signed_in(corpus, kernel, shingler, config, keep_texts, &arena)
}

/// [`dedup_signed`] with the verification sets' arrays taken from `arena`.
fn dedup_signed_in(
    corpus: &mut Corpus,
    kernel: &dyn Kernel,
    shingler: &Shingler,
    config: &DedupConfig,
    keep_texts: bool,
    arena: &sets::SetArena,
) -> Result<DedupOutcome, DedupError> {
    let k = kernel.num_perm();
    let n = corpus.ids.len();
    let t = config.choice.threshold;
    let mut stages = Vec::new();

    // Band.
    let t_band = Instant::now();
    // The band hash seed is derived from the kernel seed.
    let hasher = band_hasher(config.choice.banding, config.seed);
    let mut cands = index::batch_candidates_limited(
        &corpus.signatures,
        k,
        &corpus.empty,
        &hasher,
        config.bucket_cap,
        config.max_candidates,
    )
    .map_err(|cause| DedupError::TooManyCandidates {
        banding: config.choice.banding,
        cause,
    })?;
    if corpus.loaded > 0 {
        // Pairs among loaded documents were reported by the run that saved them.
        let loaded = corpus.loaded as u32;
        cands.pairs.retain(|&(_, b)| b >= loaded);
        cands.stats.candidates = cands.pairs.len() as u64;
    }
    stages.push(("band", t_band.elapsed().as_secs_f64()));

    // Verify. Shingle sets only for documents in some candidate pair (and read in this run).
    let t_verify = Instant::now();
    let sets = if config.verify == Verify::Exact {
        candidate_sets(corpus, shingler, &cands.pairs, keep_texts, arena)
    } else {
        vec![None; n]
    };
    stages.push(("shingle sets", t_verify.elapsed().as_secs_f64()));
    let sig = |i: u32| &corpus.signatures[i as usize * k..(i as usize + 1) * k];
    let t_verify = Instant::now();
    let verified: Vec<CheckedPair> = cands
        .pairs
        .par_iter()
        .filter_map(|&(a, b)| {
            let estimate = || kernel.estimate(sig(a), sig(b));
            let sets = match (&sets[a as usize], &sets[b as usize]) {
                (Some(x), Some(y)) => Some((x, y)),
                // A loaded document has no text: its pairs fall back to the estimate (said in the pairs file).
                _ => None,
            };
            check_pair(config.verify, t, a, b, estimate, sets, shingler.dispatch())
        })
        .collect();
    stages.push(("verify", t_verify.elapsed().as_secs_f64()));

    // Group.
    let t_group = Instant::now();
    let (groups, edges_by_group) =
        group_verified(n, &verified, config.groups, corpus.rank.as_deref());
    // The exact similarities verification already computed: most member pairs a group's statistics examine,
    // and most members' pairs with their centre, are verified pairs. Only exact values are reused: they are
    // the same whichever way round the pair is taken (the estimate is computed afresh, as before).
    let verified_exact: rustc_hash::FxHashMap<(u32, u32), f64> = verified
        .iter()
        .filter_map(|p| p.jaccard.map(|j| ((p.a.min(p.b), p.a.max(p.b)), j)))
        .collect();
    let similarity = |a: u32, b: u32| {
        if let Some(&j) = verified_exact.get(&(a.min(b), a.max(b))) {
            return j;
        }
        match (&sets[a as usize], &sets[b as usize]) {
            (Some(x), Some(y)) => x.jaccard(y, shingler.dispatch()),
            _ => kernel.estimate(sig(a), sig(b)),
        }
    };
    // The pairs of a large group are spread over the threads (one group of 61 mails has 1,830 pairs, and would
    // otherwise be one thread's work while the other waits); the statistics are folded in pair order.
    let group_stats: Vec<GroupStats> = groups
        .par_iter()
        .zip(edges_by_group.par_iter())
        .map(|(g, es)| {
            let pairs = cluster::stats_pairs(g, config.pair_budget, config.seed);
            let similarities: Vec<f64> = pairs
                .par_iter()
                .with_min_len(64)
                .map(|&(a, b)| similarity(a, b))
                .collect();
            cluster::group_stats_from(g, es, t, config.pair_budget, &similarities)
        })
        .collect();
    let to_center: Vec<Vec<f64>> = groups
        .par_iter()
        .map(|g| {
            g.members
                .par_iter()
                .with_min_len(64)
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
    let short_removed = short_removals(corpus.short, &corpus.short_docs);

    Ok(DedupOutcome {
        ids: std::mem::take(&mut corpus.ids),
        loaded: corpus.loaded,
        empty_documents: corpus.empty[corpus.loaded..].iter().filter(|&&e| e).count() as u64,
        candidates: cands.stats,
        verified,
        groups,
        group_stats,
        to_center,
        keep: corpus.keep.clone(),
        short: corpus.short,
        short_removed,
        config: *config,
        stage_seconds: stages,
    })
}

/// The verification sets of the documents read in this run that are in some candidate pair (`None` for the
/// others); the texts are dropped afterwards unless `keep_texts`.
fn candidate_sets(
    corpus: &mut Corpus,
    shingler: &Shingler,
    pairs: &[(u32, u32)],
    keep_texts: bool,
    arena: &sets::SetArena,
) -> Vec<Option<sets::SplitSet>> {
    let mut sets: Vec<Option<sets::SplitSet>> = vec![None; corpus.ids.len()];

    let mut needed: Vec<u32> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    needed.par_sort_unstable();
    needed.dedup();
    needed.retain(|&i| i as usize >= corpus.loaded);
    let built: Vec<(u32, sets::SplitSet)> = needed
        .par_iter()
        .map(|&i| {
            (
                i,
                sets::verification_split_set_in(
                    shingler,
                    &corpus.texts[i as usize - corpus.loaded],
                    arena,
                ),
            )
        })
        .collect();
    for (i, s) in built {
        sets[i as usize] = Some(s);
    }
    if !keep_texts {
        corpus.texts = Vec::new();
    }
    sets
}
