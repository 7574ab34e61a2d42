//! The steps the in-memory and the out-of-core run share: documents too short to band, the verification of one
//! candidate pair, grouping the verified pairs, the survivor column's check.

use super::error::DedupError;
use super::options::{DedupOptions, Verify};
use super::outcome::CheckedPair;
use super::survivor;
use crate::corpus::CorpusReader;
use crate::lsh::cluster::{self, Edge, Group, GroupMode};
use crate::sets;
use crate::shingle::Shingler;
use rayon::prelude::*;

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
/// binding) marks them empty and records them in [`Corpus::short_docs`](crate::dedup::Corpus::short_docs), as [`run`](crate::dedup::run) does.
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
