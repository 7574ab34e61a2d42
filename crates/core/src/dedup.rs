//! The end-to-end dedup job: read, shingle and sign the corpus (in parallel batches, in input order), band the
//! signatures, verify the candidate pairs, group them, and write pairs, groups and the kept corpus, with a summary
//! that accounts for every document and every pair the banding did not enumerate. `lshbench dedup` (in
//! `cli::dedup`) is its command-line front end; [`run`] is the whole job, [`dedup_signed`] the part after signing.
//!
//! Memory: signatures (n x k x 4 bytes) and the texts are kept; shingle sets are built only for documents that
//! appear in a candidate pair, after banding, and the texts are dropped as soon as nothing needs them.
//!
//! The work runs on the current rayon pool; the outputs do not depend on its size.

pub mod external;
pub mod kept;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod spill;
pub mod state;
pub mod survivor;
#[cfg(feature = "arrow")]
pub mod tables;

use crate::corpus::{CorpusReader, ReadError, ReadStats};
use crate::exec::Progress;
use crate::kernel::Kernel;
use crate::lsh::choice::{BandingChoice, ChoiceError, MAX_BUCKET_CAP, band_hasher, choose_banding};
use crate::lsh::cluster::{self, Edge, Group, GroupMode, GroupStats};
use crate::lsh::index::{self, CandidateStats, TooManyCandidates};
use crate::lsh::scurve::{Banding, BandingError};
use crate::output::{AtomicFile, OutputError};
use crate::sets;
use crate::shingle::Shingler;
use rayon::prelude::*;
use state::{State, StateError, StateParams};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How candidate pairs are confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    /// The name on the command line and in the outputs: `exact`, `estimate` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            Verify::Exact => "exact",
            Verify::Estimate => "estimate",
            Verify::None => "none",
        }
    }
}

/// Why a dedup run failed.
#[derive(Debug, thiserror::Error)]
pub enum DedupError {
    /// The corpus could not be read (the message names file, line and field).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The banding or the threshold is out of range.
    #[error(transparent)]
    Banding(#[from] BandingError),
    /// A slot width that is not one of 1, 2, 4, 8, 16 or 32 bits.
    #[error(transparent)]
    Bits(#[from] crate::kernel::bbit::BadBits),
    /// The banding asked for contradicts the threshold, or only one of bands and rows was given.
    #[error(transparent)]
    Choice(#[from] ChoiceError),
    /// The state to load could not be read or does not match this run, or the state could not be saved.
    #[error(transparent)]
    State(#[from] StateError),
    /// A bucket cap below 2.
    #[error("--bucket-cap must be at least 2")]
    BucketCap,
    /// A bucket cap above [`MAX_BUCKET_CAP`].
    #[error("--bucket-cap {0} is above the limit {MAX_BUCKET_CAP}")]
    BucketCapTooLarge(usize),
    /// The banding let through more candidate pairs than allowed.
    #[error("banding {} bands x {} rows: {cause}", banding.bands, banding.rows)]
    TooManyCandidates {
        /// The banding that did it.
        banding: Banding,
        /// The limit it crossed.
        cause: TooManyCandidates,
    },
    /// An output file could not be created, written or renamed into place (the message names it).
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The survivor policy could not rank the documents.
    #[error(transparent)]
    Survivor(#[from] survivor::SurvivorError),
    /// A survivor column the reader was not opened to collect.
    #[error(
        "--keep {0}: the corpus reader must collect that field (ReaderOptions::rank_field); the command line does \
         this itself"
    )]
    RankFieldNotRead(String),
    /// The out-of-core run (`--memory-limit`) could not go on: the limit is too small, a spill file is damaged, or
    /// the corpus changed between its two passes.
    #[error(transparent)]
    OutOfCore(#[from] external::OutOfCoreError),
    /// The kept corpus could not be written.
    #[error(transparent)]
    Kept(#[from] kept::KeptError),
}

/// Which files a [`run`] writes (none by default).
#[derive(Clone, Debug, Default)]
pub struct DedupOutputs {
    /// The verified pairs as CSV ([`write_pairs`]), or Parquet if the name ends in `.parquet`.
    pub pairs: Option<PathBuf>,
    /// Group membership as CSV ([`write_clusters`]), or Parquet if the name ends in `.parquet`.
    pub clusters: Option<PathBuf>,
    /// One row per group as CSV ([`write_group_report`]), or Parquet if the name ends in `.parquet`.
    pub group_report: Option<PathBuf>,
    /// The kept corpus in the input's own form, written by a second pass over the input ([`kept::write_kept`],
    /// with the mask of [`kept_mask`]).
    pub kept: Option<kept::KeptTarget>,
    /// The audit of removals as CSV ([`write_removed`]): one row per removed document with its survivor.
    pub removed: Option<PathBuf>,
}

impl DedupOutputs {
    /// Whether the run writes a deduplicated corpus or its audit (the outputs a survivor policy decides).
    pub fn selects_survivors(&self) -> bool {
        self.kept.is_some() || self.removed.is_some()
    }
}

/// The knobs of a [`run`]. [`Default`] gives the command line's defaults.
#[derive(Clone, Debug)]
pub struct DedupOptions {
    /// Number of bands b (with `rows`). Without both, the threshold picks (b, r) by the default rule.
    pub bands: Option<usize>,
    /// Rows per band r (with `bands`).
    pub rows: Option<usize>,
    /// Similarity threshold in (0, 1] for verification (`None`: 0.5); see [`choose_banding`].
    pub threshold: Option<f64>,
    /// How candidates are confirmed.
    pub verify: Verify,
    /// How verified pairs form groups.
    pub groups: GroupMode,
    /// Buckets larger than this (at least 2) are enumerated as a star; the pairs left out are counted.
    pub bucket_cap: usize,
    /// Fail with [`DedupError::TooManyCandidates`] when banding emits more candidate pairs than this (counted
    /// once per band).
    pub max_candidates: u64,
    /// Member pairs examined per group for the chaining statistics; larger groups are sampled (seeded).
    pub pair_budget: usize,
    /// The seed the kernel and the shingler were made with: recorded in a saved state, and the band hash and the
    /// group sampling derive from it.
    pub seed: u64,
    /// Load signatures from a saved state first; only pairs involving a newly read document are reported.
    pub load: Option<PathBuf>,
    /// Save the signatures of every document (loaded and new) for a later `load`.
    pub save: Option<PathBuf>,
    /// The files to write.
    pub outputs: DedupOutputs,
    /// Run out of core under this memory limit ([`external`]); `None`: everything in memory.
    pub memory_limit: Option<external::MemoryLimit>,
    /// Machine-specific tuning the caller opts into (none by default; only the CLI sets it).
    pub tuning: crate::exec::Tuning,
    /// Which member of a group survives ([`survivor::Keep`]). A column policy needs the reader opened with
    /// that field as [`crate::corpus::ReaderOptions::rank_field`].
    pub keep: survivor::Keep,
    /// What happens to documents shorter than one shingle.
    pub short: survivor::Short,
}

impl DedupOptions {
    /// The knobs of banding, verification and grouping these options give for a kernel of `num_perm` slots of
    /// `slot_bits` bits: the banding chosen (or the one asked for, checked against the threshold) and the bucket
    /// cap checked. The one place a [`DedupConfig`] is made from options: the CLI's run, the out-of-core run and
    /// the Python binding all come through it.
    pub fn config(&self, num_perm: usize, slot_bits: u32) -> Result<DedupConfig, DedupError> {
        let choice = choose_banding(self.bands, self.rows, self.threshold, num_perm, slot_bits)?;
        if self.bucket_cap < 2 {
            return Err(DedupError::BucketCap);
        }
        if self.bucket_cap > MAX_BUCKET_CAP {
            return Err(DedupError::BucketCapTooLarge(self.bucket_cap));
        }
        Ok(DedupConfig {
            choice,
            verify: self.verify,
            groups: self.groups,
            bucket_cap: self.bucket_cap,
            pair_budget: self.pair_budget,
            seed: self.seed,
            max_candidates: self.max_candidates,
        })
    }
}

impl Default for DedupOptions {
    fn default() -> Self {
        DedupOptions {
            bands: None,
            rows: None,
            threshold: None,
            verify: Verify::default(),
            groups: GroupMode::default(),
            bucket_cap: index::DEFAULT_BUCKET_CAP,
            max_candidates: DEFAULT_MAX_CANDIDATES,
            pair_budget: DEFAULT_PAIR_BUDGET,
            seed: 42,
            load: None,
            save: None,
            outputs: DedupOutputs::default(),
            memory_limit: None,
            tuning: crate::exec::Tuning::default(),
            keep: survivor::Keep::default(),
            short: survivor::Short::default(),
        }
    }
}

/// The default of [`DedupOptions::max_candidates`].
pub const DEFAULT_MAX_CANDIDATES: u64 = 20_000_000;
/// The default of [`DedupOptions::pair_budget`].
pub const DEFAULT_PAIR_BUDGET: usize = 2000;

/// A candidate pair after verification.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckedPair {
    /// The first document's position.
    pub a: u32,
    /// The second document's position.
    pub b: u32,
    /// The signatures' estimated Jaccard.
    pub estimate: f64,
    /// Exact Jaccard when both shingle sets were available and `--verify exact`.
    pub jaccard: Option<f64>,
}

/// Everything a run computed, for the writers, the summary and the tests.
pub struct DedupOutcome {
    /// Document ids by position (loaded ones first).
    pub ids: Vec<String>,
    /// Documents 0..loaded came from the state file.
    pub loaded: usize,
    /// Documents read now whose shingle set was empty.
    pub empty_documents: u64,
    /// What candidate generation did.
    pub candidates: CandidateStats,
    /// The verified pairs.
    pub verified: Vec<CheckedPair>,
    /// Groups of two or more documents.
    pub groups: Vec<Group>,
    /// Statistics of each group, in group order.
    pub group_stats: Vec<GroupStats>,
    /// Similarity of each group member to its group's centre, per group, in member order.
    pub to_center: Vec<Vec<f64>>,
    /// The survivor policy that chose each group's centre.
    pub keep: survivor::Keep,
    /// The short-document policy and the removals it made (in input order).
    pub short: survivor::Short,
    /// Documents removed by the short-document policy.
    pub short_removed: Vec<survivor::ShortRemoval>,
    /// The knobs the run used (with the banding it chose).
    pub config: DedupConfig,
    /// Seconds per stage, in order.
    pub stage_seconds: Vec<(&'static str, f64)>,
}

impl DedupOutcome {
    /// The documents removed, by position: every group member except its centre, and the short documents the
    /// short-document policy removed.
    pub fn removed(&self) -> Vec<bool> {
        let mut out = vec![false; self.ids.len()];
        for g in &self.groups {
            for &m in &g.members {
                out[m as usize] = m != g.center;
            }
        }
        for r in &self.short_removed {
            out[r.doc as usize] = true;
        }
        out
    }
}

/// A finished [`run`]: the outcome, the reader's counts and the wall-clock time.
pub struct DedupReport {
    /// What the run computed.
    pub outcome: DedupOutcome,
    /// The reader's counts (records, rejections, UTF-8 repairs).
    pub read: ReadStats,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
}

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
    {
        let o = &options.outputs;
        if let Some(path) = [&o.pairs, &o.clusters, &o.group_report]
            .into_iter()
            .flatten()
            .find(|p| is_parquet(p))
        {
            return Err(DedupError::Output(OutputError::Create {
                path: path.clone(),
                cause: io::Error::new(
                    io::ErrorKind::Unsupported,
                    "Parquet output needs lshbench built with the cargo feature `parquet`",
                ),
            }));
        }
    }
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

/// Refuses a column survivor policy whose field the reader does not collect.
pub(crate) fn check_rank_field(
    options: &DedupOptions,
    reader: &CorpusReader,
) -> Result<(), DedupError> {
    if options.keep.field() != reader.options().rank_field.as_deref() {
        return Err(DedupError::RankFieldNotRead(options.keep.to_string()));
    }
    Ok(())
}

/// A text's length for `--keep longest|shortest`: its UTF-8 bytes, saturated at `u32::MAX`.
pub fn text_length(text: &str) -> u32 {
    u32::try_from(text.len()).unwrap_or(u32::MAX)
}

/// Writes the files `outputs` names, at the same time (each is small, and formatting its rows is most of the
/// cost); the first error, in the order pairs, clusters, group report, kept corpus, is the one reported. The
/// kept corpus is a second pass over the corpus `reader` read.
fn write_outputs(
    outputs: &DedupOutputs,
    outcome: &DedupOutcome,
    reader: &CorpusReader,
) -> Result<(), DedupError> {
    let (input, reader_options) = (reader.path(), reader.options().clone());
    // `None` stands for the kept corpus.
    let files = [
        (&outputs.pairs, Some(Table::Pairs)),
        (&outputs.clusters, Some(Table::Clusters)),
        (&outputs.group_report, Some(Table::GroupReport)),
        (&outputs.kept.as_ref().map(|k| k.path.clone()), None),
        (&outputs.removed, Some(Table::Removed)),
    ];
    let written: Vec<Result<(), DedupError>> = files
        .par_iter()
        .filter_map(|(path, which)| Some((path.as_deref()?, *which)))
        .map(|(path, which)| match (which, &outputs.kept) {
            (Some(table), _) => write_table(path, table, outcome),
            (None, Some(target)) => {
                kept::write_kept(input, &reader_options, &kept_mask(outcome), target)
                    .map(|_| ())
                    .map_err(DedupError::from)
            }
            (None, None) => unreachable!("the kept corpus has a path only when asked for"),
        })
        .collect();
    written.into_iter().collect()
}

/// The three table outputs of a run.
#[derive(Clone, Copy, Debug)]
enum Table {
    Pairs,
    Clusters,
    GroupReport,
    Removed,
}

/// Whether an output path names a Parquet file (its extension is `.parquet`).
fn is_parquet(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// Writes one table: Parquet when `path` ends in `.parquet` (feature `parquet`; [`run`] refuses the name up front
/// without it), else CSV.
fn write_table(path: &Path, which: Table, o: &DedupOutcome) -> Result<(), DedupError> {
    #[cfg(feature = "parquet")]
    if is_parquet(path) {
        return Ok(parquet::write_table(path, which, o)?);
    }
    write_file(path, |w| match which {
        Table::Pairs => write_pairs(w, o),
        Table::Clusters => write_clusters(w, o),
        Table::GroupReport => write_group_report(w, o),
        Table::Removed => write_removed(w, o),
    })
}

/// Writes `path` whole or not at all (a temporary name, renamed into place; [`crate::output`]); errors name
/// the file.
fn write_file(
    path: &Path,
    write: impl FnOnce(&mut AtomicFile) -> io::Result<()>,
) -> Result<(), DedupError> {
    Ok(crate::output::write_atomic(path, write)?)
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

/// The knobs of [`dedup_signed`].
#[derive(Clone, Copy, Debug)]
pub struct DedupConfig {
    /// The banding and the threshold.
    pub choice: BandingChoice,
    /// How candidates are confirmed.
    pub verify: Verify,
    /// How verified pairs form groups.
    pub groups: GroupMode,
    /// Buckets larger than this are enumerated as a star.
    pub bucket_cap: usize,
    /// Member pairs examined per group for the chaining statistics.
    pub pair_budget: usize,
    /// The band hash and the group sampling derive from it.
    pub seed: u64,
    /// The most candidate pairs banding may emit (counted once per band).
    pub max_candidates: u64,
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
    let sig = |i: u32| &corpus.signatures[i as usize * k..(i as usize + 1) * k];
    let mut sets: Vec<Option<sets::SplitSet>> = vec![None; n];
    if config.verify == Verify::Exact {
        let mut needed: Vec<u32> = cands.pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
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
    }
    stages.push(("shingle sets", t_verify.elapsed().as_secs_f64()));
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

/// The removals of the short-document policy among the documents read now.
pub(crate) fn short_removals(
    short: survivor::Short,
    short_docs: &[u32],
) -> Vec<survivor::ShortRemoval> {
    match short {
        survivor::Short::Drop => short_docs
            .iter()
            .map(|&doc| survivor::ShortRemoval { doc })
            .collect(),
        survivor::Short::Keep | survivor::Short::Exact => Vec::new(),
    }
}

/// The positions (in `texts`) of the documents the short-document policy takes out of banding: those shorter
/// than one shingle, or none under [`survivor::Short::Exact`]. A caller that signs texts itself (the Python
/// binding) marks them empty and records them in [`Corpus::short_docs`], as [`run`] does.
pub fn short_documents<'a>(
    texts: impl IndexedParallelIterator<Item = &'a str>,
    shingler: &Shingler,
    short: survivor::Short,
) -> Vec<usize> {
    if !short.unbanded() {
        return Vec::new();
    }
    texts
        .enumerate()
        .filter(|(_, text)| shingler.is_short(text))
        .map(|(i, _)| i)
        .collect()
}

/// Takes the short documents of a signed batch out of banding (marks them empty) when the short-document
/// policy says so, and returns their positions in the batch.
pub(crate) fn unband_short(
    batch: &mut crate::pipeline::SignedBatch,
    shingler: &Shingler,
    short: survivor::Short,
) -> Vec<usize> {
    let short = short_documents(
        batch.docs.par_iter().map(|d| d.text.as_str()),
        shingler,
        short,
    );
    for &i in &short {
        batch.empty[i] = true;
    }
    short
}

/// Verifies one candidate pair (`estimate` computes both documents' estimate, called only for a pair not
/// already dropped; their sorted shingle-id sets when both have them): the pair to keep, or `None`. With
/// sets, a pair whose sizes or overlap cannot reach `t` is dropped without a full merge (J <= min/max, and the
/// rounded ratio bounds the rounded J from above, so no pair at or above `t` is lost); without them, exact
/// verification falls back to the estimate.
pub fn check_pair<S: sets::IdSet + ?Sized>(
    verify: Verify,
    t: f64,
    a: u32,
    b: u32,
    estimate: impl FnOnce() -> f64,
    sets: Option<(&S, &S)>,
    dispatch: crate::arch::Dispatch,
) -> Option<CheckedPair> {
    let jaccard = match sets {
        Some((x, y)) => {
            let (lo, hi) = (x.size().min(y.size()), x.size().max(y.size()));
            if (lo as f64) / (hi as f64) < t {
                return None;
            }
            let need = sets::required_overlap(t, x.size(), y.size());
            let inter = x.intersection_at_least(y, need, dispatch)?;
            Some(sets::jaccard_from_counts(inter, x.size(), y.size()))
        }
        None => None,
    };
    // Only now: most candidates with sets were dropped above, without reading their signatures.
    let estimate = estimate();
    let keep = match verify {
        Verify::None => true,
        Verify::Estimate => estimate >= t,
        Verify::Exact => jaccard.unwrap_or(estimate) >= t,
    };
    keep.then_some(CheckedPair {
        a,
        b,
        estimate,
        jaccard,
    })
}

/// The groups the verified pairs make among `n` documents, and each group's edges (an edge belongs to the group
/// of its documents).
pub(crate) fn group_verified(
    n: usize,
    verified: &[CheckedPair],
    mode: GroupMode,
    rank: Option<&[u32]>,
) -> (Vec<Group>, Vec<Vec<Edge>>) {
    let edges: Vec<Edge> = verified
        .iter()
        .map(|p| Edge {
            a: p.a,
            b: p.b,
            similarity: p.jaccard.unwrap_or(p.estimate),
        })
        .collect();
    let groups = cluster::group_ranked(n, &edges, mode, rank);
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
    (groups, edges_by_group)
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

/// The `verified_by` column of a pair: how it was confirmed.
fn verified_by(verify: Verify, jaccard: Option<f64>) -> &'static str {
    match (verify, jaccard) {
        (Verify::Exact, Some(_)) => "exact",
        (Verify::Exact, None) => "estimate (loaded document, no text)",
        (v, _) => v.name(),
    }
}

/// Writes the verified pairs as CSV: `id_a,id_b,estimate,jaccard,verified_by`.
pub fn write_pairs(out: impl Write, o: &DedupOutcome) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(["id_a", "id_b", "estimate", "jaccard", "verified_by"])?;
    for p in &o.verified {
        let by = verified_by(o.config.verify, p.jaccard);
        w.write_record([
            o.ids[p.a as usize].as_str(),
            o.ids[p.b as usize].as_str(),
            &format!("{:.6}", p.estimate),
            &fmt_opt(p.jaccard),
            by,
        ])?;
    }
    w.flush()
}

/// Writes group membership as CSV: `group,id,size,center,is_center,similarity_to_center`.
pub fn write_clusters(out: impl Write, o: &DedupOutcome) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
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
    w.flush()
}

/// Writes one row per group as CSV: size, centre, edge and member-pair similarity, chaining counts.
pub fn write_group_report(out: impl Write, o: &DedupOutcome) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
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
    let basis = if o.config.verify == Verify::Exact {
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
    w.flush()
}

/// One removed document of the audit: its position, its survivor's, their similarity and how it was taken,
/// its group and the rule that removed it.
struct Removal {
    doc: u32,
    survivor: Option<u32>,
    similarity: Option<f64>,
    basis: &'static str,
    group: Option<usize>,
    rule: String,
}

/// Every document read now that the run removes, in input order.
fn removals(o: &DedupOutcome) -> Vec<Removal> {
    let exact = o.config.verify == Verify::Exact;
    let rule = format!(
        "{}:{}",
        match o.config.groups {
            GroupMode::Components => "components",
            GroupMode::Center => "center",
        },
        o.keep
    );
    let mut out = Vec::new();
    for (g, (grp, sims)) in o.groups.iter().zip(&o.to_center).enumerate() {
        for (&m, &s) in grp.members.iter().zip(sims) {
            if m == grp.center || (m as usize) < o.loaded {
                continue;
            }
            // A loaded survivor has no text: the similarity is the signatures' estimate.
            let with_sets = exact && grp.center as usize >= o.loaded;
            out.push(Removal {
                doc: m,
                survivor: Some(grp.center),
                similarity: Some(s),
                basis: if with_sets { "exact" } else { "estimate" },
                group: Some(g),
                rule: rule.clone(),
            });
        }
    }
    for r in &o.short_removed {
        out.push(Removal {
            doc: r.doc,
            survivor: None,
            similarity: None,
            basis: "",
            group: None,
            rule: "short:drop".into(),
        });
    }
    out.sort_by_key(|r| r.doc);
    out
}

/// Writes the audit of removals as CSV, one row per removed document in input order:
/// `id,survivor,similarity,basis,group,rule`. `similarity` is the removed document's similarity to its survivor
/// (`basis`: `exact` Jaccard of the shingle sets or the signatures' `estimate`); `group` is its row in the
/// clusters file; `rule` is the grouping and survivor policy (`center:first`, `components:center`, ...), or
/// `short:drop` for a document shorter than one shingle under `--short drop` (no survivor).
pub fn write_removed(out: impl Write, o: &DedupOutcome) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(["id", "survivor", "similarity", "basis", "group", "rule"])?;
    for r in removals(o) {
        w.write_record([
            o.ids[r.doc as usize].as_str(),
            r.survivor.map_or("", |s| o.ids[s as usize].as_str()),
            &fmt_opt(r.similarity),
            r.basis,
            &r.group.map(|g| g.to_string()).unwrap_or_default(),
            &r.rule,
        ])?;
    }
    w.flush()
}

/// The keep mask of the documents read now (positions `o.loaded..`, by their position among them): every one not
/// removed as a duplicate.
pub fn kept_mask(o: &DedupOutcome) -> Vec<bool> {
    o.removed()[o.loaded..].iter().map(|&r| !r).collect()
}
