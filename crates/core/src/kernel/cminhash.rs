//! `cminhash`: C-MinHash with two permutations (Li and Li, ICML 2022, "C-MinHash: Practically Reducing Two
//! Permutations to Just One", the σ, π version), with hash functions standing in for the permutations.
//!
//! σ folds each 64-bit id to a 32-bit position, `σ(x) = high32(mix64(id ^ s_σ))`, as the other kernels do.
//! π is one bijection of 32-bit words, `π(y) = fmix32(y ^ s_π)` (MurmurHash3's finaliser, a permutation of
//! [0, 2^32) for every seed). Slot i uses π circularly shifted by i:
//! `slot_i = min over x of π((σ(x) + i) mod 2^32)`, i = 0..k. So one σ and one π replace the k independent
//! functions of classic MinHash; the cost stays k evaluations per element.
//!
//! Theory: each slot is a minimum of one random permutation over the set, so P(slot equal) = J; Li and Li show
//! the variance is at most classic MinHash's J(1-J)/k, the gap coming from overlaps between the shifted
//! windows `σ(x) .. σ(x)+k` of different elements. Here positions live in D = 2^32, so two windows overlap with
//! probability about 2k/2^32 per pair of elements, and the variance is classic's to within that; the registry
//! family ([`super::SketchFamily::Circulant`]) predicts relative MSE 1 and the checks enforce it.
//!
//! Instruction sets: the k slots are independent given a key, so the loop is vectorised across slots like
//! `simd` (algorithm once in `sign_generic` over the `Lanes32` trait; AVX-512 with 16 u32 lanes, AVX2 with 8,
//! `wide::u32x8` for the portable path, and a plain scalar loop), all computing the same wrapping 32-bit
//! integer arithmetic, so every path gives the same bits.

use super::contract::{Kernel, KernelError, KernelParams, KernelSpec, SketchFamily};
use crate::arch::Isa;
use crate::arch::{Dispatch, Loop};
use crate::hash::mix64;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use std::cell::RefCell;

/// The registry entry of `cminhash`.
pub const SPEC: KernelSpec = KernelSpec {
    name: "cminhash",
    about: "C-MinHash (Li and Li 2022): hash sigma, then k circulant shifts of one permutation pi (AVX-512 / AVX2 / portable)",
    family: SketchFamily::Circulant,
    same_output_as: None,
    build,
};

fn build(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    Ok(Box::new(CMinHash::new(p.num_perm, p.seed, p.dispatch()?)))
}

/// MurmurHash3's 32-bit finaliser: a bijection of u32 (xor-shifts and odd multipliers are invertible).
const FMIX_C1: u32 = 0x85eb_ca6b;
/// The second multiplier of [`pi`].
const FMIX_C2: u32 = 0xc2b2_ae35;

/// π: `fmix32(y ^ seed)`.
#[inline(always)]
pub fn pi(y: u32, seed: u32) -> u32 {
    let mut h = y ^ seed;
    h ^= h >> 16;
    h = h.wrapping_mul(FMIX_C1);
    h ^= h >> 13;
    h = h.wrapping_mul(FMIX_C2);
    h ^ (h >> 16)
}

/// The widest vector has 16 u32 lanes; shift offsets are padded to a multiple of it.
const PAD: usize = 16;

/// One vector of u32 lanes. Implementations are called only inside a `#[target_feature]` function of their
/// instruction set (or are plain Rust).
trait Lanes32: Copy {
    const LANES: usize;
    /// # Safety
    /// `p` is valid for reading `LANES` u32, and the CPU supports the instruction set.
    unsafe fn load(p: *const u32) -> Self;
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn splat(x: u32) -> Self;
    /// `pi(key + offset, seed)` lane-wise, wrapping.
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn pi_shifted(key: Self, offset: Self, seed: Self) -> Self;
    /// Lane-wise unsigned minimum.
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn min(self, other: Self) -> Self;
    /// Writes the lanes to `out[..LANES]`.
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn store(self, out: &mut [u32; PAD]);
}

/// Slot vectors `first..first + U` over every key: the offsets and running minima stay in registers.
///
/// # Safety
/// The CPU supports `V`'s instruction set and `(first + U) * LANES <= offsets.len()`.
#[inline(always)]
unsafe fn block<V: Lanes32, const U: usize>(
    offsets: &[u32],
    seed: u32,
    first: usize,
    keys: &[u32],
    out: &mut [u32],
) {
    let at = |j: usize| (first + j) * V::LANES;
    debug_assert!(at(U) <= offsets.len());
    // SAFETY (loads): at(j) + LANES <= offsets.len() by the caller's contract; (the rest): the caller
    // guarantees the instruction set of `V`.
    let offs: [V; U] = std::array::from_fn(|j| unsafe { V::load(offsets.as_ptr().add(at(j))) });
    let seed = unsafe { V::splat(seed) };
    let mut m: [V; U] = [unsafe { V::splat(u32::MAX) }; U];
    for &key in keys {
        let key = unsafe { V::splat(key) };
        for j in 0..U {
            m[j] = unsafe { m[j].min(V::pi_shifted(key, offs[j], seed)) };
        }
    }
    let mut lanes = [0u32; PAD];
    for (j, mj) in m.iter().enumerate() {
        // SAFETY: the caller guarantees the instruction set; `lanes` holds PAD >= LANES u32.
        unsafe { mj.store(&mut lanes) };
        let start = at(j);
        let end = (start + V::LANES).min(out.len());
        if start < end {
            out[start..end].copy_from_slice(&lanes[..end - start]);
        }
    }
}

/// Signs with `V`: blocks of 4 vectors, then the rest one at a time.
///
/// # Safety
/// The CPU supports `V`'s instruction set and `offsets.len()` is `out.len()` rounded up to [`PAD`].
#[inline(always)]
unsafe fn sign_generic<V: Lanes32>(offsets: &[u32], seed: u32, keys: &[u32], out: &mut [u32]) {
    let vectors = out.len().div_ceil(V::LANES);
    let mut v = 0;
    while v < vectors {
        if v + 4 <= vectors {
            // SAFETY: vectors v..v+4 lie inside the padded offsets; the caller guarantees the instruction set.
            unsafe { block::<V, 4>(offsets, seed, v, keys, out) };
            v += 4;
        } else {
            // SAFETY: as above, for one vector.
            unsafe { block::<V, 1>(offsets, seed, v, keys, out) };
            v += 1;
        }
    }
}

/// The scalar reference: slot i is the minimum of `pi(key + i)` over the keys.
fn sign_scalar(seed: u32, keys: &[u32], out: &mut [u32]) {
    out.fill(u32::MAX);
    for &key in keys {
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = (*slot).min(pi(key.wrapping_add(i as u32), seed));
        }
    }
}

mod portable {
    use super::{FMIX_C1, FMIX_C2, Lanes32, PAD};
    use wide::u32x8;

    impl Lanes32 for u32x8 {
        const LANES: usize = 8;
        #[inline(always)]
        unsafe fn load(p: *const u32) -> Self {
            // SAFETY: the caller guarantees 8 readable u32 at p; read_unaligned needs no alignment.
            u32x8::new(unsafe { p.cast::<[u32; 8]>().read_unaligned() })
        }
        #[inline(always)]
        unsafe fn splat(x: u32) -> Self {
            u32x8::splat(x)
        }
        #[inline(always)]
        unsafe fn pi_shifted(key: Self, offset: Self, seed: Self) -> Self {
            // wide's u32 add and multiply wrap, like wrapping_add / wrapping_mul.
            let mut h = (key + offset) ^ seed;
            h ^= h >> 16;
            h *= u32x8::splat(FMIX_C1);
            h ^= h >> 13;
            h *= u32x8::splat(FMIX_C2);
            h ^ (h >> 16)
        }
        #[inline(always)]
        unsafe fn min(self, other: Self) -> Self {
            u32x8::min(self, other)
        }
        #[inline(always)]
        unsafe fn store(self, out: &mut [u32; PAD]) {
            out[..8].copy_from_slice(&self.to_array());
        }
    }

    pub(super) fn sign(offsets: &[u32], seed: u32, keys: &[u32], out: &mut [u32]) {
        // SAFETY: u32x8 is plain Rust with no target-feature requirement; offsets are padded to PAD >= 8.
        unsafe { super::sign_generic::<u32x8>(offsets, seed, keys, out) }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{FMIX_C1, FMIX_C2, Lanes32, PAD};
    use std::arch::x86_64::*;

    #[derive(Clone, Copy)]
    struct V(__m256i);

    impl Lanes32 for V {
        const LANES: usize = 8;
        #[inline(always)]
        unsafe fn load(p: *const u32) -> Self {
            // SAFETY: the caller guarantees 8 readable u32 at p and AVX2; loadu needs no alignment.
            V(unsafe { _mm256_loadu_si256(p.cast()) })
        }
        #[inline(always)]
        unsafe fn splat(x: u32) -> Self {
            // SAFETY: the caller guarantees AVX2.
            V(unsafe { _mm256_set1_epi32(x as i32) })
        }
        #[inline(always)]
        unsafe fn pi_shifted(key: Self, offset: Self, seed: Self) -> Self {
            // SAFETY: the caller guarantees AVX2 (vpaddd, vpxor, vpsrld, vpmulld).
            unsafe {
                let mut h = _mm256_xor_si256(_mm256_add_epi32(key.0, offset.0), seed.0);
                h = _mm256_xor_si256(h, _mm256_srli_epi32::<16>(h));
                h = _mm256_mullo_epi32(h, _mm256_set1_epi32(FMIX_C1 as i32));
                h = _mm256_xor_si256(h, _mm256_srli_epi32::<13>(h));
                h = _mm256_mullo_epi32(h, _mm256_set1_epi32(FMIX_C2 as i32));
                V(_mm256_xor_si256(h, _mm256_srli_epi32::<16>(h)))
            }
        }
        #[inline(always)]
        unsafe fn min(self, other: Self) -> Self {
            // SAFETY: the caller guarantees AVX2.
            V(unsafe { _mm256_min_epu32(self.0, other.0) })
        }
        #[inline(always)]
        unsafe fn store(self, out: &mut [u32; PAD]) {
            // SAFETY: out holds 16 >= 8 writable u32; AVX2 guaranteed by the caller.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), self.0) }
        }
    }

    #[target_feature(enable = "avx2")]
    fn sign_avx2(offsets: &[u32], seed: u32, keys: &[u32], out: &mut [u32]) {
        // SAFETY: this function is compiled for AVX2; the offsets are padded to a multiple of 16 lanes.
        unsafe { super::sign_generic::<V>(offsets, seed, keys, out) }
    }

    pub(super) fn sign(
        _: crate::arch::Avx2,
        offsets: &[u32],
        seed: u32,
        keys: &[u32],
        out: &mut [u32],
    ) {
        // SAFETY: the token proves AVX2.
        unsafe { sign_avx2(offsets, seed, keys, out) }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{FMIX_C1, FMIX_C2, Lanes32, PAD};
    use std::arch::x86_64::*;

    #[derive(Clone, Copy)]
    struct V(__m512i);

    impl Lanes32 for V {
        const LANES: usize = 16;
        #[inline(always)]
        unsafe fn load(p: *const u32) -> Self {
            // SAFETY: the caller guarantees 16 readable u32 at p and AVX-512F; loadu needs no alignment.
            V(unsafe { _mm512_loadu_si512(p.cast()) })
        }
        #[inline(always)]
        unsafe fn splat(x: u32) -> Self {
            // SAFETY: the caller guarantees AVX-512F.
            V(unsafe { _mm512_set1_epi32(x as i32) })
        }
        #[inline(always)]
        unsafe fn pi_shifted(key: Self, offset: Self, seed: Self) -> Self {
            // SAFETY: the caller guarantees AVX-512F (vpaddd, vpxord, vpsrld, vpmulld).
            unsafe {
                let mut h = _mm512_xor_si512(_mm512_add_epi32(key.0, offset.0), seed.0);
                h = _mm512_xor_si512(h, _mm512_srli_epi32::<16>(h));
                h = _mm512_mullo_epi32(h, _mm512_set1_epi32(FMIX_C1 as i32));
                h = _mm512_xor_si512(h, _mm512_srli_epi32::<13>(h));
                h = _mm512_mullo_epi32(h, _mm512_set1_epi32(FMIX_C2 as i32));
                V(_mm512_xor_si512(h, _mm512_srli_epi32::<16>(h)))
            }
        }
        #[inline(always)]
        unsafe fn min(self, other: Self) -> Self {
            // SAFETY: the caller guarantees AVX-512F.
            V(unsafe { _mm512_min_epu32(self.0, other.0) })
        }
        #[inline(always)]
        unsafe fn store(self, out: &mut [u32; PAD]) {
            // SAFETY: out holds 16 writable u32; AVX-512F guaranteed by the caller.
            unsafe { _mm512_storeu_si512(out.as_mut_ptr().cast(), self.0) }
        }
    }

    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    fn sign_avx512(offsets: &[u32], seed: u32, keys: &[u32], out: &mut [u32]) {
        // SAFETY: this function is compiled for AVX-512 F/DQ/BW/VL; the offsets are padded to 16 lanes.
        unsafe { super::sign_generic::<V>(offsets, seed, keys, out) }
    }

    pub(super) fn sign(
        _: crate::arch::Avx512,
        offsets: &[u32],
        seed: u32,
        keys: &[u32],
        out: &mut [u32],
    ) {
        // SAFETY: the token proves AVX-512 F/DQ/BW/VL.
        unsafe { sign_avx512(offsets, seed, keys, out) }
    }
}

/// Below this many ids the keys are signed as they are; above, repeated keys are dropped first (sorting costs
/// far less than k evaluations of π per repeat, and the minimum is idempotent, so the signature is unchanged).
const DEDUP_MIN: usize = 64;

thread_local! {
    static KEYS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// C-MinHash (σ, π).
pub struct CMinHash {
    num_perm: usize,
    sigma_seed: u64,
    pi_seed: u32,
    /// `offsets[i] = i`, padded to a multiple of [`PAD`]: the circulant shift of each slot.
    offsets: Vec<u32>,
    sign_loop: Loop,
}

impl CMinHash {
    /// The kernel with k = `num_perm` shifts, σ and π drawn from `seed`, on a checked instruction set.
    pub fn new(num_perm: usize, seed: u64, dispatch: Dispatch) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x434d_494e_4841_5348);
        let sigma_seed = rng.next_u64();
        let pi_seed = rng.next_u32();
        let padded = num_perm.div_ceil(PAD) * PAD;
        CMinHash {
            num_perm,
            sigma_seed,
            pi_seed,
            offsets: (0..padded as u32).collect(),
            sign_loop: Loop::of(dispatch),
        }
    }

    /// σ: the 32-bit position of a shingle id.
    #[inline(always)]
    pub fn sigma(&self, id: u64) -> u32 {
        (mix64(id ^ self.sigma_seed) >> 32) as u32
    }

    /// The seed of π.
    pub fn pi_seed(&self) -> u32 {
        self.pi_seed
    }
}

impl Kernel for CMinHash {
    fn name(&self) -> &'static str {
        "cminhash"
    }
    fn num_perm(&self) -> usize {
        self.num_perm
    }
    fn isa(&self) -> Isa {
        self.sign_loop.isa()
    }
    fn sign(&self, ids: &[u64], out: &mut [u32]) {
        assert_eq!(out.len(), self.num_perm, "output length must be num_perm");
        KEYS.with_borrow_mut(|keys| {
            keys.clear();
            keys.extend(ids.iter().map(|&id| self.sigma(id)));
            if keys.len() >= DEDUP_MIN {
                keys.sort_unstable();
                keys.dedup();
            }
            let (offsets, seed) = (&self.offsets, self.pi_seed);
            match self.sign_loop {
                Loop::Scalar => sign_scalar(seed, keys, out),
                Loop::Portable => portable::sign(offsets, seed, keys, out),
                #[cfg(target_arch = "x86_64")]
                Loop::Avx2(token) => avx2::sign(token, offsets, seed, keys, out),
                #[cfg(target_arch = "x86_64")]
                Loop::Avx512(token) => avx512::sign(token, offsets, seed, keys, out),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pi_is_a_bijection_on_a_sample_and_fmix32_on_known_values() {
        // MurmurHash3's fmix32 of 0 is 0 and of 1 is 0x514e28b7 (seed 0).
        assert_eq!(pi(0, 0), 0);
        assert_eq!(pi(1, 0), 0x514e_28b7);
        let mut seen: Vec<u32> = (0..1u32 << 16).map(|y| pi(y, 0xdead_beef)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1 << 16);
    }

    #[test]
    fn slot_i_is_the_min_of_pi_shifted_by_i() {
        let kern = CMinHash::new(37, 5, Dispatch::new(Isa::Scalar).unwrap());
        let ids: Vec<u64> = (0..100u64).map(|i| i * 7919).collect();
        let mut out = vec![0u32; 37];
        kern.sign(&ids, &mut out);
        for (i, &slot) in out.iter().enumerate() {
            let want = ids
                .iter()
                .map(|&id| pi(kern.sigma(id).wrapping_add(i as u32), kern.pi_seed()))
                .min()
                .unwrap();
            assert_eq!(slot, want, "slot {i}");
        }
    }
}
