//! The command-line interface. Each subcommand parses its flags here and calls into the library.
//!
//! OWNER: lead.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "lshbench",
    version,
    about = "Near-duplicate detection with MinHash and LSH: kernels, S-curves, dedup"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// CPU features seen, the instruction set each kernel runs on, the kernels available.
    Info,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Info => info(),
    }
}

fn info() -> anyhow::Result<()> {
    use crate::kernel::{self, Isa, KernelParams};
    println!("machine: {}", crate::machine::describe());
    println!("detected ISA: {}", Isa::detect());
    println!("kernels:");
    for spec in kernel::KERNELS {
        let params = KernelParams {
            num_perm: 128,
            seed: 42,
            isa: None,
        };
        match (spec.build)(&params) {
            Ok(k) => println!(
                "  {:<10} runs on {:<8} {}",
                spec.name,
                k.isa().name(),
                spec.about
            ),
            Err(e) => println!("  {:<10} unavailable: {e}", spec.name),
        }
    }
    Ok(())
}
