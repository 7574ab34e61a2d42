//! Signature kernels: one interface, chosen by name from a registry.
//!
//! A kernel turns the shingle ids of one document into `num_perm` 32-bit slots. Adding a kernel takes one file
//! plus one line in [`KERNELS`]; the shared tests and benches iterate the registry, so they come for free.
//!
//! A kernel never sees a shingler: it signs ids, or a text through the [`WindowSource`](crate::window::WindowSource) it is handed (the
//! window layer), so kernels and shinglers are siblings above the window stream. Vector code is reached only
//! through the [`crate::arch::Dispatch`] a kernel was built with.

pub mod bbit;
pub mod bins;
pub mod cminhash;
mod contract;
pub mod family;
pub mod fss;
pub mod oph;
pub mod ophhash;
pub mod scalar;
pub mod simd;
pub mod superminhash;
pub mod variance;

pub use crate::arch::Isa;
use crate::arch::Unsupported;

pub use contract::{
    Densification, Kernel, KernelError, KernelParams, KernelSpec, SketchFamily, fraction_equal,
    sign_via_ids,
};

/// Every kernel, by name. Adding a kernel is one file plus one line here (CONTRIBUTING.md walks through it).
pub static KERNELS: &[KernelSpec] = &[
    scalar::SPEC,
    simd::SPEC,
    oph::SPEC_OPT,
    oph::SPEC_ROT,
    fss::SPEC,
    superminhash::SPEC,
    cminhash::SPEC,
    ophhash::SPEC_MIX64,
    ophhash::SPEC_MS,
    ophhash::SPEC_TAB,
    ophhash::SPEC_FMIX32,
];

/// The registry entry called `name`.
pub fn spec(name: &str) -> Result<&'static KernelSpec, KernelError> {
    KERNELS
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| KernelError::Unknown {
            name: name.to_string(),
            available: names().join(", "),
        })
}

/// Builds the kernel called `name`: fails on an unknown name, k = 0 or an instruction set this CPU lacks.
pub fn build(name: &str, params: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    let spec = spec(name)?;
    build_spec(spec, params)
}

/// The largest signature length k a kernel is built with: 16384 slots (64 KiB a signature). A larger k sizes
/// memory (n x k slots) far beyond any use, so it is refused rather than left to exhaust memory.
pub const MAX_NUM_PERM: usize = 1 << 14;

/// Builds the kernel of a registry entry (also one outside [`KERNELS`], as tests do), with the checks every
/// kernel shares.
pub fn build_spec(
    spec: &KernelSpec,
    params: &KernelParams,
) -> Result<Box<dyn Kernel>, KernelError> {
    if params.num_perm == 0 {
        return Err(KernelError::NumPerm(
            "num_perm must be at least 1 (--num-perm 0)".into(),
        ));
    }
    if params.num_perm > MAX_NUM_PERM {
        return Err(KernelError::NumPerm(format!(
            "num_perm must be at most {MAX_NUM_PERM} (--num-perm {}): the limit on signature length",
            params.num_perm
        )));
    }
    if let Some(isa) = params.isa
        && !isa.supported()
    {
        return Err(Unsupported(isa).into());
    }
    (spec.build)(params)
}

/// The names of every registered kernel.
pub fn names() -> Vec<&'static str> {
    KERNELS.iter().map(|s| s.name).collect()
}
