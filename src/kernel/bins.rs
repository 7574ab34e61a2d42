//! Bin primitives shared by the bin-based sketches (`oph`, `fss`): the batch size, the scalar min update of
//! packed `bin << 32 | value` words, and its AVX-512 form with a filter in front.

use crate::arch::Avx512;

/// Ids mixed per batch.
pub const CHUNK: usize = 256;

/// `bins[bin] = min(bins[bin], value)` for each packed `bin << 32 | value`.
///
/// # Safety
/// Every packed bin must be `< bins.len()`.
#[inline(always)]
pub unsafe fn min_update(packed: &[u64], bins: &mut [u32]) {
    for &bv in packed {
        let bin = (bv >> 32) as usize;
        debug_assert!(bin < bins.len());
        // SAFETY: bin < bins.len() by the caller's contract.
        let slot = unsafe { bins.get_unchecked_mut(bin) };
        // Branch-free: the update is taken unpredictably often on small sets.
        *slot = (*slot).min(bv as u32);
    }
}

/// [`min_update`] with a filter in front, for one chunk of at most [`CHUNK`] packed values; the bins end up
/// exactly as `min_update` leaves them. `t` = the largest bin value before the chunk (`u32::MAX` while any bin
/// is empty). A value `v >= t` is `>=` its own bin's value, so `min` would leave that bin unchanged: it is
/// dropped. Values below `t` are compacted (vpcompressq) into `cand` and applied. Bin values only fall, so `t`
/// stays a valid bound through the chunk. On long documents most values fail the filter (after m values per
/// bin, about one in m beats the bin's minimum), which removes most of the scattered, load-store-dependent
/// updates.
///
/// # Safety
/// Every packed bin must be `< bins.len()` (as for [`min_update`]).
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn filtered_min_update(
    token: Avx512,
    packed: &[u64],
    bins: &mut [u32],
    cand: &mut [u64; CHUNK],
) {
    // SAFETY: the token proves AVX-512 F/DQ/BW/VL and POPCNT; the bins contract is the caller's.
    unsafe { filtered_min_update_avx512(token, packed, bins, cand) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,popcnt")]
unsafe fn filtered_min_update_avx512(
    token: Avx512,
    packed: &[u64],
    bins: &mut [u32],
    cand: &mut [u64; CHUNK],
) {
    use std::arch::x86_64::{
        __m512i, _mm512_and_si512, _mm512_cmplt_epu64_mask, _mm512_loadu_si512,
        _mm512_maskz_compress_epi64, _mm512_set1_epi64, _mm512_storeu_si512,
    };
    assert!(packed.len() <= CHUNK, "at most one chunk at a time");
    let t = max(token, bins);
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

/// The largest bin value (vector max: 16 bins per instruction).
///
/// # Safety
/// Safe to call from code compiled for AVX-512F; the token proves the CPU runs it, but a caller without those
/// features compiled in still writes `unsafe` (the language's rule for `#[target_feature]` functions).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub fn max(_: Avx512, bins: &[u32]) -> u32 {
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
