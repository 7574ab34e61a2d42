//! The AVX-512 vector loop: 8 u64 lanes per `__m512i`, `vpmullq` (AVX512DQ) + `vpaddq` + `vpminuq`.

use super::generic::{Lanes, Params};
use std::arch::x86_64::*;

#[derive(Clone, Copy)]
struct Avx512(__m512i);

impl Lanes for Avx512 {
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn load(p: *const u64) -> Self {
        // SAFETY: the caller guarantees 8 readable u64 at p and AVX-512F; loadu needs no alignment.
        Avx512(unsafe { _mm512_loadu_si512(p.cast()) })
    }
    #[inline(always)]
    unsafe fn splat(x: u64) -> Self {
        // SAFETY: the caller guarantees AVX-512F.
        Avx512(unsafe { _mm512_set1_epi64(x as i64) })
    }
    #[inline(always)]
    unsafe fn hash(a: Self, _a_hi: Self, x: Self, b: Self) -> Self {
        // SAFETY: the caller guarantees AVX-512F and DQ (vpmullq).
        unsafe { Avx512(_mm512_add_epi64(_mm512_mullo_epi64(a.0, x.0), b.0)) }
    }
    #[inline(always)]
    unsafe fn min_hi(self, other: Self) -> Self {
        // SAFETY: the caller guarantees AVX-512F.
        Avx512(unsafe { _mm512_min_epu64(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn store_hi(self, out: &mut [u32; 8]) {
        // SAFETY: AVX-512F guaranteed by the caller; out is 32 writable bytes.
        unsafe {
            let hi = _mm512_cvtepi64_epi32(_mm512_srli_epi64::<32>(self.0));
            _mm256_storeu_si256(out.as_mut_ptr().cast(), hi);
        }
    }
}

#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn sign_avx512(p: &Params, keys: &[u64], out: &mut [u32]) {
    // SAFETY: this function is compiled for AVX-512 F/DQ/BW/VL; the parameters are padded to 8 lanes.
    unsafe { super::generic::sign_generic::<Avx512, 4>(p, keys, out) }
}

pub(super) fn sign(_: crate::arch::Avx512, p: &Params, keys: &[u64], out: &mut [u32]) {
    // SAFETY: the token proves AVX-512 F/DQ/BW/VL.
    unsafe { sign_avx512(p, keys, out) }
}
