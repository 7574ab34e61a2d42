//! Signature kernels: one interface, chosen by name from a registry.
//!
//! A kernel turns the shingle ids of one document into `num_perm` 32-bit slots. Adding a kernel takes one file
//! plus one line in [`KERNELS`]; the shared tests and benches iterate the registry, so they come for free.
//!
//! OWNER: kernels helper (scalar.rs, simd.rs, oph.rs and the bodies here).

pub mod family;
pub mod fss;
pub mod oph;
pub mod scalar;
pub mod simd;

use crate::shingle::Shingler;
use std::fmt;

/// The instruction set a kernel actually runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// Plain scalar Rust, no explicit SIMD.
    Scalar,
    /// `wide`'s portable vectors (whatever the compile target gives them).
    Portable,
    Avx2,
    Avx512,
}

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Parses `scalar`, `portable`, `avx2`, `avx512`.
    pub fn parse(s: &str) -> Option<Isa> {
        match s {
            "scalar" => Some(Isa::Scalar),
            "portable" => Some(Isa::Portable),
            "avx2" => Some(Isa::Avx2),
            "avx512" => Some(Isa::Avx512),
            _ => None,
        }
    }

    /// Whether this CPU can run code for this instruction set.
    pub fn supported(self) -> bool {
        match self {
            Isa::Scalar | Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The widest instruction set this CPU supports, capped by the `LSHBENCH_ISA` environment variable when
    /// set (so CI can force each fallback path on one machine).
    pub fn detect() -> Isa {
        let best = [Isa::Avx512, Isa::Avx2, Isa::Portable]
            .into_iter()
            .find(|isa| isa.supported())
            .unwrap_or(Isa::Portable);
        match std::env::var("LSHBENCH_ISA")
            .ok()
            .as_deref()
            .and_then(Isa::parse)
        {
            Some(cap) if cap < best => cap,
            _ => best,
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A signature kernel. Implementations are immutable after construction and shared across threads.
pub trait Kernel: Send + Sync {
    /// The registry name, e.g. `simd`.
    fn name(&self) -> &'static str;
    /// k, the number of 32-bit slots per signature.
    fn num_perm(&self) -> usize;
    /// The instruction set this instance runs on.
    fn isa(&self) -> Isa;
    /// Writes the signature of the set whose elements are `ids` into `out` (`out.len() == num_perm()`).
    /// `ids` may repeat elements. An empty `ids` gives the defined empty signature (every slot `u32::MAX`);
    /// callers flag empty documents themselves, and such documents never become candidates.
    fn sign(&self, ids: &[u64], out: &mut [u32]);
    /// Signs one document straight from its text: the same signature as `shingler.hashes(text, ids)` followed
    /// by [`Kernel::sign`], which is what this default does. Returns whether the shingle set was empty. A kernel
    /// may override it with a loop that hashes windows straight from the text (see `oph`); `ids` is scratch
    /// space, and its contents afterwards are unspecified.
    fn sign_text(
        &self,
        shingler: &Shingler,
        text: &str,
        ids: &mut Vec<u64>,
        out: &mut [u32],
    ) -> bool {
        sign_via_ids(self, shingler, text, ids, out)
    }
    /// Estimated Jaccard similarity of the two sets behind `a` and `b`.
    fn estimate(&self, a: &[u32], b: &[u32]) -> f64 {
        fraction_equal(a, b)
    }
}

/// [`Kernel::sign_text`] the plain way: shingle `text` into `ids`, sign them, report whether the set was empty.
pub fn sign_via_ids<K: Kernel + ?Sized>(
    kernel: &K,
    shingler: &Shingler,
    text: &str,
    ids: &mut Vec<u64>,
    out: &mut [u32],
) -> bool {
    shingler.hashes(text, ids);
    kernel.sign(ids, out);
    ids.is_empty()
}

/// The classic estimator: the fraction of slots that agree.
pub fn fraction_equal(a: &[u32], b: &[u32]) -> f64 {
    assert_eq!(a.len(), b.len(), "signatures of different length");
    if a.is_empty() {
        return 0.0;
    }
    let equal = a.iter().zip(b).filter(|(x, y)| x == y).count();
    equal as f64 / a.len() as f64
}

/// What a kernel is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelParams {
    pub num_perm: usize,
    pub seed: u64,
    /// Force an instruction set (tests and benches); `None` picks [`Isa::detect`].
    pub isa: Option<Isa>,
}

/// One registry entry.
pub struct KernelSpec {
    pub name: &'static str,
    pub about: &'static str,
    pub build: fn(&KernelParams) -> anyhow::Result<Box<dyn Kernel>>,
}

/// Every kernel, by name. The first entry is the reference the others are checked against where they share a
/// hash family.
pub static KERNELS: &[KernelSpec] = &[
    scalar::SPEC,
    simd::SPEC,
    oph::SPEC_OPT,
    oph::SPEC_ROT,
    fss::SPEC,
];

/// Builds the kernel called `name`.
pub fn build(name: &str, params: &KernelParams) -> anyhow::Result<Box<dyn Kernel>> {
    if params.num_perm == 0 {
        anyhow::bail!("num_perm must be at least 1");
    }
    if let Some(isa) = params.isa
        && !isa.supported()
    {
        anyhow::bail!("instruction set {isa} is not supported by this CPU");
    }
    let spec = KERNELS.iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<_> = KERNELS.iter().map(|s| s.name).collect();
        anyhow::anyhow!("unknown kernel `{name}`; available: {}", names.join(", "))
    })?;
    (spec.build)(params)
}

/// The names of every registered kernel.
pub fn names() -> Vec<&'static str> {
    KERNELS.iter().map(|s| s.name).collect()
}

/// The kernel flags shared by `lshbench sketch` and friends.
#[derive(clap::Args, Clone, Debug)]
pub struct KernelArgs {
    /// Signature kernel: scalar, simd, oph-opt, oph-rot or fss (`lshbench info` lists them).
    #[arg(long, default_value = "simd")]
    pub kernel: String,
    /// k, the number of 32-bit slots per signature.
    #[arg(long, default_value_t = 128)]
    pub num_perm: usize,
    /// Seed of the kernel's hash functions and of the shingle hash.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Instruction set: auto picks the widest this CPU supports (capped by the LSHBENCH_ISA variable).
    #[arg(long, default_value = "auto", value_parser = ["auto", "scalar", "portable", "avx2", "avx512"])]
    pub isa: String,
}

impl KernelArgs {
    /// `None` for `auto`.
    pub fn isa(&self) -> Option<Isa> {
        Isa::parse(&self.isa)
    }

    pub fn params(&self) -> KernelParams {
        KernelParams {
            num_perm: self.num_perm,
            seed: self.seed,
            isa: self.isa(),
        }
    }

    /// Builds the chosen kernel; fails on an unknown name, k = 0 or an unsupported instruction set.
    pub fn build(&self) -> anyhow::Result<Box<dyn Kernel>> {
        build(&self.kernel, &self.params())
    }
}

/// Whether code compiled for AVX-512 (F/DQ/BW/VL) may run: the CPU has it and `LSHBENCH_ISA` does not cap it
/// lower. Decided once. Used by the shingler and `oph` for loops whose arithmetic is exact, so the choice
/// never changes an output.
pub fn wide_vectors() -> bool {
    static WIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WIDE.get_or_init(|| Isa::detect() == Isa::Avx512)
}
