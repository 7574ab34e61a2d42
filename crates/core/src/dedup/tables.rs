//! Dedup tables as Arrow record batches (feature `arrow`): the pairs, the group membership and the group report,
//! with the CSV files' columns in the same order and types instead of text: counts and group numbers are int64,
//! similarities float64 (at full precision, where the CSV rounds to 6 decimals), flags bool, and a value the
//! CSV leaves blank is null. The Parquet outputs ([`super::parquet`]) and the Python binding's `dedup` both
//! return these batches.

use super::options::Verify;
use super::outcome::{DedupOutcome, removals, verified_by};
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{Field, Schema};
use std::sync::Arc;

fn table(columns: Vec<(&str, ArrayRef, bool)>) -> RecordBatch {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a, nullable)| Field::new(*name, a.data_type().clone(), *nullable))
        .collect();
    let arrays = columns.into_iter().map(|(_, a, _)| a).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .expect("columns built with equal lengths and matching types")
}

fn strings<'a>(values: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

fn ints(values: impl Iterator<Item = usize>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(values.map(|v| v as i64)))
}

/// A similarity column: NaN (a value the CSV leaves blank) becomes null.
fn similarities(values: impl Iterator<Item = f64>) -> ArrayRef {
    Arc::new(Float64Array::from_iter(
        values.map(|v| (!v.is_nan()).then_some(v)),
    ))
}

/// The verified pairs: `id_a`, `id_b` (utf8), `estimate` (float64), `jaccard` (float64, null when not computed),
/// `verified_by` (utf8), as in [`super::write_pairs`].
pub fn pairs_batch(o: &DedupOutcome) -> RecordBatch {
    let id = |i: u32| o.ids[i as usize].as_str();
    table(vec![
        ("id_a", strings(o.verified.iter().map(|p| id(p.a))), false),
        ("id_b", strings(o.verified.iter().map(|p| id(p.b))), false),
        (
            "estimate",
            Arc::new(Float64Array::from_iter_values(
                o.verified.iter().map(|p| p.estimate),
            )),
            false,
        ),
        (
            "jaccard",
            Arc::new(Float64Array::from_iter(
                o.verified.iter().map(|p| p.jaccard),
            )),
            true,
        ),
        (
            "verified_by",
            strings(
                o.verified
                    .iter()
                    .map(|p| verified_by(o.config.verify, p.jaccard)),
            ),
            false,
        ),
    ])
}

/// Group membership: `group`, `size` (int64), `id`, `center` (utf8), `is_center` (bool),
/// `similarity_to_center` (float64, null when undefined), as in [`super::write_clusters`].
pub fn clusters_batch(o: &DedupOutcome) -> RecordBatch {
    // One entry per member: (group number, group, member, similarity to the centre).
    let rows: Vec<(usize, &crate::lsh::cluster::Group, u32, f64)> = o
        .groups
        .iter()
        .zip(&o.to_center)
        .enumerate()
        .flat_map(|(g, (grp, sims))| {
            grp.members
                .iter()
                .zip(sims)
                .map(move |(&m, &s)| (g, grp, m, s))
        })
        .collect();
    let id = |i: u32| o.ids[i as usize].as_str();
    table(vec![
        ("group", ints(rows.iter().map(|r| r.0)), false),
        ("id", strings(rows.iter().map(|r| id(r.2))), false),
        ("size", ints(rows.iter().map(|r| r.1.members.len())), false),
        (
            "center",
            strings(rows.iter().map(|r| id(r.1.center))),
            false,
        ),
        (
            "is_center",
            Arc::new(BooleanArray::from_iter(
                rows.iter().map(|r| Some(r.2 == r.1.center)),
            )),
            false,
        ),
        (
            "similarity_to_center",
            similarities(rows.iter().map(|r| r.3)),
            true,
        ),
    ])
}

/// One row per group, the columns of [`super::write_group_report`]: counts as int64, similarities as float64
/// (null when undefined), `similarity` and `pairs_basis` as utf8.
pub fn group_report_batch(o: &DedupOutcome) -> RecordBatch {
    let basis = if o.config.verify == Verify::Exact {
        "exact"
    } else {
        "estimate"
    };
    let s = &o.group_stats;
    table(vec![
        ("group", ints(0..s.len()), false),
        ("size", ints(s.iter().map(|s| s.size)), false),
        (
            "center",
            strings(o.groups.iter().map(|g| o.ids[g.center as usize].as_str())),
            false,
        ),
        ("edges", ints(s.iter().map(|s| s.edges)), false),
        ("min_edge", similarities(s.iter().map(|s| s.min_edge)), true),
        (
            "mean_edge",
            similarities(s.iter().map(|s| s.mean_edge)),
            true,
        ),
        ("similarity", strings(s.iter().map(|_| basis)), false),
        (
            "pairs_examined",
            ints(s.iter().map(|s| s.pairs_examined)),
            false,
        ),
        (
            "pairs_basis",
            strings(s.iter().map(|s| if s.sampled { "sample" } else { "all" })),
            false,
        ),
        ("min_pair", similarities(s.iter().map(|s| s.min_pair)), true),
        (
            "mean_pair",
            similarities(s.iter().map(|s| s.mean_pair)),
            true,
        ),
        (
            "pairs_below_threshold",
            ints(s.iter().map(|s| s.pairs_below_threshold)),
            false,
        ),
        (
            "pairs_disjoint",
            ints(s.iter().map(|s| s.pairs_disjoint)),
            false,
        ),
    ])
}

/// The audit of removals: `id`, `survivor` (utf8, null under `--short drop`), `similarity` (float64, null
/// when there is no survivor), `basis` (utf8), `group` (int64, null for a short document), `rule` (utf8), as in
/// [`super::write_removed`].
pub fn removed_batch(o: &DedupOutcome) -> RecordBatch {
    let rows = removals(o);
    let id = |i: u32| o.ids[i as usize].as_str();
    table(vec![
        ("id", strings(rows.iter().map(|r| id(r.doc))), false),
        (
            "survivor",
            Arc::new(StringArray::from_iter(
                rows.iter().map(|r| r.survivor.map(id)),
            )),
            true,
        ),
        (
            "similarity",
            Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.similarity))),
            true,
        ),
        ("basis", strings(rows.iter().map(|r| r.basis)), false),
        (
            "group",
            Arc::new(Int64Array::from_iter(
                rows.iter().map(|r| r.group.map(|g| g as i64)),
            )),
            true,
        ),
        ("rule", strings(rows.iter().map(|r| r.rule.as_str())), false),
    ])
}
