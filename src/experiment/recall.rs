//! The recall experiment (being written).
use super::config::RecallConfig;
use super::runner::{Checks, Ctx};
pub fn run(_ctx: &Ctx, _cfg: &RecallConfig) -> anyhow::Result<Checks> {
    anyhow::bail!("the recall experiment is not written yet")
}
