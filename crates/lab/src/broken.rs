//! The deliberately broken kernels that fault injection ([`super::faults`]) runs the self-checks on: each a
//! [`KernelSpec`] built through the normal interface (a registry entry, a family, a builder) around a correct
//! kernel, declaring the family of the kernel it pretends to be. They live here, not in
//! [`lshbench_core::kernel::KERNELS`], so no user can pick one. One fault is in the harness rather than the kernel (the
//! band width the pairs are matched on); it is marked as such. Configs name them ([`super::config`]), so this
//! file depends on nothing else of the harness.

use lshbench_core::kernel::oph::{Densify, Oph};
use lshbench_core::kernel::{
    Densification, Isa, Kernel, KernelError, KernelParams, KernelSpec, SketchFamily,
};

/// One deliberately broken subject.
pub struct Fault {
    /// What is broken, for the table.
    pub about: &'static str,
    /// The broken kernel, as a registry entry (name, claimed family, builder).
    pub spec: KernelSpec,
    /// Rows added to the band width the S-curve matches pairs on (a harness fault; 0 for kernel faults).
    pub band_width_offset: usize,
}

/// Every fault, by name.
pub static FAULTS: &[Fault] = &[
    Fault {
        about: "biased estimator: add-one smoothing, (matches + 1) / (k + 1), on simd's slots",
        spec: KernelSpec {
            name: "fault-biased-estimator",
            about: "simd with a biased estimator",
            family: SketchFamily::Classic,
            same_output_as: None,
            build: build_biased,
        },
        band_width_offset: 0,
    },
    Fault {
        about: "correlated slots: slot 4i + 1 repeats slot 4i (two slots share one hash function)",
        spec: KernelSpec {
            name: "fault-correlated-slots",
            about: "simd with every fourth pair of slots sharing a hash function",
            family: SketchFamily::Classic,
            same_output_as: None,
            build: build_correlated,
        },
        band_width_offset: 0,
    },
    Fault {
        about: "rotation densification labelled as optimal (oph-rot declaring oph-opt's family)",
        spec: KernelSpec {
            name: "fault-rotation-as-optimal",
            about: "oph-rot claiming optimal densification",
            family: SketchFamily::OnePermutation(Densification::Optimal),
            same_output_as: None,
            build: build_rotation_as_optimal,
        },
        band_width_offset: 0,
    },
    Fault {
        about: "dropped SIMD lane: lane 7 of every 8 slots left at its initial value (u32::MAX)",
        spec: KernelSpec {
            name: "fault-dropped-lane",
            about: "simd with one lane of 8 never written",
            family: SketchFamily::Classic,
            same_output_as: Some("simd"),
            build: build_dropped_lane,
        },
        band_width_offset: 0,
    },
    Fault {
        about: "wrong band width: pairs matched on bands of r + 1 rows while theory uses r (harness fault)",
        spec: KernelSpec {
            name: "fault-band-width",
            about: "simd, matched on bands one row too wide",
            family: SketchFamily::Classic,
            same_output_as: None,
            build: build_simd,
        },
        band_width_offset: 1,
    },
    Fault {
        about: "correlated seeds between trials: the kernel keeps only 2 bits of its seed",
        spec: KernelSpec {
            name: "fault-correlated-seeds",
            about: "simd built from seed & 3",
            family: SketchFamily::Classic,
            same_output_as: None,
            build: build_correlated_seeds,
        },
        band_width_offset: 0,
    },
    Fault {
        about: "undensified OPH: empty bins keep the empty marker, so two sets agree on every bin both miss",
        spec: KernelSpec {
            name: "fault-undensified-oph",
            about: "oph-opt's raw sketch under the optimal-densification family",
            family: SketchFamily::OnePermutation(Densification::Optimal),
            same_output_as: None,
            build: build_undensified,
        },
        band_width_offset: 0,
    },
];

/// The fault called `name`.
pub fn fault(name: &str) -> Option<&'static Fault> {
    FAULTS.iter().find(|f| f.spec.name == name)
}

/// The message for a fault name not in [`FAULTS`].
pub fn unknown_fault(name: &str) -> String {
    format!(
        "unknown fault `{name}`; available: {}",
        FAULTS
            .iter()
            .map(|f| f.spec.name)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// An estimator over two signatures.
type Estimator = fn(&[u32], &[u32]) -> f64;

/// A correct kernel with its slots or its estimator broken after signing.
struct Broken {
    name: &'static str,
    inner: Box<dyn Kernel>,
    /// Rewrites the slots after the inner kernel signed.
    slots: fn(&mut [u32]),
    /// Replaces the estimator.
    estimate: Option<Estimator>,
}

impl Kernel for Broken {
    fn name(&self) -> &'static str {
        self.name
    }
    fn num_perm(&self) -> usize {
        self.inner.num_perm()
    }
    fn isa(&self) -> Isa {
        self.inner.isa()
    }
    fn sign(&self, ids: &[u64], out: &mut [u32]) {
        self.inner.sign(ids, out);
        (self.slots)(out);
    }
    fn estimate(&self, a: &[u32], b: &[u32]) -> f64 {
        match self.estimate {
            Some(e) => e(a, b),
            None => self.inner.estimate(a, b),
        }
    }
}

fn keep(_: &mut [u32]) {}

fn broken(
    name: &'static str,
    inner: &str,
    p: &KernelParams,
    slots: fn(&mut [u32]),
    estimate: Option<Estimator>,
) -> Result<Box<dyn Kernel>, KernelError> {
    Ok(Box::new(Broken {
        name,
        inner: lshbench_core::kernel::build(inner, p)?,
        slots,
        estimate,
    }))
}

fn build_simd(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    lshbench_core::kernel::build("simd", p)
}

fn build_biased(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    fn add_one(a: &[u32], b: &[u32]) -> f64 {
        let equal = a.iter().zip(b).filter(|(x, y)| x == y).count();
        (equal + 1) as f64 / (a.len() + 1) as f64
    }
    broken("fault-biased-estimator", "simd", p, keep, Some(add_one))
}

fn build_correlated(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    fn share(out: &mut [u32]) {
        for i in (1..out.len()).filter(|i| i % 4 == 1) {
            out[i] = out[i - 1];
        }
    }
    broken("fault-correlated-slots", "simd", p, share, None)
}

fn build_rotation_as_optimal(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    lshbench_core::kernel::build("oph-rot", p)
}

fn build_dropped_lane(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    fn drop_lane(out: &mut [u32]) {
        for i in (0..out.len()).filter(|i| i % 8 == 7) {
            out[i] = u32::MAX;
        }
    }
    broken("fault-dropped-lane", "simd", p, drop_lane, None)
}

fn build_correlated_seeds(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    let weak = KernelParams {
        seed: p.seed & 3,
        ..*p
    };
    lshbench_core::kernel::build("simd", &weak)
}

/// OPH's raw sketch with the plain fraction-of-equal-slots estimator: empty bins are `EMPTY` in both sets.
struct Undensified(Oph);

impl Kernel for Undensified {
    fn name(&self) -> &'static str {
        "fault-undensified-oph"
    }
    fn num_perm(&self) -> usize {
        self.0.num_perm()
    }
    fn isa(&self) -> Isa {
        self.0.isa()
    }
    fn sign(&self, ids: &[u64], out: &mut [u32]) {
        self.0.sign_raw(ids, out);
    }
}

fn build_undensified(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    Ok(Box::new(Undensified(
        Oph::new(p.num_perm, p.seed, Densify::Optimal).with_dispatch(p.dispatch()?),
    )))
}
