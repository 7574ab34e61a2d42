//! What a dedup run found: verified pairs, groups, the report, and the removals and kept mask that follow from them.

use super::options::{DedupConfig, Verify};
use super::survivor;
use crate::corpus::ReadStats;
use crate::lsh::cluster::{Group, GroupMode, GroupStats};
use crate::lsh::index::CandidateStats;

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

/// A finished [`run`](crate::dedup::run): the outcome, the reader's counts and the wall-clock time.
pub struct DedupReport {
    /// What the run computed.
    pub outcome: DedupOutcome,
    /// The reader's counts (records, rejections, UTF-8 repairs).
    pub read: ReadStats,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
}

/// The `verified_by` column of a pair: how it was confirmed.
pub(super) fn verified_by(verify: Verify, jaccard: Option<f64>) -> &'static str {
    match (verify, jaccard) {
        (Verify::Exact, Some(_)) => "exact",
        (Verify::Exact, None) => "estimate (loaded document, no text)",
        (v, _) => v.name(),
    }
}

/// One removed document of the audit: its position, its survivor's, their similarity and how it was taken,
/// its group and the rule that removed it.
pub(super) struct Removal {
    pub(super) doc: u32,
    pub(super) survivor: Option<u32>,
    pub(super) similarity: Option<f64>,
    pub(super) basis: &'static str,
    pub(super) group: Option<usize>,
    pub(super) rule: String,
}

/// Every document read now that the run removes, in input order.
pub(super) fn removals(o: &DedupOutcome) -> Vec<Removal> {
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

/// The keep mask of the documents read now (positions `o.loaded..`, by their position among them): every one not
/// removed as a duplicate.
pub fn kept_mask(o: &DedupOutcome) -> Vec<bool> {
    o.removed()[o.loaded..].iter().map(|&r| !r).collect()
}

/// The table outputs of a run.
#[derive(Clone, Copy, Debug)]
pub(super) enum Table {
    Pairs,
    Clusters,
    GroupReport,
    Removed,
}
