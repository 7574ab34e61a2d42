//! Markdown output: tables and each experiment's `summary.md` (headline tables, checks, machine, command).

use super::runner::{Checks, Ctx};
use crate::error::ExperimentError;

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
    md.push_str("\n## Provenance\n\n");
    let computed = cell_provenance(&ctx.used_cells());
    if !computed.is_empty() {
        // Finished cells are reused by later runs, so the rows may come from other machines and commits than
        // the run that wrote this summary: each is named.
        md.push_str("- rows computed on (CPU, instruction set of the kernels, commit: cells):\n");
        for ((cpu, isa, commit), cells) in &computed {
            md.push_str(&format!("  - {cpu}, {isa}, {commit}: {cells}\n"));
        }
    }
    md.push_str(&format!(
        "- summary written on: {}; instruction set {}; commit {}\n- regenerate: `{}`\n",
        ctx.meta.machine,
        ctx.dispatch.isa().name(),
        ctx.meta.git_commit,
        ctx.command()
    ));
    ctx.write_file("summary.md", &md)
}

/// The distinct (CPU, instruction set, commit) of the rows in the cell files `cells`, with the number of cells
/// each computed. A file or row without those columns counts as "unrecorded"; a file that cannot be read, as
/// none.
fn cell_provenance(
    cells: &[std::path::PathBuf],
) -> std::collections::BTreeMap<(String, String, String), usize> {
    let mut out = std::collections::BTreeMap::new();
    for path in cells {
        let Ok(mut reader) = csv::Reader::from_path(path) else {
            continue;
        };
        let Ok(header) = reader.headers().cloned() else {
            continue;
        };
        let col = |name: &str| header.iter().position(|h| h == name);
        let (cpu, isa, commit) = (col("cpu_model"), col("isa"), col("git_commit"));
        let mut seen = std::collections::BTreeSet::new();
        for row in reader.records().flatten() {
            let get = |i: Option<usize>| {
                i.and_then(|i| row.get(i))
                    .filter(|v| !v.is_empty())
                    .unwrap_or("unrecorded")
                    .to_string()
            };
            seen.insert((get(cpu), get(isa), get(commit)));
        }
        for key in seen {
            *out.entry(key).or_insert(0) += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provenance_names_every_machine_isa_and_commit_of_the_cells() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "a.csv",
            "kernel,isa,git_commit,cpu_model\nsimd,avx512,abc,AMD EPYC\nfss,avx512,abc,AMD EPYC\n",
        );
        write(
            "b.csv",
            "kernel,isa,git_commit,cpu_model\nsimd,avx2,def,Intel Xeon\n",
        );
        write(
            "c.csv",
            "kernel,isa,git_commit,cpu_model\nsimd,avx512,abc,AMD EPYC\n",
        );
        write("d.csv", "kernel\nsimd\n");
        let cells: Vec<_> = ["a.csv", "b.csv", "c.csv", "d.csv"]
            .iter()
            .map(|n| dir.path().join(n))
            .collect();
        let got = cell_provenance(&cells);
        let key = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[&key("AMD EPYC", "avx512", "abc")], 2);
        assert_eq!(got[&key("Intel Xeon", "avx2", "def")], 1);
        assert_eq!(got[&key("unrecorded", "unrecorded", "unrecorded")], 1);
        assert!(cell_provenance(&[dir.path().join("missing.csv")]).is_empty());
    }

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
