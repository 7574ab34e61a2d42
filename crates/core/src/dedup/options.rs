//! What a dedup run is asked to do: verification, outputs, options and their defaults, the configuration of the
//! part after signing.

use super::error::DedupError;
use super::{kept, memory, survivor};
use crate::lsh::choice::{BandingChoice, MAX_BUCKET_CAP, choose_banding};
use crate::lsh::cluster::GroupMode;
use crate::lsh::index::{self};
use std::path::PathBuf;

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

/// Which files a [`run`](crate::dedup::run) writes (none by default).
#[derive(Clone, Debug, Default)]
pub struct DedupOutputs {
    /// The verified pairs as CSV ([`write_pairs`](crate::dedup::write_pairs)), or Parquet if the name ends in `.parquet`.
    pub pairs: Option<PathBuf>,
    /// Group membership as CSV ([`write_clusters`](crate::dedup::write_clusters)), or Parquet if the name ends in `.parquet`.
    pub clusters: Option<PathBuf>,
    /// One row per group as CSV ([`write_group_report`](crate::dedup::write_group_report)), or Parquet if the name ends in `.parquet`.
    pub group_report: Option<PathBuf>,
    /// The kept corpus in the input's own form, written by a second pass over the input ([`kept::write_kept`],
    /// with the mask of [`kept_mask`](crate::dedup::kept_mask)).
    pub kept: Option<kept::KeptTarget>,
    /// The audit of removals as CSV ([`write_removed`](crate::dedup::write_removed)): one row per removed document with its survivor.
    pub removed: Option<PathBuf>,
}

impl DedupOutputs {
    /// Whether the run writes a deduplicated corpus or its audit (the outputs a survivor policy decides).
    pub fn selects_survivors(&self) -> bool {
        self.kept.is_some() || self.removed.is_some()
    }
}

/// The knobs of a [`run`](crate::dedup::run). [`Default`] gives the command line's defaults.
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
    /// Run out of core under this memory limit ([`external`](crate::dedup::external)); `None`: everything in memory.
    pub memory_limit: Option<memory::MemoryLimit>,
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
pub const DEFAULT_MAX_CANDIDATES: u64 = crate::defaults::MAX_CANDIDATES;
/// The default of [`DedupOptions::pair_budget`].
pub const DEFAULT_PAIR_BUDGET: usize = crate::defaults::PAIR_BUDGET;

/// The knobs of [`dedup_signed`](crate::dedup::dedup_signed).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults;

    #[test]
    fn the_option_defaults_are_the_shared_table() {
        let o = DedupOptions::default();
        assert_eq!(Verify::default().name(), defaults::VERIFY);
        assert_eq!(o.verify, Verify::default());
        assert_eq!(o.keep.to_string(), defaults::KEEP);
        assert_eq!(o.short.name(), defaults::SHORT);
        assert_eq!(o.bucket_cap, defaults::BUCKET_CAP);
        assert_eq!(o.max_candidates, defaults::MAX_CANDIDATES);
        assert_eq!(o.pair_budget, defaults::PAIR_BUDGET);
    }
}
