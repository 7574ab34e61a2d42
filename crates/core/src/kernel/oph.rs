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

use super::bins::{CHUNK, min_update};
use super::contract::{Densification, Kernel, KernelError, KernelParams, KernelSpec, SketchFamily};
use crate::arch::Dispatch;
use crate::arch::Isa;
#[cfg(target_arch = "x86_64")]
use crate::arch::{Avx2, Avx512, Vbmi2, x86::mix64_x8};
use crate::hash::{GOLDEN, mix64};
#[cfg(target_arch = "x86_64")]
use crate::window::ShortRun;
#[cfg(target_arch = "x86_64")]
use crate::window::WindowSink;
use crate::window::WindowSource;
#[cfg(target_arch = "x86_64")]
use crate::window::x86::WindowLanes;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{__m512i, __mmask8};

/// The registry entry of `oph-opt`.
pub const SPEC_OPT: KernelSpec = KernelSpec {
    name: "oph-opt",
    about: "one-permutation hashing, optimal densification (Shrivastava 2017)",
    family: SketchFamily::OnePermutation(Densification::Optimal),
    same_output_as: None,
    build: build_opt,
};
/// The registry entry of `oph-rot`.
pub const SPEC_ROT: KernelSpec = KernelSpec {
    name: "oph-rot",
    about: "one-permutation hashing, rotation densification (Shrivastava-Li 2014); for comparison",
    family: SketchFamily::OnePermutation(Densification::Rotation),
    same_output_as: None,
    build: build_rot,
};

fn build_opt(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    Ok(Box::new(
        Oph::new(p.num_perm, p.seed, Densify::Optimal).with_dispatch(p.dispatch()?),
    ))
}

fn build_rot(p: &KernelParams) -> Result<Box<dyn Kernel>, KernelError> {
    Ok(Box::new(
        Oph::new(p.num_perm, p.seed, Densify::Rotation).with_dispatch(p.dispatch()?),
    ))
}

/// The raw-sketch marker of an empty bin.
pub const EMPTY: u32 = u32::MAX;

/// The rotation offset per step of distance.
pub const ROTATION_C: u32 = 0x9E37_79B9;

/// `out[i] = bin << 32 | value` for `ids[i]`: `h = mix64(id ^ seed)`, `bin = (hi32(h) * k) >> 32` (a
/// multiply-range reduction, uniform over `0..k` for any k), `value = min(lo32(h), EMPTY - 1)`. A loop the
/// compiler vectorises; inlined into the AVX-512 path it compiles to AVX-512 (exact integer arithmetic: same
/// output).
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

/// The bin of a mixed id, `(hi32(h) * k) >> 32`, with a shift for the common power-of-two k; its `update` is the
/// min update of [`bin_values_plain`] and [`min_update`] for one id.
#[derive(Clone, Copy)]
struct Binner {
    k: u64,
    /// `64 - log2(k)` when k is a power of two above 1 (then `(hi32(h) * k) >> 32 = h >> shift`), else 0.
    shift: u32,
}

impl Binner {
    #[inline(always)]
    fn new(k: usize) -> Binner {
        let shift = if k > 1 && k.is_power_of_two() {
            64 - k.trailing_zeros()
        } else {
            0
        };
        Binner { k: k as u64, shift }
    }

    #[inline(always)]
    fn bin(&self, h: u64) -> usize {
        (if self.shift != 0 {
            h >> self.shift
        } else {
            // k < 2^32 (checked in `Oph::new`), so the product fits.
            ((h >> 32) * self.k) >> 32
        }) as usize
    }

    /// `bins[bin(h)] = min(.., min(lo32(h), EMPTY - 1))`.
    ///
    /// # Panics
    /// If `bins.len()` is not this binner's k (a check the compiler hoists out of loops).
    #[inline(always)]
    fn update(&self, bins: &mut [u32], h: u64) {
        assert_eq!(bins.len() as u64, self.k, "bins of another k");
        let bin = self.bin(h);
        // Tests run with debug assertions, so a broken bin computation fails loudly there.
        debug_assert!(bin < bins.len(), "bin {bin} of {}", bins.len());
        // SAFETY: bin < k = bins.len(): with the shift, h >> (64 - log2 k) < 2^log2 k = k; with the multiply,
        // hi32(h) < 2^32 gives (hi32(h) * k) >> 32 < k.
        let slot = unsafe { bins.get_unchecked_mut(bin) };
        *slot = (*slot).min((h as u32).min(EMPTY - 1));
    }

    /// A candidate of [`pipeline`] filtered by `B`: [`Binner::update_capped`] if `B` capped it, else
    /// [`Binner::update`].
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn apply<B: Bounds>(&self, bins: &mut [u32], h: u64) {
        if B::CAPS {
            self.update_capped(bins, h)
        } else {
            self.update(bins, h)
        }
    }

    /// [`Binner::update`] for an `h` whose value is already capped (the candidates of [`pipeline`]).
    #[inline(always)]
    fn update_capped(&self, bins: &mut [u32], h: u64) {
        assert_eq!(bins.len() as u64, self.k, "bins of another k");
        let bin = self.bin(h);
        debug_assert!(bin < bins.len(), "bin {bin} of {}", bins.len());
        debug_assert!(h as u32 != EMPTY);
        // SAFETY: as in `update`.
        let slot = unsafe { bins.get_unchecked_mut(bin) };
        *slot = (*slot).min(h as u32);
    }
}

/// The per-chunk filter of [`pipeline`]: 64 thresholds, one per group of bins, looked up by the top 6 bits of
/// `h` (two `vpermt2d` over 32-entry tables and a blend on the top bit). Group g holds the mixed ids with
/// `hi32(h)` in `[g * 2^26, (g + 1) * 2^26)`, which land in bins `(g * 2^26 * k) >> 32` to
/// `(((g + 1) * 2^26 - 1) * k) >> 32` (two bins each at k = 128); its threshold is the largest of those bins,
/// EMPTY while one is empty.
/// A capped value at or above it cannot lower its bin. Thresholds are taken during a chunk and only fall
/// afterwards, so a stale one is still valid.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct GroupBounds {
    /// Groups 0..16, 16..32, 32..48, 48..64: one u32 threshold per lane.
    t: [std::arch::x86_64::__m512i; 4],
}

/// The per-chunk filter of [`pipeline`]: thresholds taken from the bins, and the test of 8 mixed ids against
/// them. A lane the test leaves out must be one that cannot lower its bin; thresholds are taken during a chunk
/// and bins only fall, so a stale one is still valid.
///
/// The methods are `unsafe fn`s inlined into [`pipeline`] (whose callers are compiled for the instructions they
/// need) rather than `#[target_feature]` functions, which the compiler may leave as calls (measured: about 6% of
/// `oph-opt`'s signing time for a call once per chunk).
#[cfg(target_arch = "x86_64")]
trait Bounds: Copy {
    /// Whether [`Bounds::pass`] caps the lanes it returns (`lo32 = min(lo32, EMPTY - 1)`); if not, the scalar
    /// update does.
    const CAPS: bool;

    /// The thresholds of the bins as they are now.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/DQ/BW/VL and the instructions the implementation names.
    unsafe fn of(bins: &[u32]) -> Self;

    /// The lanes of `h` (capped if [`Bounds::CAPS`]) with the mask of those that may lower their bin.
    ///
    /// # Safety
    /// As for [`Bounds::of`].
    unsafe fn pass(&self, h: __m512i) -> (__m512i, __mmask8);
}

#[cfg(target_arch = "x86_64")]
impl GroupBounds {
    const GROUPS: usize = 64;

    /// The tables from 64 thresholds in memory.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[inline(always)]
    unsafe fn load(t: &[u32; 64]) -> Self {
        use std::arch::x86_64::*;
        let p = t.as_ptr();
        // SAFETY: AVX-512F by this function's contract; `t` is 64 readable u32.
        unsafe {
            GroupBounds {
                t: [
                    _mm512_loadu_si512(p.cast()),
                    _mm512_loadu_si512(p.add(16).cast()),
                    _mm512_loadu_si512(p.add(32).cast()),
                    _mm512_loadu_si512(p.add(48).cast()),
                ],
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Bounds for GroupBounds {
    const CAPS: bool = true;

    #[inline(always)]
    unsafe fn of(bins: &[u32]) -> Self {
        use std::arch::x86_64::*;
        let k = bins.len();
        // SAFETY: AVX-512 by this function's contract; every load below reads 16 u32 inside `bins`, as its
        // comment says.
        unsafe {
            if k == 128 {
                // Group g is bins 2g and 2g + 1: a pairwise max puts it in both lanes of the pair, then one
                // vpermt2d per two vectors keeps the even lanes.
                // (No closures here: they would not inherit the target features, and the intrinsics would
                // become calls.)
                let even =
                    _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                let mut t = [_mm512_setzero_si512(); 4];
                for (i, t) in t.iter_mut().enumerate() {
                    // `bins` has 128 entries: 32i + 32 <= 128 for i < 4.
                    let a = _mm512_loadu_si512(bins.as_ptr().add(32 * i).cast());
                    let b = _mm512_loadu_si512(bins.as_ptr().add(32 * i + 16).cast());
                    let a = _mm512_max_epu32(a, _mm512_shuffle_epi32::<0xb1>(a));
                    let b = _mm512_max_epu32(b, _mm512_shuffle_epi32::<0xb1>(b));
                    *t = _mm512_permutex2var_epi32(a, even, b);
                }
                return GroupBounds { t };
            }
            let mut t = [0u32; Self::GROUPS];
            if k == 64 {
                // One bin per group.
                t.copy_from_slice(bins);
                return Self::load(&t);
            }
            if k == 256 {
                // Group g is bins 4g..4g + 4: two shuffle-max steps put it in all four lanes of its 128-bit
                // lane; then three vpermt2d per 64 bins keep lane 0 of each.
                let firsts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
                let halves =
                    _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
                let mut out = [_mm512_setzero_si512(); 4];
                for (i, o) in out.iter_mut().enumerate() {
                    let mut q = [_mm512_setzero_si512(); 4];
                    for (j, q) in q.iter_mut().enumerate() {
                        // `bins` has 256 entries: 64i + 16j + 16 <= 256.
                        let v = _mm512_loadu_si512(bins.as_ptr().add(64 * i + 16 * j).cast());
                        let v = _mm512_max_epu32(v, _mm512_shuffle_epi32::<0xb1>(v));
                        *q = _mm512_max_epu32(v, _mm512_shuffle_epi32::<0x4e>(v));
                    }
                    let lo = _mm512_permutex2var_epi32(q[0], firsts, q[1]);
                    let hi = _mm512_permutex2var_epi32(q[2], firsts, q[3]);
                    *o = _mm512_permutex2var_epi32(lo, halves, hi);
                }
                return GroupBounds { t: out };
            }
            if k.is_multiple_of(64) && (k / 64).is_multiple_of(16) {
                // Whole vectors per group: a vector max, then one horizontal max.
                let per = k / 64;
                for (g, t) in t.iter_mut().enumerate() {
                    let mut acc = _mm512_setzero_si512();
                    for v in 0..per / 16 {
                        // `bins` has 64 * per entries: g * per + 16v + 16 <= k.
                        let x = _mm512_loadu_si512(bins.as_ptr().add(g * per + 16 * v).cast());
                        acc = _mm512_max_epu32(acc, x);
                    }
                    *t = _mm512_reduce_max_epu32(acc);
                }
                return Self::load(&t);
            }
            let k = k as u64;
            for (g, t) in t.iter_mut().enumerate() {
                let g = g as u64;
                let first = ((g << 26) * k) >> 32;
                let last = ((((g + 1) << 26) - 1) * k) >> 32;
                *t = bins[first as usize..=last as usize]
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(EMPTY);
            }
            Self::load(&t)
        }
    }

    /// Capped value < threshold.
    #[inline(always)]
    unsafe fn pass(&self, h: __m512i) -> (__m512i, __mmask8) {
        use std::arch::x86_64::*;
        // SAFETY: AVX-512 F/DQ by this function's contract; register operations only.
        unsafe {
            // The group, in the low dword of each lane (the high dword indexes entry 0: masked off below).
            let g = _mm512_srli_epi64::<58>(h);
            let lo = _mm512_permutex2var_epi32(self.t[0], g, self.t[1]);
            let hi = _mm512_permutex2var_epi32(self.t[2], g, self.t[3]);
            // Bit 5 of the group is the top bit of h.
            let bound = _mm512_mask_blend_epi64(_mm512_movepi64_mask(h), lo, hi);
            let low = _mm512_set1_epi64(u32::MAX as i64);
            // Unsigned 32-bit min against (EMPTY - 1, 0) per lane: the capped value, zero-extended.
            let value = _mm512_min_epu32(h, _mm512_set1_epi64((EMPTY - 1) as i64));
            // The capped value below, h's bin bits above.
            let capped = _mm512_mask_blend_epi32(0x5555, h, value);
            (
                capped,
                _mm512_cmplt_epu64_mask(value, _mm512_and_si512(bound, low)),
            )
        }
    }
}

/// The filter of [`pipeline`] at k = 128 where AVX-512 VBMI runs: one threshold per bin, the top byte of its
/// value, looked up by the bin (the top 7 bits of `h`) with one `vpermt2b` over a 128-byte table. A value can
/// lower its bin only if it is below the bin's value, so only if its top byte (bits 24..32 of `h`) is at most
/// the bin's; an empty bin's byte is 0xff, which every lane passes. Against [`GroupBounds`] (the largest value
/// of two bins, at 32 bits, looked up with two `vpermt2d` and a blend) this leaves out the lanes of a bin whose
/// neighbour is still empty or higher, and lets through those that tie with their bin in the top byte. On the
/// SpamAssassin bodies (char:5: 21 million windows, of which 2.05 million lower their bin when taken in order)
/// 4.58 million candidates pass it, against 5.10 million with groups; most of the excess is the bounds' lag of
/// up to two chunks. What it saves is vector work: three vector instructions per 8 windows (a shift, the lookup
/// and a byte compare, whose lane bits a scalar `pext` gathers) instead of nine, as the lanes are not capped
/// here (the scalar update caps them).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct ByteBounds {
    /// The top bytes of bins 0..64 and of bins 64..128.
    t: [std::arch::x86_64::__m512i; 2],
}

#[cfg(target_arch = "x86_64")]
impl ByteBounds {
    /// The one k this filter takes.
    const K: usize = 128;
}

#[cfg(target_arch = "x86_64")]
impl Bounds for ByteBounds {
    const CAPS: bool = false;

    /// # Safety
    /// As the trait's, with AVX-512 VBMI, and `bins.len() == 128`.
    #[inline(always)]
    unsafe fn of(bins: &[u32]) -> Self {
        use std::arch::x86_64::*;
        /// Byte 4i + 3 of a vector of u32 is the top byte of entry i: `vpermt2b` of two vectors with these
        /// indices puts the top bytes of their 32 entries in bytes 0..32 (bytes 32..64 repeat them).
        const TOP_BYTES: [u8; 64] = {
            let mut t = [0u8; 64];
            let mut i = 0;
            while i < 64 {
                t[i] = (4 * (i % 16) + 3 + 64 * ((i / 16) % 2)) as u8;
                i += 1;
            }
            t
        };
        assert_eq!(bins.len(), Self::K, "ByteBounds is for k = 128");
        // SAFETY: AVX-512 F/BW and VBMI by this function's contract; every load reads 16 u32 of the 128 in
        // `bins`, and `TOP_BYTES` is 64 readable bytes.
        unsafe {
            let top = _mm512_loadu_si512(TOP_BYTES.as_ptr().cast());
            let mut q = [_mm512_setzero_si512(); 4];
            for (i, q) in q.iter_mut().enumerate() {
                // 32i + 32 <= 128 for i < 4.
                let a = _mm512_loadu_si512(bins.as_ptr().add(32 * i).cast());
                let b = _mm512_loadu_si512(bins.as_ptr().add(32 * i + 16).cast());
                *q = _mm512_permutex2var_epi8(a, top, b);
            }
            ByteBounds {
                t: [
                    _mm512_inserti64x4::<1>(q[0], _mm512_castsi512_si256(q[1])),
                    _mm512_inserti64x4::<1>(q[2], _mm512_castsi512_si256(q[3])),
                ],
            }
        }
    }

    #[inline(always)]
    unsafe fn pass(&self, h: __m512i) -> (__m512i, __mmask8) {
        use std::arch::x86_64::*;
        // SAFETY: AVX-512 F/BW and VBMI by this function's contract, BMI2 by `pipeline`'s; register operations
        // only.
        unsafe {
            // The bin (bits 57..64 of h) in the low 7 bits of byte 3 of each lane, the index `vpermt2b` reads,
            // so byte 3 of each lane of `bound` is its bin's top byte (the other bytes are looked up by other
            // bits of h, and not read).
            let index = _mm512_srli_epi64::<33>(h);
            let bound = _mm512_permutex2var_epi8(self.t[0], index, self.t[1]);
            // Every byte compared; bit 8i + 3 of `le` is lane i's: its value's top byte (byte 3 of h) against
            // its bin's. `pext` gathers those 8 bits on a scalar port, where masking both vectors to byte 3
            // first would take two vector instructions on the two ports the loop is bound by.
            let le = _mm512_cmple_epu8_mask(h, bound);
            (h, _pext_u64(le, 0x0808_0808_0808_0808) as __mmask8)
        }
    }
}

/// Where a sign loop takes its vectors of ids from ([`pipeline`]'s of 8, `avx2::update`'s of 4): ids in memory
/// ([`Ids`]) or windows of a text whose ids are computed in registers ([`Windows`]).
#[cfg(target_arch = "x86_64")]
trait Source<V> {
    /// The ids of vector `t`, before the XOR of [`Source::offset`]: the hashed values are
    /// `mix64(ids(t) ^ offset(seed))`.
    ///
    /// # Safety
    /// `t` is below the vector count the loop was given, and the CPU supports `V`'s instruction set (AVX-512
    /// F/DQ/BW/VL for `__m512i`, AVX2 for `__m256i`).
    unsafe fn ids(&self, t: usize) -> V;

    /// The value XORed into every id before `mix64`, the seed included, in every lane.
    ///
    /// # Safety
    /// The CPU supports `V`'s instruction set.
    unsafe fn offset(&self, seed: u64) -> V;
}

/// Ids already in memory.
#[cfg(target_arch = "x86_64")]
struct Ids<'a>(&'a [u64]);

#[cfg(target_arch = "x86_64")]
impl Source<std::arch::x86_64::__m512i> for Ids<'_> {
    #[inline(always)]
    unsafe fn offset(&self, seed: u64) -> std::arch::x86_64::__m512i {
        // SAFETY: AVX-512F by the caller's contract.
        unsafe { std::arch::x86_64::_mm512_set1_epi64(seed as i64) }
    }

    #[inline(always)]
    unsafe fn ids(&self, t: usize) -> std::arch::x86_64::__m512i {
        debug_assert!(8 * t + 8 <= self.0.len());
        // SAFETY: 8t + 8 <= ids.len() by the caller's contract (vector t exists).
        unsafe { std::arch::x86_64::_mm512_loadu_si512(self.0.as_ptr().add(8 * t).cast()) }
    }
}

#[cfg(target_arch = "x86_64")]
impl Source<std::arch::x86_64::__m256i> for Ids<'_> {
    #[inline(always)]
    unsafe fn offset(&self, seed: u64) -> std::arch::x86_64::__m256i {
        // SAFETY: AVX2 by the caller's contract.
        unsafe { std::arch::x86_64::_mm256_set1_epi64x(seed as i64) }
    }

    #[inline(always)]
    unsafe fn ids(&self, t: usize) -> std::arch::x86_64::__m256i {
        debug_assert!(4 * t + 4 <= self.0.len());
        // SAFETY: 4t + 4 <= ids.len() by the caller's contract (vector t exists).
        unsafe { std::arch::x86_64::_mm256_loadu_si256(self.0.as_ptr().add(4 * t).cast()) }
    }
}

/// Windows of a text, their ids computed in registers: vector t is the windows starting at bytes
/// `LANES * t..LANES * (t + 1)`, as the bytes shuffled into lanes ([`WindowLanes::raw`]), whose XOR with the key
/// (the seed folded in by [`WindowLanes::xored`] when the source is made) the loop folds into `mix64`'s first
/// xorshift.
#[cfg(target_arch = "x86_64")]
struct Windows<W> {
    p: *const u8,
    lanes: W,
}

#[cfg(target_arch = "x86_64")]
impl<W: WindowLanes> Windows<W> {
    /// The windows of `bytes`, `lanes` already holding the run's key; the seed is folded in here.
    fn new(bytes: &[u8], lanes: W, token: W::Token, seed: u64) -> Self {
        Windows {
            p: bytes.as_ptr(),
            lanes: lanes.xored(token, seed),
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl<W: WindowLanes> Source<W::Vector> for Windows<W> {
    #[inline(always)]
    unsafe fn offset(&self, _seed: u64) -> W::Vector {
        // The seed is in the key already (`Windows::new`).
        self.lanes.key()
    }

    #[inline(always)]
    unsafe fn ids(&self, t: usize) -> W::Vector {
        // SAFETY: the caller made 16 bytes readable at LANES * t for every vector t it asks for, and runs on a
        // CPU with `W`'s instruction set (this trait's contract).
        unsafe { self.lanes.raw(self.p.add(W::LANES * t)) }
    }
}

/// A candidate buffer's entries as `u64`s.
///
/// # Safety
/// Every entry of `buf` was written.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn written_candidates(buf: &[std::mem::MaybeUninit<u64>]) -> &[u64] {
    // SAFETY: MaybeUninit<u64> has u64's layout, and the caller guarantees every entry is initialised.
    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u64>(), buf.len()) }
}

/// The raw-sketch update of `vectors` vectors of 8 inputs from `src`: each input becomes `h = mix64(id ^ seed)`
/// and `bins[bin(h)] = min(.., value(h))`, exactly as [`Oph::sign_raw`] defines it. Per step, 8 inputs are mixed
/// in registers, filtered (a [`Bounds`]) and compressed into a candidate buffer; only candidates reach the
/// scalar update, and min is order-free, so the bins are the same.
///
/// Scheduling. Each 64-bit multiply has a long latency (about 16 cycles) and `mix64` chains two, so the loop
/// is software-pipelined by hand: step t loads the ids of vector t, runs the first `mix64` multiply of vector
/// t - 1, the second of vector t - 2 and the filter of vector t - 3, whose inputs are all ready. A chunk's
/// candidates are applied during the next chunk's first steps, a few per step, on the scalar ports the vector
/// code leaves idle; then, after `SETTLE` more steps, the bounds are taken again.
///
/// # Safety
/// The CPU must support AVX-512 F/DQ/BW/VL, POPCNT, BMI2 and what `B` needs, and `src.ids(t)` must be valid for
/// `t < vectors`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pipeline<B: Bounds, S: Source<std::arch::x86_64::__m512i>>(
    src: &S,
    vectors: usize,
    seed: u64,
    bins: &mut [u32],
) {
    // SAFETY: the intrinsics need the CPU features of this function's contract; the unsafe calls inside
    // carry their own reasons.
    unsafe {
        use std::arch::x86_64::*;
        /// Windows per chunk: the bounds are refreshed once per chunk.
        const PIPE_CHUNK: usize = 256;
        const STEPS_PER_CHUNK: usize = PIPE_CHUNK / 8;
        /// Steps of a run's first chunk; each chunk after it is twice as long, up to `STEPS_PER_CHUNK`. While the
        /// bins fill, short chunks let the bounds follow them (a chunk's bounds lag its candidates by a chunk):
        /// on SpamAssassin at k = 128, 3.78 million candidates instead of 4.58. Shorter chunks throughout cost
        /// more in refreshes than they save.
        const FIRST_STEPS: usize = 4;
        /// Candidates of the previous chunk applied per step (a whole chunk's worth fits in one chunk).
        const DRAIN_PER_STEP: usize = 8;
        const DEPTH: usize = 3;
        /// Steps run on the old bounds after the last candidates are applied, before the bounds are taken
        /// again: the vector loads of the bins would otherwise wait for the scalar stores just made (a store
        /// does not forward to a wider load).
        const SETTLE: usize = 2;
        if vectors == 0 {
            return;
        }
        let binner = Binner::new(bins.len());
        let (c1, c2) = crate::arch::x86::mix64_constants();
        // Two candidate buffers, left uninitialised: each chunk writes entries 0..kept (whole 8-lane stores from
        // 0 up) before anything reads them, and reads only below `kept` (zeroing them cost a memset per call).
        let mut cand = [[std::mem::MaybeUninit::<u64>::uninit(); PIPE_CHUNK]; 2];
        // SAFETY (for each `written_candidates` below): entries below the `pending` of the buffer's last chunk were stored.
        let mut pending = 0usize;
        let mut turn = 0usize;
        // Pipeline registers: after step t, `a` holds the ids of vector t (before the offset), `b` vector t - 1
        // after mix64's first multiply, `c` vector t - 2 after its second.
        let zero = _mm512_setzero_si512();
        let (mut a, mut b, mut c) = (zero, zero, zero);
        // Steps: one per vector, then DEPTH more to drain the pipeline. Stage 1 of a step past the last vector
        // reloads the last one; its results never reach the filter.
        let total = vectors + DEPTH;
        // mix64's first xorshift of `z = a ^ x` is `a ^ (a >> 30) ^ (x ^ (x >> 30))` (a logical shift distributes
        // over XOR): one three-way XOR (`vpternlogq`) instead of the XOR of the offset and then the xorshift's.
        let x = src.offset(seed);
        let x30 = _mm512_xor_si512(x, _mm512_srli_epi64::<30>(x));
        macro_rules! stages_1_to_3 {
            ($t:expr) => {{
                c = _mm512_mullo_epi64(_mm512_xor_si512(b, _mm512_srli_epi64::<27>(b)), c2);
                let z = _mm512_ternarylogic_epi64::<0x96>(a, _mm512_srli_epi64::<30>(a), x30);
                b = _mm512_mullo_epi64(z, c1);
                // min(t, vectors - 1) < vectors: a valid vector, as `ids` requires.
                a = src.ids($t.min(vectors - 1));
            }};
        }
        // One full step: the filter of vector t - 3 (compressed into `cur` at `kept`), then stages 1 to 3.
        macro_rules! step {
            ($t:expr, $bounds:expr, $cur:expr, $kept:expr) => {{
                let h = _mm512_xor_si512(c, _mm512_srli_epi64::<31>(c));
                let (capped, m) = $bounds.pass(h);
                // kept <= 8 * (steps so far in this chunk) <= PIPE_CHUNK - 8, so 8 lanes fit at cur[kept].
                _mm512_storeu_si512(
                    $cur.as_mut_ptr().add($kept).cast(),
                    _mm512_maskz_compress_epi64(m, capped),
                );
                $kept += m.count_ones() as usize;
                stages_1_to_3!($t);
            }};
        }
        let mut t = 0usize;
        while t < DEPTH {
            stages_1_to_3!(t);
            t += 1;
        }
        let mut bounds = B::of(bins);
        let mut chunk_steps = FIRST_STEPS;
        while t < total {
            let chunk_end = (t + chunk_steps).min(total);
            chunk_steps = (chunk_steps * 2).min(STEPS_PER_CHUNK);
            let (lo, hi) = cand.split_at_mut(1);
            let (cur, prev) = if turn == 0 {
                (&mut lo[0], &hi[0])
            } else {
                (&mut hi[0], &lo[0])
            };
            let mut kept = 0usize;
            let mut q = 0usize;
            // Phase 1: steps with the previous chunk's candidates applied a few per step. The bounds still
            // predate those candidates (valid, looser).
            while t < chunk_end && q < pending {
                step!(t, bounds, cur, kept);
                if q + DRAIN_PER_STEP <= pending {
                    // A fixed count: the compiler unrolls it, no loop overhead per candidate.
                    let batch: &[u64; DRAIN_PER_STEP] =
                        written_candidates(&prev[q..q + DRAIN_PER_STEP])
                            .try_into()
                            .expect("a full batch");
                    for &h in batch {
                        binner.apply::<B>(bins, h);
                    }
                    q += DRAIN_PER_STEP;
                } else {
                    for &h in written_candidates(&prev[q..pending]) {
                        binner.apply::<B>(bins, h);
                    }
                    q = pending;
                }
                t += 1;
            }
            for &h in written_candidates(&prev[q..pending]) {
                binner.apply::<B>(bins, h);
            }
            let settle = (t + SETTLE).min(chunk_end);
            while t < settle {
                step!(t, bounds, cur, kept);
                t += 1;
            }
            // Phase 2: every earlier candidate is in the bins; tighten the bounds and run the rest of the chunk.
            bounds = B::of(bins);
            while t < chunk_end {
                step!(t, bounds, cur, kept);
                t += 1;
            }
            pending = kept;
            turn ^= 1;
        }
        for &h in written_candidates(&cand[turn ^ 1][..pending]) {
            binner.apply::<B>(bins, h);
        }
    }
}

/// The AVX-512 raw sketch from ids: [`pipeline`] over the full vectors, `mix64` one by one for the rest.
///
/// # Safety
/// The CPU must support AVX-512 F/DQ/BW/VL, POPCNT, BMI2 and what `B` needs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sign_ids_with<B: Bounds>(ids: &[u64], seed: u64, bins: &mut [u32]) {
    let vectors = ids.len() / 8;
    // SAFETY: vector t < ids.len() / 8 is 8 ids in bounds; the CPU features by this function's contract.
    unsafe { pipeline::<B, _>(&Ids(ids), vectors, seed, bins) };
    let binner = Binner::new(bins.len());
    for &id in &ids[8 * vectors..] {
        binner.update(bins, mix64(id ^ seed));
    }
}

/// [`sign_ids_with`] on AVX-512 without VBMI: the [`GroupBounds`] filter.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,popcnt,bmi2")]
fn sign_raw_avx512(_: Avx512, ids: &[u64], seed: u64, bins: &mut [u32]) {
    // SAFETY: the CPU features are this function's.
    unsafe { sign_ids_with::<GroupBounds>(ids, seed, bins) }
}

/// [`sign_ids_with`] on AVX-512 with VBMI: the [`ByteBounds`] filter at k = 128, [`GroupBounds`] at other k.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,popcnt,bmi2,avx512vbmi")]
fn sign_raw_vbmi(_: Vbmi2, ids: &[u64], seed: u64, bins: &mut [u32]) {
    // SAFETY: the CPU features are this function's; ByteBounds gets its k.
    unsafe {
        if bins.len() == ByteBounds::K {
            sign_ids_with::<ByteBounds>(ids, seed, bins)
        } else {
            sign_ids_with::<GroupBounds>(ids, seed, bins)
        }
    }
}

/// [`sign_raw_run_avx512`] on AVX-512 without VBMI: the [`GroupBounds`] filter.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,popcnt,bmi2")]
fn sign_raw_run_avx512(token: Avx512, run: &ShortRun<'_>, seed: u64, bins: &mut [u32]) {
    // SAFETY: the CPU features are this function's.
    unsafe { sign_run_with::<GroupBounds>(token, run, seed, bins) }
}

/// [`sign_run_with`] on AVX-512 with VBMI: the [`ByteBounds`] filter at k = 128, [`GroupBounds`] at other k.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,popcnt,bmi2,avx512vbmi")]
fn sign_raw_run_vbmi(token: Vbmi2, run: &ShortRun<'_>, seed: u64, bins: &mut [u32]) {
    // SAFETY: the CPU features are this function's; ByteBounds gets its k.
    unsafe {
        if bins.len() == ByteBounds::K {
            sign_run_with::<ByteBounds>(token.avx512(), run, seed, bins)
        } else {
            sign_run_with::<GroupBounds>(token.avx512(), run, seed, bins)
        }
    }
}

/// The AVX-512 raw-sketch update for a run of short windows (ids as [`ShortRun::id`] defines them):
/// [`pipeline`] over the vectors whose 16-byte loads stay inside the run's bytes, then the last few windows (at
/// most 15) from a zero-padded copy, through the same vector hash.
///
/// # Safety
/// The CPU must support AVX-512 F/DQ/BW/VL, POPCNT, BMI2 and what `B` needs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sign_run_with<B: Bounds>(token: Avx512, run: &ShortRun<'_>, seed: u64, bins: &mut [u32]) {
    use std::arch::x86_64::*;
    let (bytes, k, count) = (run.bytes(), run.k(), run.count());
    // A ShortRun guarantees these (checked when it was made); the memory safety below rests on them.
    assert!((1..=8).contains(&k) && count + k <= bytes.len() + 1);
    // The window ids with the seed XORed in, for the pipeline and the rest alike.
    let src = Windows::new(bytes, run.x8(token), token, seed);
    // Vector t reads bytes 8t..8t + 16 and covers windows 8t..8t + 8.
    let by_bytes = if bytes.len() >= 16 {
        (bytes.len() - 16) / 8 + 1
    } else {
        0
    };
    let vectors = (count / 8).min(by_bytes);
    // SAFETY: for t < vectors, 8t + 16 <= bytes.len(); the CPU features by this function's contract.
    unsafe { pipeline::<B, _>(&src, vectors, seed, bins) };
    // The rest: fewer than 8 windows (count bound), or fewer than 16 (byte bound: 8 * vectors > len - 16, so
    // count - 8 * vectors <= len - k + 1 - 8 * vectors < 17 - k). Their bytes, at most 15 + 7 = 22, fit the
    // copy.
    let done = 8 * vectors;
    let rest = count - done;
    if rest == 0 {
        return;
    }
    debug_assert!(rest <= 16);
    let mut buf = [0u8; 32];
    let avail = (bytes.len() - done).min(32);
    buf[..avail].copy_from_slice(&bytes[done..done + avail]);
    let binner = Binner::new(bins.len());
    for v in 0..rest.div_ceil(8) {
        // SAFETY: 8v + 16 <= 32 for v <= 1. Zero bytes past `avail` only reach lanes past `rest`: window j of
        // the copy uses bytes j..j + k <= rest + k - 1 <= avail. The CPU features by this function's contract.
        let h = unsafe { mix64_x8(src.lanes.ids(buf.as_ptr().add(8 * v))) };
        let mut lanes = [0u64; 8];
        // SAFETY: `lanes` is 64 writable bytes; AVX-512F by this function's contract.
        unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), h) };
        for &h in &lanes[..(rest - 8 * v).min(8)] {
            binner.update(bins, h);
        }
    }
}

/// A token that signs a run of short windows into raw bins with its instruction set's loop.
#[cfg(target_arch = "x86_64")]
trait RunSigner: Copy {
    /// The raw-sketch update of `run`'s windows, as [`Oph::sign_raw`] of their ids.
    fn sign_run(self, run: &ShortRun<'_>, seed: u64, bins: &mut [u32]);
}

#[cfg(target_arch = "x86_64")]
impl RunSigner for Avx512 {
    fn sign_run(self, run: &ShortRun<'_>, seed: u64, bins: &mut [u32]) {
        // SAFETY: the token proves AVX-512 F/DQ/BW/VL, POPCNT and BMI2.
        unsafe { sign_raw_run_avx512(self, run, seed, bins) };
    }
}

#[cfg(target_arch = "x86_64")]
impl RunSigner for Vbmi2 {
    fn sign_run(self, run: &ShortRun<'_>, seed: u64, bins: &mut [u32]) {
        // SAFETY: the token proves AVX-512 F/DQ/BW/VL, POPCNT, BMI2 and VBMI.
        unsafe { sign_raw_run_vbmi(self, run, seed, bins) };
    }
}

#[cfg(target_arch = "x86_64")]
impl RunSigner for Avx2 {
    fn sign_run(self, run: &ShortRun<'_>, seed: u64, bins: &mut [u32]) {
        // SAFETY: the token proves AVX2.
        unsafe { avx2::sign_run(self, run, seed, bins) };
    }
}

/// The [`WindowSink`] of [`Oph::sign_text`]: runs go to the token's vector loop ([`sign_raw_run_avx512`] or
/// `avx2::sign_run`), single ids to `mix64` and the scalar update.
#[cfg(target_arch = "x86_64")]
struct RawSketchSink<'a, T> {
    token: T,
    bins: &'a mut [u32],
    binner: Binner,
    seed: u64,
    /// Whether any window arrived (else the set is empty).
    any: bool,
}

#[cfg(target_arch = "x86_64")]
impl<T: RunSigner> WindowSink for RawSketchSink<'_, T> {
    fn run(&mut self, run: &ShortRun<'_>) {
        self.any |= run.count() > 0;
        self.token.sign_run(run, self.seed, self.bins);
    }
    fn ids(&mut self, ids: &[u64]) {
        self.any |= !ids.is_empty();
        for &id in ids {
            self.binner.update(self.bins, mix64(id ^ self.seed));
        }
    }
}

/// The AVX2 raw-sketch update (for CPUs without AVX-512): 4 ids per step are mixed in registers
/// ([`Mix64x4`](crate::arch::x86::Mix64x4), `mix64` without a 64-bit multiply), binned and capped as
/// [`bin_values_plain`] does, and filtered: a value at or above the largest bin value cannot lower its own bin,
/// so only the lanes below it are compacted (a `vpermd` from a 16-entry table) into a candidate buffer, which the
/// scalar min update applies once per chunk. The bound is taken at the start of each chunk and bins only fall, so
/// a stale bound is still valid; min is order-free, so the bins are the same as [`Oph::sign_raw`]'s on the plain
/// path.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Binner, EMPTY, Ids, Source, Windows, min_update, written_candidates};
    use crate::arch::Avx2;
    use crate::arch::x86::{BITS4, Mix64x4};
    use crate::hash::mix64;
    use crate::window::ShortRun;
    use std::arch::x86_64::*;

    /// Ids per chunk: the bound is refreshed once per chunk.
    const CHUNK4: usize = 256;

    /// For each 4-bit lane mask, the `vpermd` indices that move the selected 64-bit lanes to the front, in order.
    const COMPACT: [[i32; 8]; 16] = {
        let mut t = [[0i32; 8]; 16];
        let mut m = 0;
        while m < 16 {
            let mut n = 0;
            let mut lane = 0;
            while lane < 4 {
                if m & (1 << lane) != 0 {
                    t[m][2 * n] = 2 * lane;
                    t[m][2 * n + 1] = 2 * lane + 1;
                    n += 1;
                }
                lane += 1;
            }
            m += 1;
        }
        t
    };

    /// The raw-sketch update of `vectors` vectors of 4 inputs from `src`.
    ///
    /// Scheduling. `mix64` chains two emulated 64-bit multiplies, and the filter and compaction after it add
    /// a vector-to-integer move and a table load: about 50 cycles from a vector's load to its store. Left to
    /// out-of-order execution, each step's dependent chain filled the scheduler, so the loop is
    /// software-pipelined by hand, as the AVX-512 one: step t loads vector t, runs the first multiply of
    /// vector t - 1, the second of t - 2 and the filter of t - 3, whose inputs are all ready.
    ///
    /// # Safety
    /// The CPU must support AVX2, and `src.ids(t)` must be valid for `t < vectors`.
    #[inline(always)]
    unsafe fn update(
        token: Avx2,
        src: &impl Source<__m256i>,
        vectors: usize,
        seed: u64,
        bins: &mut [u32],
    ) {
        /// Steps between a vector's load and its filter (software pipelining; see below).
        const DEPTH: usize = 3;
        if vectors == 0 {
            return;
        }
        let mix = Mix64x4::new(token);
        // Left uninitialised: each chunk stores entries 0..n (whole 4-lane stores from 0 up) before reading them.
        let mut cand = [std::mem::MaybeUninit::<u64>::uninit(); CHUNK4];
        // SAFETY: AVX2 by this function's contract; the loads and stores below stay in `cand`, the
        // table and `src`'s valid vectors, as each comment says.
        unsafe {
            let offset = src.offset(seed);
            let k_v = _mm256_set1_epi64x(bins.len() as i64);
            // Per lane: the low dword capped at EMPTY - 1 by an unsigned min, the high dword left as it is.
            let cap = _mm256_set1_epi64x(((u32::MAX as u64) << 32 | (EMPTY - 1) as u64) as i64);
            let bias = _mm256_set1_epi32(i32::MIN);
            let zero = _mm256_setzero_si256();
            // Pipeline registers: after step t, `a` holds vector t's ids xor the offset, `b` vector t - 1 after
            // mix64's first multiply, `c` vector t - 2 after its second.
            let (mut a, mut b, mut c) = (zero, zero, zero);
            macro_rules! stages_1_to_3 {
                ($t:expr) => {{
                    c = mix.second(b);
                    b = mix.first(a);
                    // min(t, vectors - 1) < vectors: a valid vector, as `ids` requires.
                    a = _mm256_xor_si256(src.ids(($t).min(vectors - 1)), offset);
                }};
            }
            let mut t = 0usize;
            while t < DEPTH {
                stages_1_to_3!(t);
                t += 1;
            }
            let total = vectors + DEPTH;
            while t < total {
                let end = (t + CHUNK4 / 4).min(total);
                // The largest bin value (EMPTY while a bin is empty, and then every capped value passes).
                let bound = bins.iter().copied().max().unwrap_or(EMPTY);
                let bound_v = _mm256_set1_epi32((bound ^ 0x8000_0000) as i32);
                let mut n = 0usize;
                while t < end {
                    // The filter of vector t - DEPTH, whose hash is ready.
                    let h = mix.finish(c);
                    // bin = (hi32(h) * k) >> 32, in the low dword; the capped value in the low dword of `v`.
                    let bin =
                        _mm256_srli_epi64::<32>(_mm256_mul_epu32(_mm256_srli_epi64::<32>(h), k_v));
                    let v = _mm256_min_epu32(h, cap);
                    let packed = _mm256_blend_epi32::<0b1010_1010>(v, _mm256_slli_epi64::<32>(bin));
                    // value < bound, unsigned, as a signed compare of both offset by 2^31; the low dword's
                    // result moved to the sign bit of its lane.
                    let below = _mm256_cmpgt_epi32(bound_v, _mm256_xor_si256(v, bias));
                    let m = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_slli_epi64::<32>(below)))
                        as usize;
                    let perm = _mm256_loadu_si256(COMPACT[m].as_ptr().cast());
                    // n <= 4 * (steps so far in this chunk) <= CHUNK4 - 4: 4 lanes fit at cand[n].
                    _mm256_storeu_si256(
                        cand.as_mut_ptr().add(n).cast(),
                        _mm256_permutevar8x32_epi32(packed, perm),
                    );
                    n += BITS4[m] as usize;
                    stages_1_to_3!(t);
                    t += 1;
                }
                // SAFETY: every packed bin is (hi32(h) * k) >> 32 < k = bins.len(); entries below n were stored.
                min_update(written_candidates(&cand[..n]), bins);
            }
        }
    }

    /// The raw-sketch update from ids: [`update`] over the full vectors, `mix64` one by one for the rest.
    #[target_feature(enable = "avx2")]
    pub(super) fn sign_ids(token: Avx2, ids: &[u64], seed: u64, bins: &mut [u32]) {
        let vectors = ids.len() / 4;
        // SAFETY: vector t < ids.len() / 4 is 4 ids in bounds; the CPU features are this function's.
        unsafe { update(token, &Ids(ids), vectors, seed, bins) };
        let binner = Binner::new(bins.len());
        for &id in &ids[4 * vectors..] {
            binner.update(bins, mix64(id ^ seed));
        }
    }

    /// The raw-sketch update for a run of short windows: [`update`] over the vectors whose 16-byte loads stay
    /// inside the run's bytes, the last few windows (at most 15) one by one.
    #[target_feature(enable = "avx2")]
    pub(super) fn sign_run(token: Avx2, run: &ShortRun<'_>, seed: u64, bins: &mut [u32]) {
        let (bytes, k, count) = (run.bytes(), run.k(), run.count());
        // A ShortRun guarantees these (checked when it was made); the memory safety below rests on them.
        assert!((1..=8).contains(&k) && count + k <= bytes.len() + 1);
        // Vector t reads bytes 4t..4t + 16 and covers windows 4t..4t + 4.
        let by_bytes = if bytes.len() >= 16 {
            (bytes.len() - 16) / 4 + 1
        } else {
            0
        };
        let vectors = (count / 4).min(by_bytes);
        let src = Windows::new(bytes, run.x4(token), token, seed);
        // SAFETY: for t < vectors, 4t + 16 <= bytes.len(); the CPU features are this function's.
        unsafe { update(token, &src, vectors, seed, bins) };
        let binner = Binner::new(bins.len());
        for i in 4 * vectors..count {
            binner.update(bins, mix64(run.id(i) ^ seed));
        }
    }
}

/// How empty bins are filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Densify {
    /// Optimal densification (Shrivastava 2017): probe a seeded hash of (bin, attempt).
    Optimal,
    /// Rotation (Shrivastava and Li 2014): the nearest non-empty bin to the right, offset by its distance.
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
    /// The instruction set of the id-mixing loops (same output on every one).
    dispatch: Dispatch,
    /// Where the dispatch chose AVX-512 and the CPU runs VBMI: the token of the loops with the byte filter
    /// ([`ByteBounds`]).
    #[cfg(target_arch = "x86_64")]
    vbmi: Option<Vbmi2>,
}

impl Oph {
    /// The kernel with k = `num_perm` bins, on [`Dispatch::detect`]'s instruction set.
    pub fn new(num_perm: usize, seed: u64, densify: Densify) -> Oph {
        // The bin reduction multiplies by k as a 32-bit number.
        assert!(num_perm < 1 << 32, "num_perm must be below 2^32");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        Oph {
            num_perm,
            densify,
            mix_seed: rng.next_u64(),
            probe_seed: rng.next_u64(),
            dispatch: Dispatch::scalar(),
            #[cfg(target_arch = "x86_64")]
            vbmi: None,
        }
        .with_dispatch(Dispatch::detect())
    }

    /// The same kernel on a checked instruction set: AVX-512 runs the vector loops, any other choice the plain
    /// code.
    pub fn with_dispatch(mut self, dispatch: Dispatch) -> Oph {
        self.dispatch = dispatch;
        #[cfg(target_arch = "x86_64")]
        {
            self.vbmi = dispatch.avx512().and_then(Avx512::vbmi2);
        }
        self
    }

    /// The AVX-512 loops without VBMI's byte filter, on a CPU that has it (for tests that compare the two).
    #[cfg(all(test, target_arch = "x86_64"))]
    fn without_vbmi(mut self) -> Oph {
        self.vbmi = None;
        self
    }

    /// [`Oph::with_dispatch`] for `isa` (`None`: [`Dispatch::detect`]); an instruction set this CPU lacks falls
    /// back to the plain code (the registry's builder refuses it before this).
    pub fn with_isa(self, isa: Option<Isa>) -> Oph {
        let dispatch = Dispatch::of(isa).unwrap_or_else(|_| Dispatch::scalar());
        self.with_dispatch(dispatch)
    }

    /// Writes the raw (undensified) sketch: each bin's minimum value, or [`EMPTY`].
    pub fn sign_raw(&self, ids: &[u64], bins: &mut [u32]) {
        assert_eq!(bins.len(), self.num_perm, "output length must be num_perm");
        bins.fill(EMPTY);
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = self.vbmi {
            // SAFETY: the token proves AVX-512 F/DQ/BW/VL, POPCNT, BMI2 and VBMI.
            unsafe { sign_raw_vbmi(token, ids, self.mix_seed, bins) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = self.dispatch.avx512() {
            // SAFETY: the token proves AVX-512 F/DQ/BW/VL, POPCNT and BMI2.
            unsafe { sign_raw_avx512(token, ids, self.mix_seed, bins) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = self.dispatch.avx2() {
            // SAFETY: the token proves AVX2.
            unsafe { avx2::sign_ids(token, ids, self.mix_seed, bins) };
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

    /// The raw sketch of `text`'s windows, streamed from the text without collecting ids (the fused path), when
    /// AVX-512 or AVX2 runs and `windows` can stream this text: `Some(whether any window arrived)`. `None` otherwise,
    /// and `bins` is then to be ignored. Equal to [`Oph::sign_raw`] of the window ids.
    pub fn sign_raw_text(
        &self,
        windows: &dyn WindowSource,
        text: &str,
        bins: &mut [u32],
    ) -> Option<bool> {
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = self.vbmi {
            return self.stream_raw(token, windows, text, bins);
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = self.dispatch.avx512() {
            return self.stream_raw(token, windows, text, bins);
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = self.dispatch.avx2() {
            return self.stream_raw(token, windows, text, bins);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (windows, text, bins);
        None
    }

    /// [`Oph::sign_raw_text`] on the vector loop of `token`.
    #[cfg(target_arch = "x86_64")]
    fn stream_raw(
        &self,
        token: impl RunSigner,
        windows: &dyn WindowSource,
        text: &str,
        bins: &mut [u32],
    ) -> Option<bool> {
        assert_eq!(bins.len(), self.num_perm, "output length must be num_perm");
        bins.fill(EMPTY);
        let mut sink = RawSketchSink {
            token,
            binner: Binner::new(bins.len()),
            bins,
            seed: self.mix_seed,
            any: false,
        };
        windows.stream_windows(text, &mut sink).then_some(sink.any)
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
        let h = mix64(self.probe_seed ^ ((j as u64) << 32 | t).wrapping_mul(GOLDEN));
        (((h >> 32) * self.num_perm as u64) >> 32) as usize
    }

    pub(crate) fn densify(&self, out: &mut [u32]) {
        if !out.contains(&EMPTY) {
            return;
        }
        // The raw sketch, kept apart while `out` is filled: on the stack for k up to 512 (no allocation per
        // short document), on the heap beyond.
        let mut stack = [0u32; 512];
        let heap;
        let raw: &[u32] = if out.len() <= stack.len() {
            stack[..out.len()].copy_from_slice(out);
            &stack[..out.len()]
        } else {
            heap = out.to_vec();
            &heap
        };
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
        if self.dispatch.avx512().is_some() {
            Isa::Avx512
        } else if self.dispatch.avx2().is_some() {
            Isa::Avx2
        } else {
            Isa::Scalar
        }
    }
    fn sign_text(
        &self,
        windows: &dyn WindowSource,
        text: &str,
        ids: &mut Vec<u64>,
        out: &mut [u32],
    ) -> bool {
        if let Some(any) = self.sign_raw_text(windows, text, out) {
            if any {
                self.densify(out);
            } else {
                out.fill(u32::MAX);
            }
            return !any;
        }
        super::contract::sign_via_ids(self, windows, text, ids, out)
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

    /// Calls `check` on every run the run tests take from `bytes`: each window length 1 to 8, with every window
    /// and with five fewer, and the run's ids, with a label for the assertion.
    #[cfg(target_arch = "x86_64")]
    fn for_each_run(
        key: &crate::window::WindowKey,
        bytes: &[u8],
        mut check: impl FnMut(&ShortRun<'_>, &[u64], String),
    ) {
        let n = bytes.len();
        for w in 1..=8usize {
            let Some(count) = (n + 1).checked_sub(w) else {
                continue;
            };
            for count in [count, count.saturating_sub(5)] {
                let run = key.run(bytes, w, count);
                let ids: Vec<u64> = (0..count).map(|i| run.id(i)).collect();
                check(&run, &ids, format!("n={n} w={w} count={count}"));
            }
        }
    }

    /// The AVX2 raw sketch (ids, and runs of windows straight from bytes) equals the plain one, for k around
    /// powers of two and sizes around the 4-lane vectors, the pipeline's depth (1 to 3 vectors), the 256-id
    /// chunks and the 16-byte loads.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_and_plain_raw_sketches_agree() {
        if Avx2::detect().is_none() {
            return;
        }
        let ids: Vec<u64> = (0..3000u64).map(|i| i.wrapping_mul(GOLDEN) ^ i).collect();
        let bytes: Vec<u8> = (0..3000u64).map(|i| (mix64(i) >> 40) as u8).collect();
        let key = crate::window::WindowKey::new(11);
        for k in [1usize, 7, 64, 100, 128, 1000] {
            let plain = Oph::new(k, 5, Densify::Optimal).with_isa(Some(Isa::Scalar));
            let avx2 = Oph::new(k, 5, Densify::Optimal).with_isa(Some(Isa::Avx2));
            let (mut a, mut b) = (vec![0u32; k], vec![0u32; k]);
            for n in [
                0usize, 1, 3, 4, 5, 8, 11, 12, 15, 16, 17, 255, 256, 257, 259, 1000, 3000,
            ] {
                plain.sign_raw(&ids[..n], &mut a);
                avx2.sign_raw(&ids[..n], &mut b);
                assert_eq!(a, b, "ids k={k} n={n}");
                for_each_run(&key, &bytes[..n], |run, run_ids, at| {
                    plain.sign_raw(run_ids, &mut a);
                    b.fill(EMPTY);
                    // SAFETY: the token proves AVX2.
                    unsafe { avx2::sign_run(Avx2::detect().unwrap(), run, avx2.mix_seed, &mut b) };
                    assert_eq!(a, b, "run k={k} {at}");
                });
            }
        }
    }

    /// The AVX-512 raw sketches (with VBMI's byte filter where the CPU has it, and without: the group filter)
    /// equal the plain one, from ids and from runs of windows straight from bytes, for k around powers of two
    /// (128 takes the byte filter) and sizes around the 8-lane vectors, the pipeline's depth, the 256-id chunks
    /// and the 16-byte loads.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_and_plain_raw_sketches_agree() {
        let Some(token) = Avx512::detect() else {
            return;
        };
        let ids: Vec<u64> = (0..3000u64).map(|i| i.wrapping_mul(GOLDEN) ^ i).collect();
        let bytes: Vec<u8> = (0..3000u64).map(|i| (mix64(i) >> 40) as u8).collect();
        let key = crate::window::WindowKey::new(11);
        for k in [1usize, 7, 64, 100, 128, 256, 1000] {
            let mut plain_bv = vec![0u64; ids.len()];
            bin_values_plain(&ids, 5, k as u64, &mut plain_bv);
            assert!(plain_bv.iter().all(|bv| (bv >> 32) < k as u64));
            let plain = Oph::new(k, 5, Densify::Optimal).with_isa(Some(Isa::Scalar));
            let wide = Oph::new(k, 5, Densify::Optimal).with_isa(Some(Isa::Avx512));
            let group = Oph::new(k, 5, Densify::Optimal)
                .with_isa(Some(Isa::Avx512))
                .without_vbmi();
            let (mut a, mut b) = (vec![0u32; k], vec![0u32; k]);
            for n in [
                0usize, 1, 7, 8, 9, 15, 16, 17, 255, 256, 257, 263, 1000, 3000,
            ] {
                plain.sign_raw(&ids[..n], &mut a);
                for (oph, what) in [(&wide, "vbmi"), (&group, "group")] {
                    oph.sign_raw(&ids[..n], &mut b);
                    assert_eq!(a, b, "ids {what} k={k} n={n}");
                }
                for_each_run(&key, &bytes[..n], |run, run_ids, at| {
                    plain.sign_raw(run_ids, &mut a);
                    b.fill(EMPTY);
                    token.sign_run(run, plain.mix_seed, &mut b);
                    assert_eq!(a, b, "run group k={k} {at}");
                    if let Some(vbmi) = token.vbmi2() {
                        b.fill(EMPTY);
                        vbmi.sign_run(run, plain.mix_seed, &mut b);
                        assert_eq!(a, b, "run vbmi k={k} {at}");
                    }
                });
            }
        }
    }

    /// The filters at their edges, k = 128, with ids built (through `unmix64`) to mix to chosen bins and
    /// values: a bin whose only value is `EMPTY` (the cap must make it `EMPTY - 1`); and, in every other bin, a
    /// first value, then (more than two chunks later, so the filter has taken the bins' thresholds) a value
    /// with the same top byte but lower, which must land (a strict test on the top byte would drop it), a
    /// higher one, and in some bins one a top byte lower. Every AVX-512 form gives the plain sketch, and the
    /// plain sketch is the one the values were chosen to give.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_filters_keep_every_value_that_lowers_its_bin() {
        let k = 128;
        let plain = Oph::new(k, 5, Densify::Optimal).with_isa(Some(Isa::Scalar));
        let seed = plain.mix_seed;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        // An id whose mixed value puts `value` in `bin` (the middle bits random).
        let mut id = |bin: u64, value: u32| {
            let h = bin << 57 | (rng.next_u64() >> 39) << 32 | value as u64;
            crate::hash::unmix64(h) ^ seed
        };
        let capped = 0..8u64;
        // A top byte per bin, 1..=252: below the filler's 0xfe also after adding one.
        let top = |bin: u64| 1 + (bin as u32 * 2) % 252;
        let mut ids: Vec<u64> = capped.clone().map(|b| id(b, EMPTY)).collect();
        ids.extend((8..128).map(|b| id(b, top(b) << 24 | 0x00ff_ffff)));
        // Filler: values above every first value, in the bins that have one.
        ids.extend((0..1200u64).map(|i| id(8 + i % 120, 0xfe00_0000 | i as u32)));
        for b in 8..128 {
            ids.push(id(b, top(b) << 24 | 0x0000_0100));
            ids.push(id(b, (top(b) + 1) << 24));
            if b % 3 == 0 {
                ids.push(id(b, (top(b) - 1) << 24 | 0x00ff_fff0));
            }
        }
        let mut want = vec![0u32; k];
        plain.sign_raw(&ids, &mut want);
        for b in 0..128u64 {
            let expect = match b {
                0..8 => EMPTY - 1,
                _ if b % 3 == 0 => (top(b) - 1) << 24 | 0x00ff_fff0,
                _ => top(b) << 24 | 0x0000_0100,
            };
            assert_eq!(want[b as usize], expect, "plain sketch, bin {b}");
        }
        let wide = Oph::new(k, 5, Densify::Optimal).with_isa(Some(Isa::Avx512));
        let group = Oph::new(k, 5, Densify::Optimal)
            .with_isa(Some(Isa::Avx512))
            .without_vbmi();
        let mut got = vec![0u32; k];
        for (oph, what) in [(&wide, "vbmi"), (&group, "group")] {
            oph.sign_raw(&ids, &mut got);
            assert_eq!(got, want, "{what}");
        }
    }
}
