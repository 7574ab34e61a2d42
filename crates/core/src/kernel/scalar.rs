//! `scalar`: classic MinHash, the reference every other kernel of the same family is checked against.
//!
//! Slot i is the minimum of `h_i` over the set, with the multiply-add-shift family of [`super::family`]. The
//! loop is the straightforward one (for each key, update all k slots); it is not hand-vectorised.

use super::contract::{Kernel, KernelError, KernelParams, KernelSpec, SketchFamily};
use super::family::Family;
use crate::arch::Isa;

/// The registry entry of `scalar`.
pub const SPEC: KernelSpec = KernelSpec {
    name: "scalar",
    about: "classic MinHash, k multiply-add-shift functions (the reference)",
    family: SketchFamily::Classic,
    same_output_as: None,
    build,
};

fn build(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    Ok(Box::new(ScalarMinHash::new(p.num_perm, p.seed)))
}

/// Classic MinHash computed one slot at a time.
pub struct ScalarMinHash {
    family: Family,
}

impl ScalarMinHash {
    /// The kernel with k = `num_perm` functions drawn from `seed`.
    pub fn new(num_perm: usize, seed: u64) -> Self {
        ScalarMinHash {
            family: Family::new(num_perm, seed),
        }
    }
}

impl Kernel for ScalarMinHash {
    fn name(&self) -> &'static str {
        "scalar"
    }
    fn num_perm(&self) -> usize {
        self.family.a.len()
    }
    fn isa(&self) -> Isa {
        Isa::Scalar
    }
    fn sign(&self, ids: &[u64], out: &mut [u32]) {
        assert_eq!(out.len(), self.num_perm(), "output length must be num_perm");
        out.fill(u32::MAX);
        let (a, b) = (&self.family.a, &self.family.b);
        for &id in ids {
            let x = self.family.key(id) as u64;
            for ((slot, &a), &b) in out.iter_mut().zip(a).zip(b) {
                let h = (a.wrapping_mul(x).wrapping_add(b) >> 32) as u32;
                *slot = (*slot).min(h);
            }
        }
    }
}
