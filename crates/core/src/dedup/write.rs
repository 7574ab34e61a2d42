//! The outputs of a dedup run: pairs, groups, the group report and the removals, as CSV or Parquet, each file
//! written whole.

use super::error::DedupError;
use super::kept;
use super::options::{DedupOutputs, Verify};
use super::outcome::{DedupOutcome, Table, kept_mask, removals, verified_by};
#[cfg(feature = "parquet")]
use super::parquet;
use crate::corpus::CorpusReader;
use crate::output::AtomicFile;
use rayon::prelude::*;
use std::io::{self, Write};
use std::path::Path;

/// Writes the files `outputs` names, at the same time (each is small, and formatting its rows is most of the
/// cost); the first error, in the order pairs, clusters, group report, kept corpus, is the one reported. The
/// kept corpus is a second pass over the corpus `reader` read.
pub(super) fn write_outputs(
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

/// Whether an output path names a Parquet file (its extension is `.parquet`).
pub(super) fn is_parquet(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// Writes one table: Parquet when `path` ends in `.parquet` (feature `parquet`; [`run`] refuses the name up front
/// without it), else CSV.
pub(super) fn write_table(path: &Path, which: Table, o: &DedupOutcome) -> Result<(), DedupError> {
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
pub(super) fn write_file(
    path: &Path,
    write: impl FnOnce(&mut AtomicFile) -> io::Result<()>,
) -> Result<(), DedupError> {
    Ok(crate::output::write_atomic(path, write)?)
}

pub(super) fn fmt_opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.6}")).unwrap_or_default()
}

pub(super) fn fmt_f(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x:.6}")
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

/// Refuses a Parquet output path in a build without the `parquet` feature, before any work is done.
#[cfg(not(feature = "parquet"))]
pub(super) fn refuse_parquet_outputs(o: &DedupOutputs) -> Result<(), DedupError> {
    if let Some(path) = [&o.pairs, &o.clusters, &o.group_report]
        .into_iter()
        .flatten()
        .find(|p| is_parquet(p))
    {
        return Err(DedupError::Output(crate::output::OutputError::Create {
            path: path.clone(),
            cause: io::Error::new(
                io::ErrorKind::Unsupported,
                "Parquet output needs lshbench built with the cargo feature `parquet`",
            ),
        }));
    }
    Ok(())
}
