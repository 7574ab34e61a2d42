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
pub(super) const CHUNK: usize = 256;

/// `out[i] = bin << 32 | value` for `ids[i]`: `h = mix64(id ^ seed)`, `bin = (hi32(h) * k) >> 32` (a
/// multiply-range reduction, uniform over `0..k` for any k), `value = min(lo32(h), EMPTY - 1)`. A loop the
/// compiler vectorises; inlined into the AVX-512 path it compiles to AVX-512 (exact integer arithmetic: same
/// output).
#[inline(always)]
pub(super) fn bin_values_plain(ids: &[u64], seed: u64, k: u64, out: &mut [u64]) {
    for (o, &id) in out.iter_mut().zip(ids) {
        let h = mix64(id ^ seed);
        // A 32 x 32 -> 64-bit product (k < 2^32): one vpmuludq instead of a 64-bit vpmullq.
        let bin = (((h >> 32) as u32 as u64) * (k as u32 as u64)) >> 32;
        let value = (h as u32).min(EMPTY - 1) as u64;
        *o = (bin << 32) | value;
    }
}

/// `bins[bin] = min(bins[bin], value)` for each packed `bin << 32 | value`.
///
/// # Safety
/// Every packed bin must be `< bins.len()` (true of [`bin_values_plain`]'s output for `k = bins.len()`, as
/// `(hi32(h) * k) >> 32 < k`).
#[inline(always)]
pub(super) unsafe fn min_update(packed: &[u64], bins: &mut [u32]) {
    for &bv in packed {
        let bin = (bv >> 32) as usize;
        debug_assert!(bin < bins.len());
        // SAFETY: bin < bins.len() by the caller's contract.
        let slot = unsafe { bins.get_unchecked_mut(bin) };
        // Branch-free: the update is taken unpredictably often on small sets.
        *slot = (*slot).min(bv as u32);
    }
}

/// The largest bin value (vector max: 16 bins per instruction).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn max_avx512(bins: &[u32]) -> u32 {
    use std::arch::x86_64::{
        __m512i, _mm512_loadu_si512, _mm512_max_epu32, _mm512_reduce_max_epu32,
        _mm512_setzero_si512,
    };
    let mut acc = _mm512_setzero_si512();
    let mut lanes = bins.chunks_exact(16);
    for v16 in &mut lanes {
        // SAFETY: `v16` holds 16 u32 (unaligned load allowed).
        acc = _mm512_max_epu32(acc, unsafe {
            _mm512_loadu_si512(v16.as_ptr() as *const __m512i)
        });
    }
    let rest = lanes.remainder().iter().copied().max().unwrap_or(0);
    _mm512_reduce_max_epu32(acc).max(rest)
}

/// [`min_update`] with a filter in front, for one chunk of at most [`CHUNK`] packed values; the bins end up
/// exactly as `min_update` leaves them. `t` = the largest bin value before the chunk (EMPTY while any bin is
/// empty). A value `v >= t` is `>=` its own bin's value, so `min` would leave that bin unchanged: it is dropped.
/// Values below `t` are compacted (vpcompressq) into `cand` and applied. Bin values only fall, so `t` stays a
/// valid bound through the chunk. On long documents most values fail the filter (after m values per bin,
/// about one in m beats the bin's minimum), which removes most of the scattered, load-store-dependent updates.
///
/// # Safety
/// The CPU must support AVX-512 F/DQ/BW/VL and POPCNT, and every packed bin must be `< bins.len()` (as for
/// [`min_update`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,popcnt")]
pub(super) unsafe fn filtered_min_update_avx512(
    packed: &[u64],
    bins: &mut [u32],
    cand: &mut [u64; CHUNK],
) {
    use std::arch::x86_64::{
        __m512i, _mm512_and_si512, _mm512_cmplt_epu64_mask, _mm512_loadu_si512,
        _mm512_maskz_compress_epi64, _mm512_set1_epi64, _mm512_storeu_si512,
    };
    assert!(packed.len() <= CHUNK, "at most one chunk at a time");
    let t = max_avx512(bins);
    let tv = _mm512_set1_epi64(t as i64);
    let low = _mm512_set1_epi64(u32::MAX as i64);
    let mut n = 0usize;
    let mut lanes = packed.chunks_exact(8);
    for v8 in &mut lanes {
        // SAFETY: `v8` holds 8 u64 (unaligned load allowed). The store writes the 8 lanes of `c` at
        // `cand[n..n + 8]`: n <= 8 * (vectors done so far) <= packed.len() - 8 <= CHUNK - 8, so in bounds; the
        // lanes past the popcount(m) kept values are overwritten by later stores or lie past the final n.
        unsafe {
            let v = _mm512_loadu_si512(v8.as_ptr() as *const __m512i);
            let m = _mm512_cmplt_epu64_mask(_mm512_and_si512(v, low), tv);
            let c = _mm512_maskz_compress_epi64(m, v);
            _mm512_storeu_si512(cand.as_mut_ptr().add(n) as *mut __m512i, c);
            n += m.count_ones() as usize;
        }
    }
    for &bv in lanes.remainder() {
        cand[n] = bv;
        n += ((bv as u32) < t) as usize;
    }
    // SAFETY: `cand[..n]` holds values of `packed`, whose bins are < bins.len() by the caller's contract.
    unsafe { min_update(&cand[..n], bins) };
}

/// Whether the AVX-512 filtered update may run: `wide` is only set after checking AVX-512 F/DQ/BW/VL; every
/// AVX-512 CPU has POPCNT, checked anyway (the detection is cached, so this is a load and a test).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn filter_ok(wide: bool) -> bool {
    wide && std::arch::is_x86_feature_detected!("popcnt")
}

/// The AVX-512 raw sketch: the plain loop's mixing compiled for AVX-512, then the filtered min update.
///
/// # Safety
/// The CPU must support AVX-512 F/DQ/BW/VL and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,popcnt")]
unsafe fn sign_raw_avx512(ids: &[u64], seed: u64, bins: &mut [u32]) {
    let k = bins.len() as u64;
    let mut packed = [0u64; CHUNK];
    let mut cand = [0u64; CHUNK];
    for chunk in ids.chunks(CHUNK) {
        let packed = &mut packed[..chunk.len()];
        bin_values_plain(chunk, seed, k, packed);
        // SAFETY: CPU features by this function's contract; packed.len() <= CHUNK; bins packed by
        // `bin_values_plain` with k = bins.len() are < bins.len().
        unsafe { filtered_min_update_avx512(packed, bins, &mut cand) };
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
        #[cfg(target_arch = "x86_64")]
        if filter_ok(self.wide) {
            // SAFETY: `filter_ok` checked AVX-512 F/DQ/BW/VL (when `wide` was set) and POPCNT.
            unsafe { sign_raw_avx512(ids, self.mix_seed, bins) };
            return;
        }
        // Mix a chunk of ids into (bin, value) pairs (a loop the compiler vectorises), then take the minima.
        let mut packed = [0u64; CHUNK];
        for chunk in ids.chunks(CHUNK) {
            let packed = &mut packed[..chunk.len()];
            bin_values_plain(chunk, self.mix_seed, self.num_perm as u64, packed);
            // SAFETY: bins packed with k = num_perm = bins.len() (asserted above) are < bins.len().
            unsafe { min_update(packed, bins) };
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
    fn avx512_and_plain_raw_sketches_agree() {
        let ids: Vec<u64> = (0..3000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i)
            .collect();
        for k in [1usize, 7, 100, 128, 1000] {
            let mut plain_bv = vec![0u64; ids.len()];
            bin_values_plain(&ids, 5, k as u64, &mut plain_bv);
            assert!(plain_bv.iter().all(|bv| (bv >> 32) < k as u64));
            let plain = Oph::new(k, 5, Densify::Optimal).with_isa(Some(Isa::Scalar));
            let wide = Oph::new(k, 5, Densify::Optimal).with_isa(Some(Isa::Avx512));
            // Sizes around the 8-lane vectors and the 256-id chunks, up to several chunks.
            for n in [0usize, 1, 7, 8, 9, 255, 256, 257, 263, 1000, 3000] {
                let (mut a, mut b) = (vec![0u32; k], vec![0u32; k]);
                plain.sign_raw(&ids[..n], &mut a);
                wide.sign_raw(&ids[..n], &mut b);
                assert_eq!(a, b, "k={k} n={n}");
            }
        }
    }
}
