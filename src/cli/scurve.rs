//! `lshbench scurve`: the flags of one banding's S-curve ([`lshbench_core::lsh::scurve`]) and its table on stdout.

use lshbench_core::lsh::scurve::ScurveOptions;

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
    print!("{}", args.options().report()?);
    Ok(())
}
