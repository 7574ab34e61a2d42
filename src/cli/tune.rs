//! `lshbench tune`: the flags of (b, r) tuning ([`lshbench_core::lsh::tune`]) and its table on stdout.

use lshbench_core::lsh::tune::{DatasketchOptions, Targets, TuneOptions};

fn parse_target(s: &str) -> Result<(f64, f64), String> {
    let (sim, p) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}`: expected SIMILARITY:PROBABILITY, e.g. 0.5:0.01"))?;
    let sim: f64 = sim
        .parse()
        .map_err(|_| format!("`{s}`: `{sim}` is not a number"))?;
    let p: f64 = p
        .parse()
        .map_err(|_| format!("`{s}`: `{p}` is not a number"))?;
    if !(0.0..=1.0).contains(&sim) || !(0.0..=1.0).contains(&p) {
        return Err(format!("`{s}`: both numbers must lie in [0, 1]"));
    }
    Ok((sim, p))
}

/// How `lshbench tune` chooses.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TuneMethod {
    /// Targets on P(s_lo) and P(s_hi), crossing points from the S-curve (this crate's method).
    Targets,
    /// Also datasketch's integral-based choice at --threshold, side by side.
    Datasketch,
}

/// `lshbench tune`: which (b, r) for a signature of k slots?
#[derive(clap::Args, Debug, Clone)]
pub struct TuneArgs {
    /// Signature length k (at most 16384); every (b, r) with b*r <= k is considered.
    #[arg(long, default_value_t = 128)]
    pub num_perm: usize,
    /// Recall target SIM:FN: pairs of similarity SIM must be missed with probability at most FN.
    #[arg(long = "fn", value_parser = parse_target, default_value = "0.5:0.01")]
    pub fn_target: (f64, f64),
    /// False-positive target SIM:FP: pairs of similarity SIM may become candidates with probability at most FP.
    #[arg(long = "fp", value_parser = parse_target, default_value = "0.05:0.001")]
    pub fp_target: (f64, f64),
    /// `targets`, or `datasketch` to add datasketch's integral-based choice at --threshold.
    #[arg(long, value_enum, default_value_t = TuneMethod::Targets)]
    pub method: TuneMethod,
    /// The threshold for --method datasketch (default: the --fn similarity).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// datasketch's weights FP,FN (its default 0.5,0.5).
    #[arg(long, value_delimiter = ',', num_args = 2, default_values_t = [0.5, 0.5])]
    pub weights: Vec<f64>,
    /// How many rows of the table to print (feasible set or Pareto front).
    #[arg(long, default_value_t = 15)]
    pub top: usize,
}

impl TuneArgs {
    /// The tuning options these flags describe.
    pub fn options(&self) -> TuneOptions {
        let targets = Targets {
            s_hi: self.fn_target.0,
            max_fn: self.fn_target.1,
            s_lo: self.fp_target.0,
            max_fp: self.fp_target.1,
        };
        let datasketch = match self.method {
            TuneMethod::Targets => None,
            TuneMethod::Datasketch => Some(DatasketchOptions {
                threshold: self.threshold.unwrap_or(targets.s_hi),
                weights: (self.weights[0], self.weights[1]),
            }),
        };
        TuneOptions {
            num_perm: self.num_perm,
            targets,
            top: self.top,
            datasketch,
        }
    }
}

/// Runs `lshbench tune`: prints the tuning table.
pub fn run(args: &TuneArgs) -> anyhow::Result<()> {
    use super::args::{at_most, limits};
    at_most(
        "--num-perm",
        args.num_perm,
        lshbench_core::kernel::MAX_NUM_PERM,
    )?;
    at_most("--top", args.top, limits::TUNE_TOP)?;
    let options = args.options();
    options.validate()?;
    if args.method == TuneMethod::Targets && args.threshold.is_some() {
        anyhow::bail!("--threshold is used only with --method datasketch");
    }
    print!("{}", options.report()?);
    Ok(())
}
