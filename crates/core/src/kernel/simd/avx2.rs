//! The AVX2 vector loop: 4 u64 lanes per `__m256i`.
//!
//! AVX2 has neither a 64-bit low multiply nor an unsigned 64-bit min. Since every key is below 2^32,
//! `a * x mod 2^64 = lo32(a) * x + (hi32(a) * x) << 32`: two `vpmuludq` (32 x 32 -> 64). The min is
//! `vpminud` on 32-bit lanes, whose odd lanes are exactly the minima of the high halves (see `simd.rs`).

use super::generic::{Lanes, Params};
use std::arch::x86_64::*;

#[derive(Clone, Copy)]
struct Avx2(__m256i);

impl Lanes for Avx2 {
    const LANES: usize = 4;
    #[inline(always)]
    unsafe fn load(p: *const u64) -> Self {
        // SAFETY: the caller guarantees 4 readable u64 at p and AVX2; loadu needs no alignment.
        Avx2(unsafe { _mm256_loadu_si256(p.cast()) })
    }
    #[inline(always)]
    unsafe fn splat(x: u64) -> Self {
        // SAFETY: the caller guarantees AVX2.
        Avx2(unsafe { _mm256_set1_epi64x(x as i64) })
    }
    #[inline(always)]
    unsafe fn hash(a: Self, a_hi: Self, x: Self, b: Self) -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe {
            let lo = _mm256_mul_epu32(a.0, x.0);
            let hi = _mm256_slli_epi64::<32>(_mm256_mul_epu32(a_hi.0, x.0));
            Avx2(_mm256_add_epi64(_mm256_add_epi64(lo, hi), b.0))
        }
    }
    #[inline(always)]
    unsafe fn min_hi(self, other: Self) -> Self {
        // SAFETY: the caller guarantees AVX2.
        Avx2(unsafe { _mm256_min_epu32(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn store_hi(self, out: &mut [u32; 8]) {
        let mut lanes = [0u64; 4];
        // SAFETY: lanes is 32 writable bytes; AVX2 guaranteed by the caller.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), self.0) };
        for (o, v) in out.iter_mut().zip(lanes) {
            *o = (v >> 32) as u32;
        }
    }
}

#[target_feature(enable = "avx2")]
fn sign_avx2(p: &Params, keys: &[u64], out: &mut [u32]) {
    // SAFETY: this function is compiled for AVX2; the parameters are padded to a multiple of 8 lanes.
    unsafe { super::generic::sign_generic::<Avx2, 4>(p, keys, out) }
}

pub(super) fn sign(_: crate::arch::Avx2, p: &Params, keys: &[u64], out: &mut [u32]) {
    // SAFETY: the token proves avx2.
    unsafe { sign_avx2(p, keys, out) }
}
