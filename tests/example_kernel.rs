//! A kernel written the way CONTRIBUTING.md says: one file that defines the kernel and its `KernelSpec`. In
//! the library the file would be `crates/core/src/kernel/kmix.rs` and the registry line `kmix::SPEC,` in
//! `crates/core/src/kernel/mod.rs`; here it lives in a test and is handed to the same contract every registered kernel
//! passes (`tests/common`), which is the proof that a kernel needs nothing more to get its tests.
//!
//! `kmix`: classic MinHash with k independent seeded mixers, slot i = min over the set of
//! `hi32(mix64(id ^ s_i))`. Slow (k mixes per element) and simple: a reference a reader can check by eye.

mod common;

mod kmix {
    use lshbench_core::arch::Isa;
    use lshbench_core::hash::mix64;
    use lshbench_core::kernel::{Kernel, KernelError, KernelParams, KernelSpec, SketchFamily};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};

    /// The registry entry: name, one line of what it is, its family (so the harness knows which theory to check
    /// it against), and its builder.
    pub const SPEC: KernelSpec = KernelSpec {
        name: "kmix",
        about: "classic MinHash with k seeded SplitMix64 mixers (an example kernel)",
        family: SketchFamily::Classic,
        same_output_as: None,
        build,
    };

    fn build(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(p.seed);
        Ok(Box::new(KMix {
            seeds: (0..p.num_perm).map(|_| rng.next_u64()).collect(),
        }))
    }

    pub struct KMix {
        seeds: Vec<u64>,
    }

    impl Kernel for KMix {
        fn name(&self) -> &'static str {
            SPEC.name
        }
        fn num_perm(&self) -> usize {
            self.seeds.len()
        }
        fn isa(&self) -> Isa {
            Isa::Scalar
        }
        fn sign(&self, ids: &[u64], out: &mut [u32]) {
            assert_eq!(
                out.len(),
                self.seeds.len(),
                "output length must be num_perm"
            );
            out.fill(u32::MAX);
            for &id in ids {
                for (slot, &s) in out.iter_mut().zip(&self.seeds) {
                    *slot = (*slot).min((mix64(id ^ s) >> 32) as u32);
                }
            }
        }
    }
}

#[test]
fn an_example_kernel_outside_the_registry_meets_the_shared_contract() {
    common::check_contract(&kmix::SPEC);
}

/// The contract can fail: a kernel whose estimate is biased (it drops the lowest slot's information by
/// shifting every slot) does not pass.
#[test]
fn the_contract_catches_a_biased_kernel() {
    use lshbench_core::kernel::{Kernel, KernelError, KernelParams, KernelSpec};
    struct Biased(Box<dyn Kernel>);
    impl Kernel for Biased {
        fn name(&self) -> &'static str {
            "biased"
        }
        fn num_perm(&self) -> usize {
            self.0.num_perm()
        }
        fn isa(&self) -> lshbench_core::arch::Isa {
            self.0.isa()
        }
        fn sign(&self, ids: &[u64], out: &mut [u32]) {
            self.0.sign(ids, out);
        }
        // Reads a quarter of the slots as agreeing whatever they hold: E[estimate] = J + (1 - J) / 4.
        fn estimate(&self, a: &[u32], b: &[u32]) -> f64 {
            let agree = a
                .iter()
                .zip(b)
                .enumerate()
                .filter(|(i, (x, y))| x == y || i % 4 == 0)
                .count();
            agree as f64 / a.len() as f64
        }
    }
    fn build(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
        Ok(Box::new(Biased((kmix::SPEC.build)(p)?)))
    }
    let spec = KernelSpec {
        name: "biased",
        build,
        ..kmix::SPEC
    };
    let caught = std::panic::catch_unwind(|| common::check_contract(&spec));
    assert!(caught.is_err(), "a biased estimator passed the contract");
}
