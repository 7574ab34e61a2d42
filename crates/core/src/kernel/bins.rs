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
    if t == u32::MAX {
        // A bin is still empty, so no value can be dropped: update with every one.
        // SAFETY: the bins contract is the caller's.
        unsafe { min_update(packed, bins) };
        return;
    }
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

/// The most bins a [`BinMask`] covers: one bit per bin in one 512-bit register.
pub const MASK_BINS: usize = 512;

/// A set of bins `0..MASK_BINS`, one bit each: bit `b % 64` of word `b / 64`.
pub type BinMask = [u64; MASK_BINS / 64];

/// The bins of `bins` that still hold `empty`. Panics if there are more than [`MASK_BINS`] bins.
/// The plain definition, and the reference [`empty_mask_avx512`] is tested against (`fss` calls that one).
pub fn empty_mask(bins: &[u32], empty: u32) -> BinMask {
    assert!(
        bins.len() <= MASK_BINS,
        "a bin mask covers {MASK_BINS} bins"
    );
    let mut mask = [0u64; MASK_BINS / 64];
    for (b, &v) in bins.iter().enumerate() {
        mask[b / 64] |= ((v == empty) as u64) << (b % 64);
    }
    mask
}

/// [`empty_mask`] with one vector compare per 16 bins. Panics as `empty_mask` does.
///
/// # Safety
/// Safe to call from code compiled for AVX-512F; the token proves the CPU runs it, but a caller without that
/// feature compiled in still writes `unsafe` (as for [`max`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub fn empty_mask_avx512(_: Avx512, bins: &[u32], empty: u32) -> BinMask {
    use std::arch::x86_64::{
        __m512i, _mm512_cmpeq_epi32_mask, _mm512_loadu_si512, _mm512_set1_epi32,
    };
    assert!(
        bins.len() <= MASK_BINS,
        "a bin mask covers {MASK_BINS} bins"
    );
    let mut mask = [0u64; MASK_BINS / 64];
    let e = _mm512_set1_epi32(empty as i32);
    let mut lanes = bins.chunks_exact(16);
    for (i, v16) in (&mut lanes).enumerate() {
        // SAFETY: `v16` holds 16 u32 (unaligned load allowed).
        let m = _mm512_cmpeq_epi32_mask(
            unsafe { _mm512_loadu_si512(v16.as_ptr() as *const __m512i) },
            e,
        );
        mask[i / 4] |= (m as u64) << (i % 4 * 16);
    }
    let done = bins.len() - lanes.remainder().len();
    for (b, &v) in lanes.remainder().iter().enumerate() {
        let b = done + b;
        mask[b / 64] |= ((v == empty) as u64) << (b % 64);
    }
    mask
}

/// Compacts into `cand` the packed `bin << 32 | value` words of one chunk (at most [`CHUNK`]) whose bin is in
/// `mask`, in their order, and returns how many there are. The bin's bit is found in registers: the bin's high
/// bits pick the mask word (vpermq over the mask held in one register), its low 6 bits the bit (vpsrlvq), and
/// the words kept are compacted (vpcompressq), 8 at a time.
///
/// # Safety
/// Every packed bin must be `< MASK_BINS` (as the mask covers no more).
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn select_bins(
    token: Avx512,
    packed: &[u64],
    mask: &BinMask,
    cand: &mut [u64; CHUNK],
) -> usize {
    // SAFETY: the token proves AVX-512 F/DQ/BW/VL and POPCNT; the bins contract is the caller's.
    unsafe { select_bins_avx512(token, packed, mask, cand) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,popcnt")]
unsafe fn select_bins_avx512(
    _: Avx512,
    packed: &[u64],
    mask: &BinMask,
    cand: &mut [u64; CHUNK],
) -> usize {
    use std::arch::x86_64::{
        __m512i, _mm512_and_si512, _mm512_loadu_si512, _mm512_maskz_compress_epi64,
        _mm512_permutexvar_epi64, _mm512_set1_epi64, _mm512_srli_epi64, _mm512_srlv_epi64,
        _mm512_storeu_si512, _mm512_test_epi64_mask,
    };
    assert!(packed.len() <= CHUNK, "at most one chunk at a time");
    // SAFETY: `mask` is 8 u64, one 512-bit load.
    let table = unsafe { _mm512_loadu_si512(mask.as_ptr() as *const __m512i) };
    let (one, low6) = (_mm512_set1_epi64(1), _mm512_set1_epi64(63));
    let mut n = 0usize;
    let mut lanes = packed.chunks_exact(8);
    for v8 in &mut lanes {
        // SAFETY: `v8` holds 8 u64 (unaligned load allowed). The store writes 8 lanes at `cand[n..n + 8]`:
        // n <= 8 * (vectors done so far) <= packed.len() - 8 <= CHUNK - 8, so in bounds; lanes past the
        // popcount(m) kept words are overwritten by later stores or lie past the final n.
        unsafe {
            let v = _mm512_loadu_si512(v8.as_ptr() as *const __m512i);
            let bin = _mm512_srli_epi64::<32>(v);
            let word = _mm512_permutexvar_epi64(_mm512_srli_epi64::<6>(bin), table);
            let bit = _mm512_srlv_epi64(word, _mm512_and_si512(bin, low6));
            let m = _mm512_test_epi64_mask(bit, one);
            let c = _mm512_maskz_compress_epi64(m, v);
            _mm512_storeu_si512(cand.as_mut_ptr().add(n) as *mut __m512i, c);
            n += m.count_ones() as usize;
        }
    }
    for &bv in lanes.remainder() {
        let bin = (bv >> 32) as usize;
        debug_assert!(bin < MASK_BINS);
        // n is at most this word's index in `packed`, so below CHUNK.
        cand[n] = bv;
        n += ((mask[bin / 64] >> (bin % 64)) & 1) as usize;
    }
    n
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `select_bins` keeps exactly the words whose bin is in the mask, in order, for every chunk length around
    /// the 8-lane vectors and for masks from empty to full.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn select_bins_keeps_the_masked_bins_in_order() {
        let Some(token) = Avx512::detect() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let packed: Vec<u64> = (0..CHUNK)
            .map(|_| {
                let r = next();
                ((r >> 32) % MASK_BINS as u64) << 32 | (r & 0xffff_ffff)
            })
            .collect();
        for density in [0u32, 1, 8, 32, 63, 64] {
            let mut mask = [0u64; MASK_BINS / 64];
            for w in mask.iter_mut() {
                // Each bit set with probability density / 64.
                *w = (0..64).fold(0, |m, b| m | (((next() % 64) < density as u64) as u64) << b);
            }
            for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 100, CHUNK - 1, CHUNK] {
                let chunk = &packed[..len];
                let want: Vec<u64> = chunk
                    .iter()
                    .copied()
                    .filter(|&bv| {
                        let bin = (bv >> 32) as usize;
                        mask[bin / 64] >> (bin % 64) & 1 == 1
                    })
                    .collect();
                let mut cand = [0u64; CHUNK];
                // SAFETY: every bin is < MASK_BINS by construction.
                let n = unsafe { select_bins(token, chunk, &mask, &mut cand) };
                assert_eq!(&cand[..n], &want[..], "density {density}/64, length {len}");
            }
        }
    }

    /// The vector mask equals the scalar one for every length up to MASK_BINS (whole vectors and tails) and for
    /// bins empty at every position.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn empty_mask_avx512_equals_the_scalar_mask() {
        let Some(token) = Avx512::detect() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        for len in 0..=MASK_BINS {
            for step in [1usize, 2, 5, 17, 64] {
                let bins: Vec<u32> = (0..len)
                    .map(|b| {
                        if b % step == len % step {
                            u32::MAX
                        } else {
                            b as u32
                        }
                    })
                    .collect();
                // SAFETY: the token proves AVX-512F.
                let wide = unsafe { empty_mask_avx512(token, &bins, u32::MAX) };
                assert_eq!(wide, empty_mask(&bins, u32::MAX), "len {len} step {step}");
            }
        }
    }

    #[test]
    fn empty_mask_marks_the_bins_holding_the_marker() {
        let bins: Vec<u32> = (0..300u32)
            .map(|b| if b % 7 == 3 { u32::MAX } else { b })
            .collect();
        let mask = empty_mask(&bins, u32::MAX);
        for b in 0..MASK_BINS {
            let set = mask[b / 64] >> (b % 64) & 1 == 1;
            assert_eq!(set, b < 300 && b % 7 == 3, "bin {b}");
        }
    }
}
