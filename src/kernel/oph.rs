//! `oph-opt` and `oph-rot`: one-permutation hashing (Li, Owen, Zhang 2012) with densification.
//!
//! Each id is mixed once, `h = mix64(id ^ s)`. The high 32 bits pick the bin with a multiply-range reduction,
//! `bin = (hi32(h) * k) >> 32`, so k need not be a power of two; the low 32 bits are the value, and each bin
//! keeps its minimum. Values are capped at `u32::MAX - 1`, so [`EMPTY`] marks an empty bin in the raw sketch
//! unambiguously (the cap merges two of 2^32 values: a 2^-32 effect).
//!
//! Empty bins are then filled:
//! - optimal densification (Shrivastava, ICML 2017): empty bin j probes bins `g(j, 1), g(j, 2), ...`, with g a
//!   seeded hash of (bin, attempt) reduced to `0..k`, until it hits a bin that was non-empty in the raw sketch,
//!   and copies that bin's value. Every set uses the same probe sequence, so two sets agree on a filled bin
//!   exactly when they agree on the bin it copied from (and on which bins are empty along the way).
//! - rotation (Shrivastava and Li, ICML 2014): empty bin j takes the nearest non-empty bin to its right,
//!   circularly, at distance t, and stores `value + t * C (mod 2^32)`. `C = 0x9E37_79B9` (odd, about
//!   2^32 / golden ratio) makes copies made from different distances disagree (up to a 2^-32 chance), which is
//!   what the offset is for in the paper, where C exceeds the value range; our values use all 32 bits, so the
//!   offset wraps instead.
//!
//! The densified signature is compared with the classic fraction-of-equal-slots estimator. The raw sketch and
//! its estimator `N_match / (k - N_empty)` (Li, Owen, Zhang) are exposed on [`Oph`] for analysis.
//! An empty set gives every slot `u32::MAX` (callers flag it; it estimates 0 against anything).

use super::family::mix64;
use super::{Isa, Kernel, KernelParams, KernelSpec};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

pub const SPEC_OPT: KernelSpec = KernelSpec {
    name: "oph-opt",
    about: "one-permutation hashing, optimal densification (Shrivastava 2017)",
    build: build_opt,
};
pub const SPEC_ROT: KernelSpec = KernelSpec {
    name: "oph-rot",
    about: "one-permutation hashing, rotation densification (Shrivastava-Li 2014); for comparison",
    build: build_rot,
};

fn build_opt(p: &KernelParams) -> anyhow::Result<Box<dyn Kernel>> {
    Ok(Box::new(
        Oph::new(p.num_perm, p.seed, Densify::Optimal).with_isa(p.isa),
    ))
}

fn build_rot(p: &KernelParams) -> anyhow::Result<Box<dyn Kernel>> {
    Ok(Box::new(
        Oph::new(p.num_perm, p.seed, Densify::Rotation).with_isa(p.isa),
    ))
}

/// The raw-sketch marker of an empty bin.
pub const EMPTY: u32 = u32::MAX;

/// The rotation offset per step of distance.
pub const ROTATION_C: u32 = 0x9E37_79B9;

/// Ids mixed per batch in [`Oph::sign_raw`].
const CHUNK: usize = 256;

/// `out[i] = bin << 32 | value` for `ids[i]`: `h = mix64(id ^ seed)`, `bin = (hi32(h) * k) >> 32` (a
/// multiply-range reduction, uniform over `0..k` for any k), `value = min(lo32(h), EMPTY - 1)`.
/// Runs the AVX-512 compilation of the same code when allowed (exact integer arithmetic: same output).
#[inline]
fn bin_values(ids: &[u64], seed: u64, k: u64, wide: bool, out: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    if wide {
        // SAFETY: `wide` is only set after checking that the CPU supports AVX-512 F/DQ/BW/VL.
        unsafe { bin_values_avx512(ids, seed, k, out) };
        return;
    }
    bin_values_plain(ids, seed, k, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn bin_values_avx512(ids: &[u64], seed: u64, k: u64, out: &mut [u64]) {
    bin_values_plain(ids, seed, k, out)
}

#[inline(always)]
fn bin_values_plain(ids: &[u64], seed: u64, k: u64, out: &mut [u64]) {
    for (o, &id) in out.iter_mut().zip(ids) {
        let h = mix64(id ^ seed);
        // A 32 x 32 -> 64-bit product (k < 2^32): one vpmuludq instead of a 64-bit vpmullq.
        let bin = (((h >> 32) as u32 as u64) * (k as u32 as u64)) >> 32;
        let value = (h as u32).min(EMPTY - 1) as u64;
        *o = (bin << 32) | value;
    }
}

/// How empty bins are filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Densify {
    Optimal,
    Rotation,
}

/// One-permutation hashing with densification.
pub struct Oph {
    num_perm: usize,
    densify: Densify,
    /// Seed of the element mixer.
    mix_seed: u64,
    /// Seed of the optimal-densification probe hash.
    probe_seed: u64,
    /// Whether the id-mixing loop runs its AVX-512 build (same output either way).
    wide: bool,
}

impl Oph {
    pub fn new(num_perm: usize, seed: u64, densify: Densify) -> Oph {
        // The bin reduction multiplies by k as a 32-bit number.
        assert!(num_perm < 1 << 32, "num_perm must be below 2^32");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        Oph {
            num_perm,
            densify,
            mix_seed: rng.next_u64(),
            probe_seed: rng.next_u64(),
            wide: super::wide_vectors(),
        }
    }

    /// Forces the instruction set of the id-mixing loop: AVX-512 (if this CPU has it) or plain code for any
    /// other choice; `None` keeps [`Isa::detect`]'s choice.
    pub fn with_isa(mut self, isa: Option<Isa>) -> Oph {
        if let Some(isa) = isa {
            self.wide = isa == Isa::Avx512 && isa.supported();
        }
        self
    }

    /// Writes the raw (undensified) sketch: each bin's minimum value, or [`EMPTY`].
    pub fn sign_raw(&self, ids: &[u64], bins: &mut [u32]) {
        assert_eq!(bins.len(), self.num_perm, "output length must be num_perm");
        bins.fill(EMPTY);
        // Mix a chunk of ids into (bin, value) pairs (a loop the compiler vectorises), then take the minima.
        let mut packed = [0u64; CHUNK];
        for chunk in ids.chunks(CHUNK) {
            let packed = &mut packed[..chunk.len()];
            bin_values(
                chunk,
                self.mix_seed,
                self.num_perm as u64,
                self.wide,
                packed,
            );
            for &bv in packed.iter() {
                let bin = (bv >> 32) as usize;
                debug_assert!(bin < bins.len());
                // SAFETY: bin = (hi32(h) * k) >> 32 < k = bins.len() (asserted at the top), as hi32(h) < 2^32.
                let slot = unsafe { bins.get_unchecked_mut(bin) };
                // Branch-free: the update is taken unpredictably often on small sets.
                *slot = (*slot).min(bv as u32);
            }
        }
    }

    /// The OPH estimator on two raw sketches: `N_match / (k - N_empty)`, where `N_empty` counts bins empty in
    /// both and `N_match` bins non-empty and equal in both. 0 when every bin is empty in both.
    pub fn estimate_raw(a: &[u32], b: &[u32]) -> f64 {
        assert_eq!(a.len(), b.len(), "sketches of different length");
        let mut matched = 0usize;
        let mut both_empty = 0usize;
        for (&x, &y) in a.iter().zip(b) {
            if x == EMPTY && y == EMPTY {
                both_empty += 1;
            } else if x == y {
                matched += 1;
            }
        }
        let informative = a.len() - both_empty;
        if informative == 0 {
            0.0
        } else {
            matched as f64 / informative as f64
        }
    }

    /// The probe target of empty bin `j` at attempt `t` (optimal densification).
    #[inline]
    fn probe(&self, j: usize, t: u64) -> usize {
        let h = mix64(self.probe_seed ^ ((j as u64) << 32 | t).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        (((h >> 32) * self.num_perm as u64) >> 32) as usize
    }

    fn densify(&self, out: &mut [u32]) {
        if !out.contains(&EMPTY) {
            return;
        }
        let raw = out.to_vec();
        let k = self.num_perm;
        for j in 0..k {
            if raw[j] != EMPTY {
                continue;
            }
            out[j] = match self.densify {
                Densify::Optimal => {
                    // Terminates: the set is non-empty, so some bin is, and the probes are uniform over 0..k.
                    let mut t = 1u64;
                    loop {
                        let c = self.probe(j, t);
                        if raw[c] != EMPTY {
                            break raw[c];
                        }
                        t += 1;
                    }
                }
                Densify::Rotation => {
                    let t = (1..k)
                        .find(|&t| raw[(j + t) % k] != EMPTY)
                        .expect("a non-empty set has a non-empty bin");
                    raw[(j + t) % k].wrapping_add((t as u32).wrapping_mul(ROTATION_C))
                }
            };
        }
    }
}

impl Kernel for Oph {
    fn name(&self) -> &'static str {
        match self.densify {
            Densify::Optimal => "oph-opt",
            Densify::Rotation => "oph-rot",
        }
    }
    fn num_perm(&self) -> usize {
        self.num_perm
    }
    fn isa(&self) -> Isa {
        if self.wide { Isa::Avx512 } else { Isa::Scalar }
    }
    fn sign(&self, ids: &[u64], out: &mut [u32]) {
        self.sign_raw(ids, out);
        if ids.is_empty() {
            out.fill(u32::MAX);
            return;
        }
        self.densify(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avx512_and_plain_bin_loops_agree() {
        let ids: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i)
            .collect();
        for k in [1u64, 7, 100, 128, 1000] {
            let mut plain = vec![0u64; ids.len()];
            bin_values_plain(&ids, 5, k, &mut plain);
            assert!(plain.iter().all(|bv| (bv >> 32) < k));
            #[cfg(target_arch = "x86_64")]
            if Isa::Avx512.supported() {
                let mut wide = vec![0u64; ids.len()];
                // SAFETY: checked just above that the CPU supports AVX-512 F/DQ/BW/VL.
                unsafe { bin_values_avx512(&ids, 5, k, &mut wide) };
                assert_eq!(plain, wide, "k={k}");
            }
        }
    }
}
