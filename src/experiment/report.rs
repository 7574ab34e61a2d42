//! Markdown output: tables and each experiment's `summary.md` (headline tables, checks, machine, command).

use super::ExperimentError;
use super::runner::{Checks, Ctx};

/// A markdown table built row by row.
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headings and no rows.
    pub fn new<S: ToString>(header: &[S]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }
    /// Adds a row (one cell per heading).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }
    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    /// The table in markdown.
    pub fn to_markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut s = line(&self.header);
        s.push_str(&line(
            &self
                .header
                .iter()
                .map(|_| "---".to_string())
                .collect::<Vec<_>>(),
        ));
        for r in &self.rows {
            s.push_str(&line(r));
        }
        s
    }
}

/// Formats with `digits` decimals, trimming nothing (tables line up).
pub fn f(x: f64, digits: usize) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.digits$}")
    }
}

/// Writes `summary.md`: a title, the sections given, the checks, the machine and the command.
pub fn write_summary(
    ctx: &Ctx,
    title: &str,
    sections: &[(String, String)],
    checks: &Checks,
) -> Result<(), ExperimentError> {
    let mut md = format!("# {title}\n\n");
    for (heading, body) in sections {
        md.push_str(&format!("## {heading}\n\n{body}\n"));
    }
    md.push_str("## Self-checks\n\n");
    md.push_str(&checks.write(ctx)?);
    md.push_str(&format!(
        "\n## Provenance\n\n- machine: {}\n- commit: {}\n- regenerate: `{}`\n",
        ctx.meta.machine,
        ctx.meta.git_commit,
        ctx.command()
    ));
    ctx.write_file("summary.md", &md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_table_has_header_rule_and_rows() {
        let mut t = Table::new(&["s", "P(s)"]);
        t.row(vec!["0.5".into(), f(0.4701, 3)]);
        assert_eq!(
            t.to_markdown(),
            "| s | P(s) |\n| --- | --- |\n| 0.5 | 0.470 |\n"
        );
    }
}
