//! Text the CLI prints from the library's report values.

use lshbench_core::corpus::ReadStats;

/// One line for a run summary, e.g.
/// `read 6046 records: 6046 documents, 0 rejected, 0 with invalid UTF-8 replaced`.
/// `, N duplicate ids` is added when some id repeats.
pub fn read_line(stats: &ReadStats) -> String {
    let mut line = format!(
        "read {} records: {} documents, {} rejected, {} with invalid UTF-8 replaced",
        stats.records, stats.documents, stats.rejected, stats.utf8_replaced
    );
    if stats.duplicate_ids > 0 {
        line.push_str(&format!(
            ", {} duplicate ids (kept; outputs repeat them)",
            stats.duplicate_ids
        ));
    }
    line
}

/// [`read_line`] followed by the kept rejection messages, one per indented line, and a note when more were
/// rejected than kept.
pub fn read_stats(stats: &ReadStats) -> String {
    let mut out = read_line(stats);
    for msg in &stats.first_rejections {
        out.push_str("\n  rejected: ");
        out.push_str(msg);
    }
    let kept = stats.first_rejections.len() as u64;
    if stats.rejected > kept {
        out.push_str(&format!(
            "\n  ... and {} more rejected records",
            stats.rejected - kept
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_report_counts_what_it_does_not_list() {
        let stats = ReadStats {
            records: 30,
            documents: 7,
            rejected: 23,
            duplicate_ids: 2,
            first_rejections: vec!["a.jsonl:2: field `text`: missing".into(); 20],
            ..ReadStats::default()
        };
        let text = read_stats(&stats);
        assert!(
            text.starts_with(
                "read 30 records: 7 documents, 23 rejected, 0 with invalid UTF-8 replaced, 2 duplicate ids"
            ),
            "{text}"
        );
        assert_eq!(text.matches("\n  rejected: a.jsonl:2: ").count(), 20);
        assert!(
            text.ends_with("\n  ... and 3 more rejected records"),
            "{text}"
        );
        let clean = ReadStats {
            records: 1,
            documents: 1,
            ..ReadStats::default()
        };
        assert_eq!(read_stats(&clean), read_line(&clean));
        assert!(!read_line(&clean).contains("duplicate"));
    }
}
