//! `superminhash`: SuperMinHash (Ertl 2017, "SuperMinHash — A New Minwise Hashing Algorithm for Jaccard
//! Similarity Estimation").
//!
//! Every element `x` gets its own random permutation `pi_x` of the k slots and k uniform fractions `r_x,j`;
//! slot `pi_x(j)` is offered the value `j + r_x,j`, and each slot keeps the smallest value offered. Since the
//! k values of one element are spread over k different integer parts, the slots are negatively correlated and
//! the estimator (the fraction of equal slots) has a variance below classic MinHash's on small sets (see
//! [`alpha`]).
//!
//! One pass over the elements: for element `x` a generator seeded by `mix64(id ^ seed)` drives a partial
//! Fisher–Yates shuffle, drawing position `j = 0, 1, ...` in turn. The shuffle stops once `j` exceeds the
//! integer part of every slot's current value (tracked with a histogram of integer parts, Ertl's Algorithm 1),
//! since no later position can win a slot. That bound only skips offers that cannot win, so the signature is
//! the minimum over the full definition: independent of element order and repeats.
//!
//! A value is kept exactly as the 64-bit word `j << 32 | r` (`r` the 32-bit fraction), so order and ties are
//! decided in integers; the slot stores the fraction `r`, which for a set of fewer than 2^16 elements
//! identifies the winning element up to a 2^-32 collision, like every other kernel's 32-bit slot.
//!
//! Instruction sets: the shuffle is sequential per element (each step reads the slot state the previous step
//! wrote, and the stopping bound moves as slots fill), so it has no vector form across slots or elements. The
//! one independent part, hashing every id to its generator seed, runs as an AVX-512 compilation of the same
//! integer code when the dispatch chose AVX-512; the output is identical on every instruction set.

use super::contract::{Kernel, KernelError, KernelParams, KernelSpec, SketchFamily};
#[cfg(target_arch = "x86_64")]
use crate::arch::Avx512;
use crate::arch::Dispatch;
use crate::arch::Isa;
use crate::hash::{GOLDEN, mix64};
use std::cell::RefCell;

/// The registry entry of `superminhash`.
pub const SPEC: KernelSpec = KernelSpec {
    name: "superminhash",
    about: "SuperMinHash (Ertl 2017): one pass, a partial shuffle per element, below MinHash's variance on small sets",
    family: SketchFamily::SuperMinHash,
    same_output_as: None,
    build,
};

/// The largest k: positions must fit the 32 high bits of a value.
pub const MAX_NUM_PERM: usize = 1 << 24;

fn build(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    if p.num_perm > MAX_NUM_PERM {
        return Err(KernelError::NumPerm(format!(
            "superminhash supports num_perm up to {MAX_NUM_PERM}"
        )));
    }
    Ok(Box::new(SuperMinHash::new(
        p.num_perm,
        p.seed,
        p.dispatch()?,
    )))
}

/// The relative variance of SuperMinHash (derived in [`super::variance`], with every family's closed form).
pub use super::variance::superminhash_alpha as alpha;

/// Scratch space of one signing call: slot values, the permutation, the element that last touched each
/// position, and the histogram of integer parts.
#[derive(Default)]
struct Scratch {
    seeds: Vec<u64>,
    values: Vec<u64>,
    perm: Vec<u32>,
    owner: Vec<u32>,
    hist: Vec<u32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// SuperMinHash.
pub struct SuperMinHash {
    num_perm: usize,
    seed: u64,
    dispatch: Dispatch,
}

impl SuperMinHash {
    /// The kernel with k = `num_perm` slots, its generators keyed by `seed`.
    pub fn new(num_perm: usize, seed: u64, dispatch: Dispatch) -> Self {
        SuperMinHash {
            num_perm,
            // Spread the user's seed so that seeds 1 and 2 give unrelated element keys.
            seed: mix64(seed ^ 0x5350_4d48_5348_4d48),
            dispatch,
        }
    }

    /// Signs `ids` and returns how many shuffle steps were taken in all (the work the early stop leaves).
    pub fn sign_counting_steps(&self, ids: &[u64], out: &mut [u32]) -> usize {
        assert_eq!(out.len(), self.num_perm, "output length must be num_perm");
        let k = self.num_perm;
        SCRATCH.with_borrow_mut(|s| {
            element_seeds(ids, self.seed, self.dispatch, &mut s.seeds);
            s.values.clear();
            s.values.resize(k, u64::MAX);
            s.perm.resize(k, 0);
            s.owner.clear();
            s.owner.resize(k, u32::MAX);
            s.hist.clear();
            s.hist.resize(k, 0);
            s.hist[k - 1] = k as u32;
            let seeds = std::mem::take(&mut s.seeds);
            let steps = shuffle_all(&seeds, s);
            s.seeds = seeds;
            for (o, &v) in out.iter_mut().zip(&s.values) {
                *o = v as u32;
            }
            steps
        })
    }
}

/// Ertl's Algorithm 1 over every element seed; returns the number of shuffle steps.
fn shuffle_all(seeds: &[u64], s: &mut Scratch) -> usize {
    let k = s.values.len();
    let (values, perm, owner, hist) = (&mut s.values, &mut s.perm, &mut s.owner, &mut s.hist);
    // The largest integer part any slot may still have (capped at k - 1): positions beyond it cannot win.
    let mut bound = k - 1;
    let mut steps = 0usize;
    for (i, &element_seed) in seeds.iter().enumerate() {
        // Element indices are below u32::MAX (the caller's id count); the owner marker starts at u32::MAX.
        let i = i as u32;
        let mut state = element_seed;
        let mut j = 0usize;
        while j <= bound {
            state = state.wrapping_add(GOLDEN);
            let z = mix64(state);
            let fraction = z >> 32;
            // A position uniform on j..k (Lemire's multiply-shift; the bias is below k / 2^32).
            let pick = j + (((z & 0xffff_ffff) * (k - j) as u64) >> 32) as usize;
            // The permutation is reset lazily: a position this element has not touched holds itself.
            if owner[j] != i {
                owner[j] = i;
                perm[j] = j as u32;
            }
            if owner[pick] != i {
                owner[pick] = i;
                perm[pick] = pick as u32;
            }
            perm.swap(j, pick);
            let slot = perm[j] as usize;
            let value = ((j as u64) << 32) | fraction;
            if value < values[slot] {
                let old = ((values[slot] >> 32) as usize).min(k - 1);
                values[slot] = value;
                if j < old {
                    hist[old] -= 1;
                    hist[j] += 1;
                    while hist[bound] == 0 {
                        bound -= 1;
                    }
                }
            }
            j += 1;
        }
        steps += j;
    }
    steps
}

/// `out[i] = mix64(ids[i] ^ seed)`, the generator seed of each element; the AVX-512 compilation of the same
/// integer code when `dispatch` chose it (so the same seeds).
fn element_seeds(ids: &[u64], seed: u64, dispatch: Dispatch, out: &mut Vec<u64>) {
    assert!(
        ids.len() < u32::MAX as usize,
        "superminhash signs fewer than 2^32 - 1 ids per set"
    );
    out.clear();
    out.resize(ids.len(), 0);
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = dispatch.avx512() {
        // SAFETY: the token proves AVX-512 F/DQ/BW/VL.
        unsafe { element_seeds_avx512(token, ids, seed, out) };
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = dispatch;
    element_seeds_plain(ids, seed, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn element_seeds_avx512(_: Avx512, ids: &[u64], seed: u64, out: &mut [u64]) {
    element_seeds_plain(ids, seed, out)
}

#[inline(always)]
fn element_seeds_plain(ids: &[u64], seed: u64, out: &mut [u64]) {
    for (o, &id) in out.iter_mut().zip(ids) {
        *o = mix64(id ^ seed);
    }
}

impl Kernel for SuperMinHash {
    fn name(&self) -> &'static str {
        "superminhash"
    }
    fn num_perm(&self) -> usize {
        self.num_perm
    }
    fn isa(&self) -> Isa {
        if self.dispatch.avx512().is_some() {
            Isa::Avx512
        } else {
            Isa::Scalar
        }
    }
    fn sign(&self, ids: &[u64], out: &mut [u32]) {
        // The empty set leaves every value u64::MAX, whose low half is the empty slot u32::MAX.
        self.sign_counting_steps(ids, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition without the early stop: every element's full shuffle, slot-wise minimum.
    fn reference(k: usize, seed: u64, ids: &[u64]) -> Vec<u32> {
        let seed = mix64(seed ^ 0x5350_4d48_5348_4d48);
        let mut values = vec![u64::MAX; k];
        for &id in ids {
            let mut state = mix64(id ^ seed);
            let mut perm: Vec<usize> = (0..k).collect();
            for j in 0..k {
                state = state.wrapping_add(GOLDEN);
                let z = mix64(state);
                let pick = j + (((z & 0xffff_ffff) * (k - j) as u64) >> 32) as usize;
                perm.swap(j, pick);
                let v = ((j as u64) << 32) | (z >> 32);
                values[perm[j]] = values[perm[j]].min(v);
            }
        }
        values.iter().map(|&v| v as u32).collect()
    }

    #[test]
    fn the_early_stop_changes_nothing() {
        let dispatch = Dispatch::detect();
        for k in [1usize, 2, 7, 64, 200] {
            for n in [1usize, 2, 5, 50, 1000] {
                let ids: Vec<u64> = (0..n as u64).map(|i| mix64(i + 1000 * k as u64)).collect();
                let kern = SuperMinHash::new(k, 9, dispatch);
                let mut out = vec![0u32; k];
                kern.sign(&ids, &mut out);
                assert_eq!(out, reference(k, 9, &ids), "k={k} n={n}");
            }
        }
    }

    #[test]
    fn the_early_stop_leaves_few_steps_per_element_on_large_sets() {
        let k = 128;
        let kern = SuperMinHash::new(k, 1, Dispatch::detect());
        let ids: Vec<u64> = (0..20_000u64).collect();
        let mut out = vec![0u32; k];
        let steps = kern.sign_counting_steps(&ids, &mut out);
        // Expected O(k log k) + O(n): far below the n k of the full definition.
        assert!(steps < 4 * ids.len(), "{steps} steps for {} ids", ids.len());
    }

    #[test]
    fn alpha_matches_its_limits_and_a_direct_sum() {
        let k = 32;
        assert!((alpha(1024, k) - (1.0 - 31.0 / 1023.0)).abs() < 1e-6);
        assert!((alpha(100_000, k) - (1.0 - 31.0 / 99_999.0)).abs() < 1e-9);
        // k = 2: one slot each way, the two values of an element have integer parts 0 and 1.
        // p = 2/(u 2^u) * 1 = 2^(1-u)/u, so alpha = 1 + (2^(1-u) - 1)/(u - 1).
        for u in [2usize, 3, 10] {
            let want = 1.0 + (2f64.powi(1 - u as i32) - 1.0) / (u as f64 - 1.0);
            assert!((alpha(u, 2) - want).abs() < 1e-12, "u={u}");
        }
    }

    /// The closed form against a simulation of the kernel itself: at k = 32, J = 0.5 and small unions the
    /// relative MSE of 4000 fresh-seeded trials lies within z sqrt(2/T) * alpha of `alpha`.
    #[test]
    fn alpha_predicts_the_measured_relative_mse() {
        let k = 32;
        let trials = 4000;
        for union in [4usize, 8, 32] {
            let both = union / 2;
            let j = both as f64 / union as f64;
            let mut sum = 0.0;
            for t in 0..trials {
                let kern = SuperMinHash::new(k, 50_000 + t as u64, Dispatch::detect());
                let base = (t as u64) << 20;
                let a: Vec<u64> = (0..both + (union - both) / 2)
                    .map(|i| base + i as u64)
                    .collect();
                let b: Vec<u64> = (0..both)
                    .chain(both + (union - both) / 2..union)
                    .map(|i| base + i as u64)
                    .collect();
                let (mut sa, mut sb) = (vec![0u32; k], vec![0u32; k]);
                kern.sign(&a, &mut sa);
                kern.sign(&b, &mut sb);
                let est = kern.estimate(&sa, &sb);
                sum += (est - j).powi(2);
            }
            let rel = sum / trials as f64 / (j * (1.0 - j) / k as f64);
            let want = alpha(union, k);
            let bound = 4.89 * (2.0 / trials as f64).sqrt() * want;
            assert!(
                (rel - want).abs() <= bound,
                "u={union}: relative MSE {rel:.3}, alpha {want:.3} +- {bound:.3}"
            );
            // And it is well below classic MinHash's 1 here.
            assert!(want < 0.6, "u={union}: {want}");
        }
    }
}
