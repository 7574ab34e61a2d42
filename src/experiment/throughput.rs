//! The throughput experiment (being written).
use super::config::ThroughputConfig;
use super::runner::{Checks, Ctx};
pub fn run(_ctx: &Ctx, _cfg: &ThroughputConfig) -> anyhow::Result<Checks> {
    anyhow::bail!("the throughput experiment is not written yet")
}
