//! `lshbench scurve`: the flags of one banding's S-curve ([`lshbench_core::lsh::scurve`]) and its table on stdout.

use lshbench_core::lsh::scurve::{Banding, ScurveOptions, format_probability};
use std::fmt::Write;

/// `lshbench scurve`: the P(s) table of one banding and its landmarks.
#[derive(clap::Args, Debug, Clone)]
pub struct ScurveArgs {
    /// Number of bands b (at most 16384).
    #[arg(long, short = 'b')]
    pub bands: usize,
    /// Rows (signature slots) per band r (at most 16384).
    #[arg(long, short = 'r')]
    pub rows: usize,
    /// Signature length k, only to check b*r <= k (default: b*r).
    #[arg(long)]
    pub num_perm: Option<usize>,
    /// Step of the similarity column of the table (0.0001 to 1).
    #[arg(long, default_value_t = 0.1)]
    pub step: f64,
    /// Also print the similarity at which P crosses each of these probabilities (comma separated).
    #[arg(long, value_delimiter = ',', default_values_t = [0.01, 0.5, 0.99])]
    pub crossings: Vec<f64>,
}

impl ScurveArgs {
    /// The S-curve options these flags describe.
    pub fn options(&self) -> ScurveOptions {
        ScurveOptions {
            bands: self.bands,
            rows: self.rows,
            num_perm: self.num_perm,
            step: self.step,
            crossings: self.crossings.clone(),
        }
    }
}

/// Runs `lshbench scurve`: prints the table.
pub fn run(args: &ScurveArgs) -> anyhow::Result<()> {
    use super::args::{at_most, limits};
    use lshbench_core::kernel::MAX_NUM_PERM;
    at_most("--bands", args.bands, MAX_NUM_PERM)?;
    at_most("--rows", args.rows, MAX_NUM_PERM)?;
    at_most("--num-perm", args.num_perm.unwrap_or(0), MAX_NUM_PERM)?;
    if args.step < limits::SCURVE_MIN_STEP {
        anyhow::bail!(
            "--step {} is below the limit {} (the table would have more than 10,001 rows)",
            args.step,
            limits::SCURVE_MIN_STEP
        );
    }
    if let Some(p) = args.crossings.iter().find(|p| !(0.0..=1.0).contains(*p)) {
        anyhow::bail!("--crossings: {p} is not a probability in [0, 1]");
    }
    let options = args.options();
    print!(
        "{}",
        table(&options.banding()?, options.step, &options.crossings)
    );
    Ok(())
}

/// The text `lshbench scurve` prints: the banding's landmarks and its P(s) table. `step` lies in (0, 1]
/// ([`ScurveOptions::banding`] checks it).
pub fn table(banding: &Banding, step: f64, crossings: &[f64]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "banding {banding}: {} bands x {} rows = {} hashes; P(s) = 1 - (1 - s^{})^{}",
        banding.bands,
        banding.rows,
        banding.hashes(),
        banding.rows,
        banding.bands
    );
    let _ = writeln!(
        out,
        "rule-of-thumb threshold (1/b)^(1/r) = {:.4}  (P there = {:.4})",
        banding.rule_of_thumb(),
        banding.probability(banding.rule_of_thumb())
    );
    let _ = writeln!(
        out,
        "steepest point ((r-1)/(rb-1))^(1/r) = {:.4}  (P there = {:.4})",
        banding.steepest_point(),
        banding.probability(banding.steepest_point())
    );
    let _ = writeln!(out, "P(s) = 1/2 at s = {:.4}", banding.half_point());
    for &p in crossings {
        let _ = writeln!(out, "P(s) = {p} at s = {:.4}", banding.crossing(p));
    }
    let _ = writeln!(out, "\n{:>6}  {:>10}", "s", "P(s)");
    let steps = (1.0 / step).round() as usize;
    for i in 0..=steps {
        let s = (i as f64 * step).min(1.0);
        let _ = writeln!(
            out,
            "{s:>6.3}  {:>10}",
            format_probability(banding.probability(s))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_the_landmarks() {
        let text = table(&Banding::new(20, 5, 100).unwrap(), 0.1, &[0.5]);
        assert!(
            text.contains("rule-of-thumb threshold (1/b)^(1/r) = 0.5493"),
            "{text}"
        );
        assert!(text.contains("P(s) = 0.5 at s = "), "{text}");
        assert!(text.contains("0.500      0.4701"), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.starts_with(" ")).count(),
            12,
            "{text}"
        );
    }
}
