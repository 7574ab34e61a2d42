//! OWNER: kernels helper. Placeholder so the skeleton compiles.
use super::{Kernel, KernelParams, KernelSpec};

pub const SPEC_OPT: KernelSpec = KernelSpec {
    name: "oph-opt",
    about: "todo",
    build,
};
pub const SPEC_ROT: KernelSpec = KernelSpec {
    name: "oph-rot",
    about: "todo",
    build,
};

fn build(_p: &KernelParams) -> anyhow::Result<Box<dyn Kernel>> {
    anyhow::bail!("kernel oph is not written yet")
}
