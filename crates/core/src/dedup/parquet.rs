//! Dedup tables as Parquet files (feature `parquet`): `--pairs`, `--clusters`, `--group-report` and `--removed` ending in
//! `.parquet`, holding the record batches of [`super::tables`].

use super::outcome::{DedupOutcome, Table};
use super::tables::{clusters_batch, group_report_batch, pairs_batch, removed_batch};
use crate::sketch::parquet::{write_record_batch, writer_properties};
use std::path::Path;

/// Rows per row group of a dedup table.
const ROW_GROUP_ROWS: usize = 1 << 16;

/// Writes `which` table of `o` to `path` as Parquet (temporary name, then renamed into place).
pub(super) fn write_table(
    path: &Path,
    which: Table,
    o: &DedupOutcome,
) -> Result<(), crate::output::OutputError> {
    let batch = match which {
        Table::Pairs => pairs_batch(o),
        Table::Clusters => clusters_batch(o),
        Table::GroupReport => group_report_batch(o),
        Table::Removed => removed_batch(o),
    };
    write_record_batch(path, &batch, writer_properties(true, ROW_GROUP_ROWS))
}
