//! What every kernel is and promises: the [`Kernel`] trait, its parameters and errors, the sketch family its
//! accuracy and S-curve are checked against, and the registry entry ([`KernelSpec`]) that names it.

use super::variance;
use crate::arch::Isa;
use crate::arch::Unsupported;
use crate::window::WindowSource;

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
    /// Signs one document straight from its text: the same signature as `windows.window_ids(text, ids)`
    /// followed by [`Kernel::sign`], which is what this default does. Returns whether the shingle set was empty.
    /// A kernel may override it with a loop that hashes windows straight from the text (see `oph`); `ids` is
    /// scratch space, and its contents afterwards are unspecified.
    fn sign_text(
        &self,
        windows: &dyn WindowSource,
        text: &str,
        ids: &mut Vec<u64>,
        out: &mut [u32],
    ) -> bool {
        sign_via_ids(self, windows, text, ids, out)
    }
    /// Estimated Jaccard similarity of the two sets behind `a` and `b`.
    fn estimate(&self, a: &[u32], b: &[u32]) -> f64 {
        fraction_equal(a, b)
    }
    /// Bits each slot keeps: 32, or fewer for b-bit slots ([`bbit::BBit`](crate::kernel::bbit::BBit)), whose chance agreement the
    /// banding must be tuned for (`lsh::choice::choose_banding`).
    fn slot_bits(&self) -> u32 {
        32
    }
}

/// [`Kernel::sign_text`] the plain way: cut `text` into window ids, sign them, report whether the set was empty.
pub fn sign_via_ids<K: Kernel + ?Sized>(
    kernel: &K,
    windows: &dyn WindowSource,
    text: &str,
    ids: &mut Vec<u64>,
    out: &mut [u32],
) -> bool {
    windows.window_ids(text, ids);
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
    /// k, the number of 32-bit slots per signature.
    pub num_perm: usize,
    /// Seed of the kernel's hash functions.
    pub seed: u64,
    /// Force an instruction set (tests and benches); `None` picks [`Isa::detect`].
    pub isa: Option<Isa>,
}

impl KernelParams {
    /// The checked instruction set: `isa`, or [`crate::arch::Dispatch::detect`]'s choice.
    pub fn dispatch(&self) -> Result<crate::arch::Dispatch, Unsupported> {
        crate::arch::Dispatch::of(self.isa)
    }
}

/// Why a kernel could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// No registry entry has this name.
    #[error("unknown kernel `{name}`; available: {available}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names the registry has, comma-separated.
        available: String,
    },
    /// k out of the kernel's range (the message says which range).
    #[error("{0}")]
    NumPerm(String),
    /// The instruction set asked for does not run on this CPU.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
}

/// How one-permutation hashing fills its empty bins: the variance and the band agreement on sparse sets depend
/// on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Densification {
    /// Optimal densification (Shrivastava, ICML 2017): an empty bin copies a uniformly chosen non-empty bin.
    Optimal,
    /// Rotation (Shrivastava and Li, ICML 2014): an empty bin copies the nearest non-empty bin to its right.
    Rotation,
}

/// The sketch family a kernel belongs to, and so the theory its accuracy and S-curve cells are checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SketchFamily {
    /// k independent min-wise hash functions: slot agreement is Bernoulli(J), independent across slots, so the
    /// estimator's variance is J(1-J)/k (relative MSE 1) and each band agrees with probability J^r.
    Classic,
    /// One-permutation hashing (Li, Owen, Zhang 2012) with densification: while no bin is empty the slots sample
    /// without replacement (relative MSE 1 - (k-1)/(f-1)); with empty bins the densification decides, in
    /// closed form for both schemes ([`variance`]). Bands are dependent (one element per bin).
    OnePermutation(Densification),
    /// Fast Similarity Sketching (Dahlgaard, Knudsen, Thorup 2017): collision probability J (up to ties), variance
    /// below classic MinHash's on small sets, in closed form ([`variance::rel_mse_fss`]).
    FastSimilarity,
    /// SuperMinHash (Ertl 2017): each element's k values come from one random permutation of the slots, so the
    /// slots are negatively correlated; collision probability J, relative MSE [`superminhash::alpha`](crate::kernel::superminhash::alpha) (below 1
    /// on sets smaller than about k, tending to 1 - (k-1)/(u-1) on large ones), and no bin is ever empty.
    SuperMinHash,
    /// C-MinHash with σ and π (Li and Li 2022): k circulant shifts of one permutation. Collision probability J;
    /// variance at most classic MinHash's, and equal to it up to window overlaps of probability about 2k/2^32
    /// per element pair when positions are hashed to 32 bits (see `cminhash`), so relative MSE 1 is enforced.
    Circulant,
}

impl SketchFamily {
    /// A short name for reports and `lshbench info`.
    pub fn name(self) -> &'static str {
        match self {
            SketchFamily::Classic => "classic MinHash",
            SketchFamily::OnePermutation(Densification::Optimal) => {
                "one-permutation hashing, optimal densification"
            }
            SketchFamily::OnePermutation(Densification::Rotation) => {
                "one-permutation hashing, rotation densification"
            }
            SketchFamily::FastSimilarity => "fast similarity sketching",
            SketchFamily::SuperMinHash => "SuperMinHash",
            SketchFamily::Circulant => "C-MinHash (circulant)",
        }
    }

    /// Whether a cell with union size `union` and `k` slots is sparse for this family: more than 5% of the k
    /// bins expected empty, where densification bends the S-curve away from 1 - (1 - J^r)^b.
    pub fn is_sparse(self, union: usize, k: usize) -> bool {
        match self {
            SketchFamily::OnePermutation(_) => variance::expected_empty_bins(union, k) >= 0.05,
            SketchFamily::Classic
            | SketchFamily::FastSimilarity
            | SketchFamily::SuperMinHash
            | SketchFamily::Circulant => false,
        }
    }

    /// Whether the bands of a signature are independent given the pair (slots from independent hash
    /// functions), so that each band is its own Bernoulli(J^r) trial.
    pub fn independent_bands(self) -> bool {
        matches!(self, SketchFamily::Classic | SketchFamily::Circulant)
    }

    /// The relative MSE (MSE / (J(1-J)/k)) this family's theory predicts at union size `union` and `k` slots
    /// ([`variance`] derives each); `None` for `union < 2`, where J is 0 or 1.
    pub fn predicted_rel_mse(self, union: usize, k: usize) -> Option<f64> {
        if union < 2 || k == 0 {
            return None;
        }
        Some(match self {
            SketchFamily::Classic => 1.0,
            SketchFamily::OnePermutation(Densification::Optimal) => {
                variance::rel_mse_oph_optimal(union, k)
            }
            SketchFamily::OnePermutation(Densification::Rotation) => {
                variance::rel_mse_oph_rotation(union, k)
            }
            SketchFamily::FastSimilarity => variance::rel_mse_fss(union, k),
            SketchFamily::SuperMinHash => variance::superminhash_alpha(union, k),
            SketchFamily::Circulant => 1.0,
        })
    }

    /// The published probability that one band of r = 5 rows agrees at f = 20, J = 0.5 under this family's
    /// densification (docs/src/published-figures.md: rotation 0.19, optimal 0.033, against J^r = 0.031). The S-curve
    /// check expects sparse band agreement above J^r where the quoted value is far above it (rotation).
    pub fn quoted_band_agreement(self) -> Option<f64> {
        match self {
            SketchFamily::OnePermutation(Densification::Rotation) => Some(0.19),
            SketchFamily::OnePermutation(Densification::Optimal) => Some(0.033),
            _ => None,
        }
    }
}

/// One registry entry: everything the harness, the CLI and the tests know about a kernel.
pub struct KernelSpec {
    /// The registry name, what `--kernel` takes.
    pub name: &'static str,
    /// One line: what it is and where it comes from.
    pub about: &'static str,
    /// The theory its cells are checked against.
    pub family: SketchFamily,
    /// The kernel whose signatures this one reproduces bit for bit (same hash family, another loop), if any.
    pub same_output_as: Option<&'static str>,
    /// Builds the kernel (after [`build_spec`](crate::kernel::build_spec)'s shared checks).
    pub build: fn(&KernelParams) -> Result<Box<dyn Kernel>, KernelError>,
}
