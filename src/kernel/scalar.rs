//! OWNER: kernels helper. Placeholder so the skeleton compiles.
use super::{Kernel, KernelParams, KernelSpec};

pub const SPEC: KernelSpec = KernelSpec {
    name: "scalar",
    about: "todo",
    build,
};

fn build(_p: &KernelParams) -> anyhow::Result<Box<dyn Kernel>> {
    anyhow::bail!("kernel scalar is not written yet")
}
