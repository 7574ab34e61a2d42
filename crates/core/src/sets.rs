//! Shingle-id sets for exact verification: a document's set of hashed shingles ([`verification_set`]), the
//! split form `dedup` keeps in memory ([`SplitSet`], in a [`SetArena`]), their intersection sizes (a branch-free
//! merge, and per instruction set a block merge and a presence bitmap) and the Jaccard similarity they give.
//! What `dedup`, the online index and the Python binding verify candidates with; the all-pairs join of
//! [`crate::exact`] is built on them.

use crate::arch::Dispatch;
#[cfg(target_arch = "x86_64")]
use crate::arch::{Avx2, Avx512};
use crate::shingle::Shingler;

/// Smallest overlap two sets of sizes `a` and `b` need for J >= t: ceil(t/(1+t) (a + b)), rounded down-safe.
pub fn required_overlap(t: f64, a: usize, b: usize) -> usize {
    ((t / (1.0 + t) * (a + b) as f64) - 1e-9).ceil().max(0.0) as usize
}

/// Intersection size of two sorted, deduplicated slices.
pub fn intersection_size<T: Ord + Copy>(a: &[T], b: &[T]) -> usize {
    intersection_at_least(a, b, 0).expect("every count reaches 0")
}

/// The intersection size of two sorted, deduplicated slices, or `None` as soon as it cannot reach `need`.
/// The merge is branch-free (equal advances both sides), which matters because candidate pairs mostly differ.
pub fn intersection_at_least<T: Ord + Copy>(a: &[T], b: &[T], need: usize) -> Option<usize> {
    let (mut i, mut j, mut n) = (0usize, 0usize, 0usize);
    loop {
        // Check the bound every 64 steps: what is left of the shorter remainder could still all match.
        let remaining = (a.len() - i).min(b.len() - j);
        if n + remaining < need {
            return None;
        }
        if remaining == 0 {
            return Some(n);
        }
        let stop = 64.min(remaining);
        for _ in 0..stop {
            // Each step advances i or j (or both), and at most `remaining` steps keep both in bounds.
            let (x, y) = (a[i], b[j]);
            n += (x == y) as usize;
            i += (x <= y) as usize;
            j += (y <= x) as usize;
        }
    }
}

/// [`intersection_at_least`] for shingle-id sets, on AVX-512 or AVX2 when `dispatch` chose it: the same
/// answer (`Some(|a n b|)` exactly when it reaches `need`), about four times faster on long sets. The scalar
/// merge is a chain of dependent loads (each step's index comes from the previous compare); the vector merge
/// compares a block of 8 ids of `a` with a block of 8 of `b` in 8 rotations and then advances the block
/// whose last id is smaller (both when equal), so each common id is counted once, when its two blocks meet
/// (Lemire, Boytsov and Kurz, "SIMD compression and the intersection of sorted integers", 2016).
pub fn intersection_at_least_ids(
    a: &[u64],
    b: &[u64],
    need: usize,
    dispatch: Dispatch,
) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = dispatch.avx512() {
        // SAFETY: the token proves AVX-512 F.
        return unsafe { intersection_at_least_avx512(token, a, b, need) };
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = dispatch.avx2() {
        // SAFETY: the token proves AVX2.
        return unsafe { intersection_at_least_avx2(token, a, b, need) };
    }
    intersection_at_least(a, b, need)
}

/// Exact Jaccard of two shingle-id sets through [`intersection_at_least_ids`] (equal to [`jaccard`]).
pub fn jaccard_ids(a: &[u64], b: &[u64], dispatch: Dispatch) -> f64 {
    let inter = intersection_at_least_ids(a, b, 0, dispatch).expect("every count reaches 0");
    jaccard_from_counts(inter, a.len(), b.len())
}

/// One vector of whole ids as an instruction set holds it: the block the vector merges compare. Each method is a
/// thin `#[inline(always)]` wrapper of a few instructions, called only inside a `#[target_feature]` function of
/// its instruction set, which the generic loops below are inlined into.
#[cfg(target_arch = "x86_64")]
trait IdLanes: Copy {
    /// Ids per vector.
    const LANES: usize;
    /// # Safety
    /// `p` is valid for reading `LANES` ids, and the CPU runs the instruction set.
    unsafe fn load(p: *const u64) -> Self;
    /// How many lanes of `a` equal some lane of `b` (`b` rotated through every lane), for vectors of distinct ids.
    /// # Safety
    /// The CPU runs the instruction set.
    unsafe fn matches(a: Self, b: Self) -> usize;
}

#[cfg(target_arch = "x86_64")]
impl IdLanes for std::arch::x86_64::__m512i {
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn load(p: *const u64) -> Self {
        // SAFETY: the caller's contract.
        unsafe { std::arch::x86_64::_mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn matches(a: Self, b: Self) -> usize {
        use std::arch::x86_64::*;
        // SAFETY (every intrinsic): the caller guarantees AVX-512 F.
        unsafe {
            let mut hit = _mm512_cmpeq_epi64_mask(a, b);
            hit |= _mm512_cmpeq_epi64_mask(a, _mm512_alignr_epi64::<1>(b, b));
            hit |= _mm512_cmpeq_epi64_mask(a, _mm512_alignr_epi64::<2>(b, b));
            hit |= _mm512_cmpeq_epi64_mask(a, _mm512_alignr_epi64::<3>(b, b));
            hit |= _mm512_cmpeq_epi64_mask(a, _mm512_alignr_epi64::<4>(b, b));
            hit |= _mm512_cmpeq_epi64_mask(a, _mm512_alignr_epi64::<5>(b, b));
            hit |= _mm512_cmpeq_epi64_mask(a, _mm512_alignr_epi64::<6>(b, b));
            hit |= _mm512_cmpeq_epi64_mask(a, _mm512_alignr_epi64::<7>(b, b));
            hit.count_ones() as usize
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl IdLanes for std::arch::x86_64::__m256i {
    const LANES: usize = 4;
    #[inline(always)]
    unsafe fn load(p: *const u64) -> Self {
        // SAFETY: the caller's contract.
        unsafe { std::arch::x86_64::_mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn matches(a: Self, b: Self) -> usize {
        use crate::arch::x86::BITS4;
        use std::arch::x86_64::*;
        // SAFETY (every intrinsic): the caller guarantees AVX2.
        unsafe {
            let hit = _mm256_or_si256(
                _mm256_or_si256(
                    _mm256_cmpeq_epi64(a, b),
                    _mm256_cmpeq_epi64(a, _mm256_permute4x64_epi64::<0x39>(b)),
                ),
                _mm256_or_si256(
                    _mm256_cmpeq_epi64(a, _mm256_permute4x64_epi64::<0x4e>(b)),
                    _mm256_cmpeq_epi64(a, _mm256_permute4x64_epi64::<0x93>(b)),
                ),
            );
            BITS4[_mm256_movemask_pd(_mm256_castsi256_pd(hit)) as usize] as usize
        }
    }
}

/// [`intersection_at_least`] by blocks of `V::LANES` ids: a block of `a` against a block of `b` in every
/// rotation; the block whose last id is smaller advances (both when equal). The sets hold distinct ids, so each
/// lane of `a` matches at most one lane of `b`. The rest (fewer than a block left on one side) by the scalar
/// merge: no common id among `a[i..] x b[j..]` was counted yet (a pair is counted only when both blocks are
/// loaded, and those blocks are now behind).
///
/// # Safety
/// The CPU runs `V`'s instruction set.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn intersection_at_least_lanes<V: IdLanes>(
    a: &[u64],
    b: &[u64],
    need: usize,
) -> Option<usize> {
    let (mut i, mut j, mut n) = (0usize, 0usize, 0usize);
    while i + V::LANES <= a.len() && j + V::LANES <= b.len() {
        if n + (a.len() - i).min(b.len() - j) < need {
            return None;
        }
        // SAFETY: i + LANES <= a.len() and j + LANES <= b.len(): both loads read inside their slice; the
        // caller guarantees the instruction set.
        n += unsafe { V::matches(V::load(a.as_ptr().add(i)), V::load(b.as_ptr().add(j))) };
        let (last_a, last_b) = (a[i + V::LANES - 1], b[j + V::LANES - 1]);
        i += V::LANES * (last_a <= last_b) as usize;
        j += V::LANES * (last_b <= last_a) as usize;
    }
    let rest = intersection_at_least(&a[i..], &b[j..], need.saturating_sub(n))?;
    let total = n + rest;
    (total >= need).then_some(total)
}

/// [`intersection_at_least_lanes`] on AVX-512: blocks of 8 ids.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn intersection_at_least_avx512(_: Avx512, a: &[u64], b: &[u64], need: usize) -> Option<usize> {
    // SAFETY: the token proves AVX-512 F.
    unsafe { intersection_at_least_lanes::<std::arch::x86_64::__m512i>(a, b, need) }
}

/// [`intersection_at_least_lanes`] on AVX2: blocks of 4 ids.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn intersection_at_least_avx2(_: Avx2, a: &[u64], b: &[u64], need: usize) -> Option<usize> {
    // SAFETY: the token proves AVX2.
    unsafe { intersection_at_least_lanes::<std::arch::x86_64::__m256i>(a, b, need) }
}

/// J from the intersection and the two set sizes. Every exact Jaccard in the crate goes through this one
/// expression, so `dedup` and `exact` agree bit for bit. Two empty sets give 0 (empty never matches).
#[inline]
pub fn jaccard_from_counts(intersection: usize, len_a: usize, len_b: usize) -> f64 {
    let union = len_a + len_b - intersection;
    if union == 0 {
        0.0
    } else {
        intersection as f64 / union as f64
    }
}

/// Exact Jaccard of two sorted, deduplicated sets (0 when both are empty).
pub fn jaccard<T: Ord + Copy>(a: &[T], b: &[T]) -> f64 {
    jaccard_from_counts(intersection_size(a, b), a.len(), b.len())
}

/// The shingle set of `text` (sorted, deduplicated ids), equal to [`crate::shingle::Shingler::set`].
pub fn shingle_set(shingler: &Shingler, text: &str) -> Vec<u64> {
    let mut ids = shingler.set(text);
    ids.shrink_to_fit();
    ids
}

/// The shingle set `dedup`'s verification compares ([`Shingler::mixed_set`]): the same Jaccard between two of
/// them as between two [`shingle_set`]s, built in fewer passes. Compare such sets only with each other, and do
/// not sign them (their ids are not window ids).
pub fn verification_set(shingler: &Shingler, text: &str) -> Vec<u64> {
    with_verification_ids(shingler, text, <[u64]>::to_vec)
}

/// `f` of the verification set of `text`, sorted in a per-thread buffer of window ids reused from one text
/// to the next.
fn with_verification_ids<R>(shingler: &Shingler, text: &str, f: impl FnOnce(&[u64]) -> R) -> R {
    thread_local! {
        static IDS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    IDS.with_borrow_mut(|ids| {
        let kept = verification_ids(shingler, text, ids);
        f(&ids[..kept])
    })
}

/// The verification set of `text` ([`verification_set`]) built in `ids` (cleared first), a buffer the caller
/// reuses: the set is `ids[..n]` for the `n` returned.
pub(crate) fn verification_ids(shingler: &Shingler, text: &str, ids: &mut Vec<u64>) -> usize {
    shingler.hashes(text, ids);
    crate::shingle::mixed_sort_dedup(ids, shingler.dispatch())
}

/// A verification set ([`verification_set`]) stored as two arrays of 32-bit halves, the high halves of
/// every id, then the low halves, in the set's order, for the intersections `dedup` verifies with, and a
/// presence bitmap that rejects most candidates before either array is read.
///
/// Verifying a candidate pair reads both sets from memory, and most candidates (about nine in ten on the
/// mail corpus) fall short of the threshold.
///
/// **The bitmap.** Each set of at least [`BITMAP_MIN_IDS`] ids keeps a bitmap of m bits (a power of two, about
/// [`BITMAP_BITS_PER_ID`] per id, at least 512) with bit `id mod m` set for each id, and its excess, the
/// number of ids minus the number of bits set, for the bitmap folded to m, m/2, m/4 and m/8 bits (bit
/// `id mod m/2^f`). Two sets are compared at the smaller bitmap's size, the larger one folded to it. An id in
/// both sets sets the same bit in both, and the ids of one set that share a bit with another of its ids
/// number at most its excess, so |A ∩ B| <= popcount(a AND b) + min(excess of A, excess of B). A pair whose
/// bound is below the overlap it needs is rejected, exactly, from a few hundred bytes per set: at 8 bits per
/// id, two sets of equal size with Jaccard J have a bound of about I + (n - I)/8 + n/16 (I the intersection,
/// n the size), under the overlap that J = 0.5 needs for J below about 0.35.
///
/// **The merges.** The first stage reads only the high halves: when neither set holds two ids with the same
/// high half, the count of high halves the two sets share is at least their true intersection (equal ids
/// have equal halves), so a pair whose count cannot reach the overlap it needs is rejected exactly, from half
/// the bytes. Mixed ids are spread evenly, so two distinct ids of a pair share a high half with probability
/// about |a||b| / 2^32: the few pairs that pass go to the second stage, which compares both halves and gives
/// the exact count. A pair the bitmap let through goes straight to the second stage (on the mail corpus that
/// was faster than trying the first stage on it too). A set whose high halves repeat (a few in thousands) is
/// compared as whole ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SplitSet {
    /// The high halves of the ids (`len` of them), then their low halves.
    halves: Slab<u32>,
    /// No two ids share their high half, so the high halves alone are strictly increasing.
    distinct_high: bool,
    /// The presence bitmap, bit `id mod 64 * bits.len()` set for each id (empty under [`BITMAP_MIN_IDS`] ids).
    bits: Slab<u64>,
    /// For f in 0..FOLDS: the number of ids minus the bits set in the bitmap folded to `1 / 2^f` of its size
    /// (`u32::MAX` where the bitmap is too small to fold that far).
    excess: [u32; FOLDS],
}

/// Bitmap bits per id, before rounding up to a power of two (see [`SplitSet`]).
pub const BITMAP_BITS_PER_ID: usize = 8;

/// The fewest ids a [`SplitSet`] keeps a bitmap for: smaller sets are merged at once.
pub const BITMAP_MIN_IDS: usize = 32;

/// Fold levels kept per bitmap: two sets whose bitmaps differ in size 2^FOLDS-fold or more (which the size
/// filter drops first at any threshold above 1/8) are not bounded by them.
const FOLDS: usize = 4;

/// Whether the bitmap loops may use the `popcnt` instruction: on the vector paths (`portable` and `scalar` keep
/// the plain code), where the CPU has it.
#[cfg(target_arch = "x86_64")]
fn popcnt(d: Dispatch) -> bool {
    (d.avx512().is_some() || d.avx2().is_some()) && std::arch::is_x86_feature_detected!("popcnt")
}

/// Word `w` of `bits` folded into `blocks` equal blocks: the OR of word `w` of each block.
#[inline(always)]
fn folded_word(bits: &[u64], blocks: usize, w: usize) -> u64 {
    let m = bits.len() / blocks;
    (0..blocks).fold(0, |acc, i| acc | bits[i * m + w])
}

/// popcount(`small` AND `large` folded to the size of `small`): bit j of the fold is the OR of `large`'s bits
/// j, j + m, j + 2m, ... (m = `small`'s size in bits), which is bit `id mod m` of the larger set.
fn shared_bits(small: &[u64], large: &[u64], d: Dispatch) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(token) = d.avx512()
            && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
        {
            // SAFETY: the token proves AVX-512 F/BW/VL and POPCNT; VPOPCNTDQ was detected just now.
            return unsafe { shared_bits_vpopcnt(token, small, large) };
        }
        if popcnt(d) {
            // SAFETY: `popcnt` detected the instruction.
            return unsafe { shared_bits_popcnt(small, large) };
        }
    }
    shared_bits_generic(small, large)
}

/// [`shared_bits_generic`] compiled for AVX-512 with `vpopcntq`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vpopcntdq,popcnt")]
fn shared_bits_vpopcnt(_: Avx512, small: &[u64], large: &[u64]) -> usize {
    shared_bits_generic(small, large)
}

/// [`shared_bits_generic`] compiled with the `popcnt` instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn shared_bits_popcnt(small: &[u64], large: &[u64]) -> usize {
    shared_bits_generic(small, large)
}

#[inline(always)]
fn shared_bits_generic(small: &[u64], large: &[u64]) -> usize {
    let m = small.len();
    let pop = |w: u64| w.count_ones() as usize;
    match large.len() / m {
        1 => small.iter().zip(large).map(|(&a, &b)| pop(a & b)).sum(),
        2 => {
            let (b0, b1) = large.split_at(m);
            small
                .iter()
                .zip(b0)
                .zip(b1)
                .map(|((&a, &b), &c)| pop(a & (b | c)))
                .sum()
        }
        blocks => (0..m)
            .map(|w| pop(small[w] & folded_word(large, blocks, w)))
            .sum(),
    }
}

/// The bitmap of `ids` (distinct) and its excess at each fold level, as [`SplitSet`] keeps them.
fn presence(
    ids: &[u64],
    arena: Option<&SetArena>,
    dispatch: Dispatch,
) -> (Slab<u64>, [u32; FOLDS]) {
    if ids.len() < BITMAP_MIN_IDS || u32::try_from(ids.len()).is_err() {
        return (Slab::default(), [u32::MAX; FOLDS]);
    }
    let m = (BITMAP_BITS_PER_ID * ids.len())
        .next_power_of_two()
        .max(512);
    let mut excess = [u32::MAX; FOLDS];
    let bits = Slab::new_with(arena, m / 64, |bits| {
        #[cfg(target_arch = "x86_64")]
        {
            if popcnt(dispatch) {
                // SAFETY: `popcnt` detected the instruction.
                excess = unsafe { presence_popcnt(ids, bits) };
                return;
            }
        }
        excess = presence_generic(ids, bits);
    });
    (bits, excess)
}

/// [`presence_generic`] compiled with the `popcnt` instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn presence_popcnt(ids: &[u64], bits: &mut [u64]) -> [u32; FOLDS] {
    presence_generic(ids, bits)
}

#[inline(always)]
fn presence_generic(ids: &[u64], bits: &mut [u64]) -> [u32; FOLDS] {
    let mask = bits.len() * 64 - 1;
    for &x in ids {
        let b = x as usize & mask;
        bits[b >> 6] |= 1 << (b & 63);
    }
    let n = ids.len() as u32;
    let mut excess = [u32::MAX; FOLDS];
    for (f, e) in excess.iter_mut().enumerate() {
        let blocks = 1usize << f;
        let m = bits.len() / blocks;
        if m == 0 {
            break;
        }
        let set: u32 = (0..m)
            .map(|w| folded_word(bits, blocks, w).count_ones())
            .sum();
        *e = n - set;
    }
    excess
}

/// Memory for the verification sets of one `dedup` run ([`SplitSet::from_sorted_in`]): large anonymous
/// mappings from which each set takes its arrays in turn.
///
/// The sets of a run are tens of megabytes of arrays of a few kilobytes each, kept until the run ends. Taken
/// from a few large mappings instead of the heap, they cost the allocator nothing per array and are freed in a
/// few unmaps; `dedup` on the mail corpus is about 15% faster so. With [`crate::exec::Tuning::huge_pages`]
/// (the CLI's), the mappings are advised with `MADV_HUGEPAGE`, and the kernel faults them in 2 MB at a time
/// where it has huge pages free (where it does not, the pages are ordinary ones). The arena never frees a
/// set's arrays on their own: a mapping is unmapped when the last set in it is dropped. Where a mapping cannot
/// be made, the arrays come from the heap.
#[derive(Debug, Default)]
pub struct SetArena {
    tail: std::sync::Mutex<ArenaTail>,
    /// Mappings are advised for transparent huge pages ([`crate::exec::Tuning::huge_pages`]).
    huge_pages: bool,
}

/// The mapping sets are being taken from, and how many of its bytes are taken.
#[derive(Debug, Default)]
struct ArenaTail {
    region: Option<std::sync::Arc<Region>>,
    used: usize,
}

/// The bytes of one mapping sets are taken from; arrays of more than half of it get a mapping of their own.
const REGION_BYTES: usize = 32 << 20;

/// One anonymous mapping and the address of its first byte.
#[derive(Debug)]
struct Region {
    base: std::ptr::NonNull<u8>,
    len: usize,
    _map: memmap2::MmapMut,
}

// SAFETY: a region is plain memory owned by its mapping; the arena hands out disjoint ranges of it, each
// written by one thread (while its `Slab` is built, the only reference to it) and only read after that.
unsafe impl Send for Region {}
// SAFETY: as for `Send`: shared references to a region only read its `base` and `len`.
unsafe impl Sync for Region {}

impl Region {
    fn new(len: usize, huge_pages: bool) -> Option<Region> {
        let mut map = memmap2::MmapMut::map_anon(len).ok()?;
        // Advice only: a kernel without transparent huge pages (or with them off) refuses it, and the mapping
        // is used with ordinary pages.
        #[cfg(target_os = "linux")]
        if huge_pages {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        let base = std::ptr::NonNull::new(map.as_mut_ptr())?;
        Some(Region {
            base,
            len,
            _map: map,
        })
    }
}

/// The element types the arena holds: plain integers, for which the zero bytes of a fresh mapping are a value.
trait ArenaWord: Copy + Default + std::fmt::Debug + Eq + 'static {}
impl ArenaWord for u32 {}
impl ArenaWord for u64 {}

/// An array of a [`SplitSet`]: in a [`SetArena`] mapping (which it keeps alive), or on the heap.
enum Slab<T: ArenaWord> {
    Heap(Box<[T]>),
    Arena {
        _region: std::sync::Arc<Region>,
        ptr: std::ptr::NonNull<T>,
        len: usize,
    },
}

// SAFETY: an arena slab is the only handle on its range of the region (which is `Send + Sync`), and is only
// read once built, so it moves and is shared between threads like the `Box<[T]>` of the heap variant.
unsafe impl<T: ArenaWord + Send> Send for Slab<T> {}
// SAFETY: as for `Send`: `&Slab` gives only `&[T]`.
unsafe impl<T: ArenaWord + Sync> Sync for Slab<T> {}

impl<T: ArenaWord> Slab<T> {
    /// `len` zeros, then `fill` on them: in `arena` when given (and a mapping can be made), else on the heap.
    fn new_with(arena: Option<&SetArena>, len: usize, fill: impl FnOnce(&mut [T])) -> Slab<T> {
        if let Some((region, ptr)) = arena.and_then(|a| a.take(len * size_of::<T>())) {
            let ptr = ptr.cast::<T>();
            // SAFETY: `take` returned `len * size_of::<T>()` bytes of `region`, aligned to 8 bytes (at least
            // T's alignment), which no other slab covers; a fresh mapping is zero bytes, a valid `T`. This is
            // the only reference to them until the slab is built.
            fill(unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), len) });
            return Slab::Arena {
                _region: region,
                ptr,
                len,
            };
        }
        let mut v = vec![T::default(); len].into_boxed_slice();
        fill(&mut v);
        Slab::Heap(v)
    }
}

impl<T: ArenaWord> std::ops::Deref for Slab<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Slab::Heap(b) => b,
            // SAFETY: the range was written when the slab was built and lives as long as `_region`.
            Slab::Arena { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }
}

impl<T: ArenaWord> Clone for Slab<T> {
    fn clone(&self) -> Self {
        Slab::Heap(self.to_vec().into_boxed_slice())
    }
}

impl<T: ArenaWord> Default for Slab<T> {
    fn default() -> Self {
        Slab::Heap(Box::new([]))
    }
}

impl<T: ArenaWord> PartialEq for Slab<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: ArenaWord> Eq for Slab<T> {}

impl<T: ArenaWord> std::fmt::Debug for Slab<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl SetArena {
    /// An arena with no mapping yet (one is made at the first set).
    pub fn new() -> Self {
        Self::default()
    }

    /// [`SetArena::new`], its mappings advised for transparent huge pages when `tuning` asks for it.
    pub fn tuned(tuning: &crate::exec::Tuning) -> Self {
        SetArena {
            huge_pages: tuning.huge_pages,
            ..Self::default()
        }
    }

    /// `bytes` bytes (rounded up to 8), zero, aligned to 8 bytes and covered by no earlier call: from the
    /// current mapping, a new one, or `None` where no mapping can be made.
    fn take(&self, bytes: usize) -> Option<(std::sync::Arc<Region>, std::ptr::NonNull<u8>)> {
        let bytes = bytes.div_ceil(8) * 8;
        if bytes == 0 {
            return None;
        }
        if bytes > REGION_BYTES / 2 {
            let region = std::sync::Arc::new(Region::new(bytes, self.huge_pages)?);
            let base = region.base;
            return Some((region, base));
        }
        let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        let fits = tail
            .region
            .as_ref()
            .is_some_and(|r| tail.used + bytes <= r.len);
        if !fits {
            tail.region = Some(std::sync::Arc::new(Region::new(
                REGION_BYTES,
                self.huge_pages,
            )?));
            tail.used = 0;
        }
        let region = tail.region.clone().expect("a region was just made");
        // SAFETY: used + bytes <= region.len, so the offset stays inside the mapping.
        let ptr = unsafe { region.base.add(tail.used) };
        tail.used += bytes;
        Some((region, ptr))
    }
}

impl SplitSet {
    /// The set of `ids`, which must be sorted and deduplicated.
    pub fn from_sorted(ids: &[u64], dispatch: Dispatch) -> Self {
        Self::build(ids, None, dispatch)
    }

    /// [`from_sorted`](SplitSet::from_sorted) with the set's arrays taken from `arena`.
    pub fn from_sorted_in(ids: &[u64], arena: &SetArena, dispatch: Dispatch) -> Self {
        Self::build(ids, Some(arena), dispatch)
    }

    fn build(ids: &[u64], arena: Option<&SetArena>, dispatch: Dispatch) -> Self {
        debug_assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ids sorted and distinct"
        );
        // Two passes over the ids, which the caller has just sorted, so they are in cache.
        let n = ids.len();
        let halves = Slab::new_with(arena, 2 * n, |halves| {
            let (high, low) = halves.split_at_mut(n);
            for ((h, l), &x) in high.iter_mut().zip(low.iter_mut()).zip(ids) {
                (*h, *l) = ((x >> 32) as u32, x as u32);
            }
        });
        let distinct_high = halves[..n].windows(2).all(|w| w[0] < w[1]);
        let (bits, excess) = presence(ids, arena, dispatch);
        SplitSet {
            halves,
            distinct_high,
            bits,
            excess,
        }
    }

    /// The number of ids.
    pub fn len(&self) -> usize {
        self.halves.len() / 2
    }

    /// Whether the set holds no id.
    pub fn is_empty(&self) -> bool {
        self.halves.is_empty()
    }

    /// The ids, sorted.
    pub fn to_ids(&self) -> Vec<u64> {
        let (high, low) = self.halves();
        high.iter()
            .zip(low)
            .map(|(&h, &l)| (u64::from(h) << 32) | u64::from(l))
            .collect()
    }

    fn halves(&self) -> (&[u32], &[u32]) {
        self.halves.split_at(self.len())
    }

    /// The intersection size of the two sets, or `None` when it is below `need`: the same answer as
    /// [`intersection_at_least_ids`] on the whole ids.
    pub fn intersection_at_least(
        &self,
        other: &SplitSet,
        need: usize,
        dispatch: Dispatch,
    ) -> Option<usize> {
        if need > 0
            && let Some(bound) = self.bitmap_bound(other, dispatch)
        {
            if bound < need {
                return None;
            }
            return self.merge_at_least(other, need, false, dispatch);
        }
        self.merge_at_least(other, need, true, dispatch)
    }

    /// The bitmaps' upper bound on the intersection size ([`SplitSet`]), or `None` when either set has no
    /// bitmap or the two differ in size too much.
    fn bitmap_bound(&self, other: &SplitSet, dispatch: Dispatch) -> Option<usize> {
        if self.bits.is_empty() || other.bits.is_empty() {
            return None;
        }
        let (small, large) = if self.bits.len() <= other.bits.len() {
            (self, other)
        } else {
            (other, self)
        };
        let f = (large.bits.len() / small.bits.len()).ilog2() as usize;
        if f >= FOLDS {
            return None;
        }
        let excess = small.excess[0].min(large.excess[f]) as usize;
        Some(shared_bits(&small.bits, &large.bits, dispatch) + excess)
    }

    /// The merges of [`intersection_at_least`](SplitSet::intersection_at_least): the high halves first when
    /// `high_first` (and `need` is above 0), then both halves.
    fn merge_at_least(
        &self,
        other: &SplitSet,
        need: usize,
        high_first: bool,
        dispatch: Dispatch,
    ) -> Option<usize> {
        let first_stage_need = if high_first { need } else { 0 };
        if !(self.distinct_high && other.distinct_high) {
            return intersection_at_least_ids(&self.to_ids(), &other.to_ids(), need, dispatch);
        }
        let (a, b) = (self.halves(), other.halves());
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = dispatch.avx512() {
            if first_stage_need > 0 {
                // SAFETY: the token proves AVX-512 F and POPCNT.
                unsafe { split_at_least_avx512::<false>(token, a, b, need) }?;
            }
            // SAFETY: as above.
            return unsafe { split_at_least_avx512::<true>(token, a, b, need) };
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = dispatch.avx2() {
            if first_stage_need > 0 {
                // SAFETY: the token proves AVX2.
                unsafe { split_at_least_avx2::<false>(token, a, b, need) }?;
            }
            // SAFETY: as above.
            return unsafe { split_at_least_avx2::<true>(token, a, b, need) };
        }
        if first_stage_need > 0 {
            split_merge_at_least::<false>(a, b, need)?;
        }
        split_merge_at_least::<true>(a, b, need)
    }

    /// Exact Jaccard of the two sets (equal to [`jaccard_ids`] on the whole ids).
    pub fn jaccard(&self, other: &SplitSet, dispatch: Dispatch) -> f64 {
        let inter = self
            .intersection_at_least(other, 0, dispatch)
            .expect("every count reaches 0");
        jaccard_from_counts(inter, self.len(), other.len())
    }
}

/// A sorted, deduplicated id set that verification intersects: whole ids (`[u64]`) or a [`SplitSet`].
pub trait IdSet {
    /// The number of ids.
    fn size(&self) -> usize;
    /// The intersection size with `other`, or `None` when it is below `need`, on the instruction set of
    /// `dispatch`.
    fn intersection_at_least(&self, other: &Self, need: usize, dispatch: Dispatch)
    -> Option<usize>;
}

impl IdSet for [u64] {
    fn size(&self) -> usize {
        self.len()
    }
    fn intersection_at_least(
        &self,
        other: &Self,
        need: usize,
        dispatch: Dispatch,
    ) -> Option<usize> {
        intersection_at_least_ids(self, other, need, dispatch)
    }
}

impl IdSet for SplitSet {
    fn size(&self) -> usize {
        self.len()
    }
    fn intersection_at_least(
        &self,
        other: &Self,
        need: usize,
        dispatch: Dispatch,
    ) -> Option<usize> {
        SplitSet::intersection_at_least(self, other, need, dispatch)
    }
}

/// The high and low halves of a [`SplitSet`] whose high halves are strictly increasing.
type Halves<'s> = (&'s [u32], &'s [u32]);

/// The branch-free merge of [`intersection_at_least`] on split sets with distinct high halves: ordered by the
/// high halves, an equal pair counted when its high halves agree (`EXACT = false`: an upper bound on the
/// intersection) or when both halves do (`EXACT = true`: the intersection).
fn split_merge_at_least<const EXACT: bool>(
    (ah, al): Halves,
    (bh, bl): Halves,
    need: usize,
) -> Option<usize> {
    let (mut i, mut j, mut n) = (0usize, 0usize, 0usize);
    loop {
        let remaining = (ah.len() - i).min(bh.len() - j);
        if n + remaining < need {
            return None;
        }
        if remaining == 0 {
            return Some(n);
        }
        for _ in 0..64.min(remaining) {
            let (x, y) = (ah[i], bh[j]);
            // `&`, not `&&`: no branch on whether the high halves agree.
            n += ((x == y) & (!EXACT | (al[i] == bl[j]))) as usize;
            i += (x <= y) as usize;
            j += (y <= x) as usize;
        }
    }
}

/// Where a vector merge of split sets stopped (fewer ids left on one side than its block): the rest by the
/// scalar merge, from positions `i` and `j` with `n` counted. No pair of `a[i..] x b[j..]` was compared yet (a
/// pair is counted only when both its blocks are loaded, and those blocks are behind), as in the 64-bit forms.
#[inline(always)]
fn split_rest<const EXACT: bool>(
    (ah, al): Halves,
    (bh, bl): Halves,
    (i, j, n): (usize, usize, usize),
    need: usize,
) -> Option<usize> {
    let rest = split_merge_at_least::<EXACT>(
        (&ah[i..], &al[i..]),
        (&bh[j..], &bl[j..]),
        need.saturating_sub(n),
    )?;
    let total = n + rest;
    (total >= need).then_some(total)
}

/// One vector of 32-bit id halves as an instruction set holds it, for the block merge of split sets: `LANES`
/// halves of `a` against `LANES / 2` of `b`, each of `b`'s broadcast and compared with all of `a`'s at once.
#[cfg(target_arch = "x86_64")]
trait HalfLanes: Copy {
    /// Halves per vector.
    const LANES: usize;
    /// The lanes that agree so far (a mask or a vector).
    type Hits: Copy;
    /// # Safety
    /// `p` is valid for reading `LANES` halves, and the CPU runs the instruction set.
    unsafe fn load(p: *const u32) -> Self;
    /// No lane agrees.
    /// # Safety
    /// The CPU runs the instruction set.
    unsafe fn none() -> Self::Hits;
    /// `hits` and the lanes whose high half is `high` (`EXACT`: and whose low half is `low`).
    /// # Safety
    /// The CPU runs the instruction set.
    unsafe fn add<const EXACT: bool>(
        hits: Self::Hits,
        vh: Self,
        vl: Self,
        high: u32,
        low: u32,
    ) -> Self::Hits;
    /// How many lanes agree.
    /// # Safety
    /// The CPU runs the instruction set.
    unsafe fn count(hits: Self::Hits) -> usize;
}

#[cfg(target_arch = "x86_64")]
impl HalfLanes for std::arch::x86_64::__m512i {
    const LANES: usize = 16;
    type Hits = u16;
    #[inline(always)]
    unsafe fn load(p: *const u32) -> Self {
        // SAFETY: the caller's contract.
        unsafe { std::arch::x86_64::_mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn none() -> u16 {
        0
    }
    #[inline(always)]
    unsafe fn add<const EXACT: bool>(hits: u16, vh: Self, vl: Self, high: u32, low: u32) -> u16 {
        use std::arch::x86_64::*;
        // SAFETY (every intrinsic): the caller guarantees AVX-512 F.
        unsafe {
            let same_high = _mm512_cmpeq_epi32_mask(vh, _mm512_set1_epi32(high as i32));
            hits | if EXACT {
                _mm512_mask_cmpeq_epi32_mask(same_high, vl, _mm512_set1_epi32(low as i32))
            } else {
                same_high
            }
        }
    }
    #[inline(always)]
    unsafe fn count(hits: u16) -> usize {
        hits.count_ones() as usize
    }
}

#[cfg(target_arch = "x86_64")]
impl HalfLanes for std::arch::x86_64::__m256i {
    const LANES: usize = 8;
    type Hits = std::arch::x86_64::__m256i;
    #[inline(always)]
    unsafe fn load(p: *const u32) -> Self {
        // SAFETY: the caller's contract.
        unsafe { std::arch::x86_64::_mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn none() -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe { std::arch::x86_64::_mm256_setzero_si256() }
    }
    #[inline(always)]
    unsafe fn add<const EXACT: bool>(hits: Self, vh: Self, vl: Self, high: u32, low: u32) -> Self {
        use std::arch::x86_64::*;
        // SAFETY (every intrinsic): the caller guarantees AVX2.
        unsafe {
            let mut same = _mm256_cmpeq_epi32(vh, _mm256_set1_epi32(high as i32));
            if EXACT {
                same =
                    _mm256_and_si256(same, _mm256_cmpeq_epi32(vl, _mm256_set1_epi32(low as i32)));
            }
            _mm256_or_si256(hits, same)
        }
    }
    #[inline(always)]
    unsafe fn count(hits: Self) -> usize {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees AVX2.
        unsafe { (_mm256_movemask_ps(_mm256_castsi256_ps(hits)) as u32).count_ones() as usize }
    }
}

/// [`split_merge_at_least`] by blocks: `V::LANES` high halves of `a` against `V::LANES / 2` of `b`, each of
/// `b`'s broadcast and compared with all of `a`'s at once (`EXACT`: and the low halves of those that agree); the
/// block whose last high half is smaller advances (both when equal), as in [`intersection_at_least_lanes`].
/// Each of `b`'s high halves occurs once in `b`, so a lane of `a` agrees with at most one and the count is the
/// number of lanes that agree.
///
/// # Safety
/// The CPU runs `V`'s instruction set.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn split_at_least_lanes<V: HalfLanes, const EXACT: bool>(
    (ah, al): Halves,
    (bh, bl): Halves,
    need: usize,
) -> Option<usize> {
    let (a_block, b_block) = (V::LANES, V::LANES / 2);
    let (mut i, mut j, mut n) = (0usize, 0usize, 0usize);
    while i + a_block <= ah.len() && j + b_block <= bh.len() {
        if n + (ah.len() - i).min(bh.len() - j) < need {
            return None;
        }
        let (high, low) = (&bh[j..j + b_block], &bl[j..j + b_block]);
        // SAFETY: i + a_block <= ah.len() == al.len(): both loads read inside their slice; the caller
        // guarantees the instruction set (for every call below too).
        let (vh, vl) = unsafe { (V::load(ah.as_ptr().add(i)), V::load(al.as_ptr().add(i))) };
        let mut hits = unsafe { V::none() };
        for (&h, &l) in high.iter().zip(low) {
            hits = unsafe { V::add::<EXACT>(hits, vh, vl, h, l) };
        }
        n += unsafe { V::count(hits) };
        let (last_a, last_b) = (ah[i + a_block - 1], high[b_block - 1]);
        i += a_block * (last_a <= last_b) as usize;
        j += b_block * (last_b <= last_a) as usize;
    }
    split_rest::<EXACT>((ah, al), (bh, bl), (i, j, n), need)
}

/// [`split_at_least_lanes`] on AVX-512: 16 high halves of `a` against 8 of `b`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
fn split_at_least_avx512<const EXACT: bool>(
    _: Avx512,
    a: Halves,
    b: Halves,
    need: usize,
) -> Option<usize> {
    // SAFETY: the token proves AVX-512 F.
    unsafe { split_at_least_lanes::<std::arch::x86_64::__m512i, EXACT>(a, b, need) }
}

/// [`split_at_least_lanes`] on AVX2: 8 high halves of `a` against 4 of `b`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn split_at_least_avx2<const EXACT: bool>(
    _: Avx2,
    a: Halves,
    b: Halves,
    need: usize,
) -> Option<usize> {
    // SAFETY: the token proves AVX2.
    unsafe { split_at_least_lanes::<std::arch::x86_64::__m256i, EXACT>(a, b, need) }
}

/// [`verification_set`] as a [`SplitSet`], built without the intermediate vector of whole ids.
pub fn verification_split_set(shingler: &Shingler, text: &str) -> SplitSet {
    with_verification_ids(shingler, text, |ids| {
        SplitSet::from_sorted(ids, shingler.dispatch())
    })
}

/// [`verification_split_set`] with the set's arrays taken from `arena`.
pub fn verification_split_set_in(shingler: &Shingler, text: &str, arena: &SetArena) -> SplitSet {
    with_verification_ids(shingler, text, |ids| {
        SplitSet::from_sorted_in(ids, arena, shingler.dispatch())
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};
    use rayon::prelude::*;

    /// Random sorted, deduplicated sets: `n` of up to `max_len` ids below `universe`.
    pub(crate) fn random_sets(n: usize, universe: u64, max_len: usize, seed: u64) -> Vec<Vec<u64>> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let len = (rng.next_u64() % max_len as u64) as usize;
                let mut s: Vec<u64> = (0..len).map(|_| rng.next_u64() % universe).collect();
                s.sort_unstable();
                s.dedup();
                s
            })
            .collect()
    }

    #[test]
    fn bounded_intersection_matches_the_plain_count() {
        let sets = random_sets(60, 400, 300, 5);
        for x in &sets {
            for y in &sets {
                let n = x.iter().filter(|v| y.binary_search(v).is_ok()).count();
                assert_eq!(intersection_size(x, y), n);
                for need in [0, n.saturating_sub(1), n, n + 1, n + 50] {
                    let got = intersection_at_least(x, y, need);
                    assert_eq!(got, (n >= need).then_some(n), "need {need}, n {n}");
                }
            }
        }
    }

    #[test]
    fn vector_intersection_equals_the_scalar_merge() {
        use rand_xoshiro::Xoshiro256PlusPlus;
        use rand_xoshiro::rand_core::{Rng, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
        for round in 0..3000 {
            // Two sets drawn from a shared pool, so overlaps range from none to almost all; sizes cross the
            // 4- and 8-id blocks (0..=70) and reach a few thousand.
            let pool = [16u64, 60, 300, 5000][round % 4];
            let mut draw = |len: usize| {
                let mut v: Vec<u64> = (0..len)
                    .map(|_| (rng.next_u64() % pool).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let la = (round * 7) % 71 + if round % 5 == 0 { 2000 } else { 0 };
            let lb = (round * 13) % 67 + if round % 7 == 0 { 1500 } else { 0 };
            let (x, y) = (draw(la), draw(lb));
            let n = intersection_size(&x, &y);
            for need in [
                0,
                n.saturating_sub(1),
                n,
                n + 1,
                n / 2,
                x.len().max(y.len()),
            ] {
                let want = intersection_at_least(&x, &y, need);
                assert_eq!(
                    intersection_at_least_ids(&x, &y, need, Dispatch::detect()),
                    want
                );
                #[cfg(target_arch = "x86_64")]
                if let Some(token) = Avx512::detect() {
                    // SAFETY: the token proves AVX-512 F.
                    let got = unsafe { intersection_at_least_avx512(token, &x, &y, need) };
                    assert_eq!(got, want, "sizes {} {} need {need}", x.len(), y.len());
                }
                #[cfg(target_arch = "x86_64")]
                if let Some(token) = Avx2::detect() {
                    // SAFETY: the token proves AVX2.
                    let got = unsafe { intersection_at_least_avx2(token, &x, &y, need) };
                    assert_eq!(got, want, "avx2: sizes {} {} need {need}", x.len(), y.len());
                }
            }
            assert_eq!(jaccard_ids(&x, &y, Dispatch::detect()), jaccard(&x, &y));
        }
    }

    #[test]
    fn arena_sets_equal_heap_sets_and_outlive_the_arena() {
        use rand_xoshiro::Xoshiro256PlusPlus;
        use rand_xoshiro::rand_core::{Rng, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(34);
        let mut draw = |len: usize| {
            let mut v: Vec<u64> = (0..len).map(|_| rng.next_u64()).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        // Sizes from empty to one larger than half a mapping (a mapping of its own), and enough sets in all
        // (about 80 MB) to fill more than two shared mappings, so sets meet at mapping boundaries. Each set is
        // checked after all are built: a set written over another's bytes would change it.
        let mut sizes: Vec<usize> = vec![0, 1, 31, 32, 33, 100, REGION_BYTES / 16 + 1];
        sizes.extend((0..260).map(|i| 20_000 + 37 * i));
        let id_sets: Vec<Vec<u64>> = sizes.iter().map(|&n| draw(n)).collect();
        let arena = SetArena::new();
        let in_arena: Vec<SplitSet> = id_sets
            .par_iter()
            .map(|ids| SplitSet::from_sorted_in(ids, &arena, Dispatch::detect()))
            .collect();
        drop(arena);
        let mut mapped = 0;
        for (ids, set) in id_sets.iter().zip(&in_arena) {
            let heap = SplitSet::from_sorted(ids, Dispatch::detect());
            assert_eq!(set, &heap, "{} ids", ids.len());
            assert_eq!(set.to_ids(), *ids);
            mapped += matches!(set.halves, Slab::Arena { .. }) as usize;
            if !ids.is_empty() {
                let full = set.intersection_at_least(&heap, ids.len(), Dispatch::detect());
                assert_eq!(full, Some(ids.len()));
            }
        }
        // Every non-empty set came from a mapping (an empty array takes no memory, and a heap fallback
        // would make this test check nothing).
        assert_eq!(mapped, sizes.iter().filter(|&&n| n > 0).count());
    }

    #[test]
    fn split_sets_intersect_as_whole_ids() {
        use rand_xoshiro::Xoshiro256PlusPlus;
        use rand_xoshiro::rand_core::{Rng, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(33);
        let mut split_paths = 0;
        for round in 0..3000 {
            // Kinds of sets: 0, ids spread over all 64 bits (high halves distinct); 1, high halves drawn from a
            // small pool shared by both sets and low halves from {0, 1, 2}, so the two sets share many high
            // halves whose ids differ (the first stage's count is above the intersection) while each set's
            // high halves stay distinct; 2, the same with repeats of a high half within a set (the whole-id
            // path).
            let kind = round % 3;
            let pool = [16u64, 60, 300, 5000][(round / 3) % 4];
            let mut draw = |len: usize| {
                let mut v: Vec<u64> = (0..len)
                    .map(|_| {
                        let r = rng.next_u64();
                        match kind {
                            0 => (r % pool).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                            _ => ((r % pool).wrapping_mul(0x9E37_79B9) << 32) | (r >> 62).min(2),
                        }
                    })
                    .collect();
                v.sort_unstable();
                v.dedup();
                if kind == 1 {
                    v.dedup_by_key(|x| *x >> 32);
                }
                v
            };
            let la = (round * 7) % 71 + if round % 5 == 0 { 2000 } else { 0 };
            let lb = (round * 13) % 67 + if round % 7 == 0 { 1500 } else { 0 };
            let (x, y) = (draw(la), draw(lb));
            let (sx, sy) = (
                SplitSet::from_sorted(&x, Dispatch::detect()),
                SplitSet::from_sorted(&y, Dispatch::detect()),
            );
            assert_eq!((sx.to_ids(), sy.to_ids()), (x.clone(), y.clone()));
            assert_eq!(sx.len(), x.len());
            let distinct = sx.distinct_high && sy.distinct_high;
            if kind != 2 {
                assert!(distinct, "kind {kind}");
            }
            split_paths += distinct as usize;
            let n = intersection_size(&x, &y);
            let (hx, hy) = (sx.halves(), sy.halves());
            let high_count = intersection_size(hx.0, hy.0);
            for need in [
                0,
                n.saturating_sub(1),
                n,
                n + 1,
                n / 2,
                high_count,
                high_count + 1,
            ] {
                let want = intersection_at_least(&x, &y, need);
                assert_eq!(
                    sx.intersection_at_least(&sy, need, Dispatch::detect()),
                    want,
                    "kind {kind} need {need}"
                );
                if !distinct {
                    continue;
                }
                // Each path on its own: the exact stage equals the whole-id count, and the first stage gives
                // the count of shared high halves (at least the intersection) or `None` below `need`.
                let bound = (high_count >= need).then_some(high_count);
                assert_eq!(split_merge_at_least::<true>(hx, hy, need), want);
                assert_eq!(split_merge_at_least::<false>(hx, hy, need), bound);
                #[cfg(target_arch = "x86_64")]
                if let Some(token) = Avx512::detect() {
                    // SAFETY: the token proves AVX-512 F and POPCNT.
                    unsafe {
                        assert_eq!(split_at_least_avx512::<true>(token, hx, hy, need), want);
                        assert_eq!(split_at_least_avx512::<false>(token, hx, hy, need), bound);
                    }
                }
                #[cfg(target_arch = "x86_64")]
                if let Some(token) = Avx2::detect() {
                    // SAFETY: the token proves AVX2.
                    unsafe {
                        assert_eq!(split_at_least_avx2::<true>(token, hx, hy, need), want);
                        assert_eq!(split_at_least_avx2::<false>(token, hx, hy, need), bound);
                    }
                }
            }
            assert!(high_count >= n);
            assert_eq!(sx.jaccard(&sy, Dispatch::detect()), jaccard(&x, &y));
        }
        // Both kinds of pair occurred.
        assert!(split_paths > 1000 && split_paths < 3000, "{split_paths}");
    }

    /// The bitmap bound is never below the true intersection, on every fold level and popcount path, and
    /// it rejects: sets that share little get a bound far below the overlap J = 0.5 needs.

    #[test]
    fn bitmap_bounds_the_intersection_and_rejects() {
        use rand_xoshiro::Xoshiro256PlusPlus;
        use rand_xoshiro::rand_core::{Rng, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(35);
        let mut rejected = 0;
        for round in 0..2000 {
            // Kinds: 0, spread ids; 1, ids whose low 12 bits come from 4 values (most ids of a set share a
            // bit: the excess carries the bound); 2, every id with the same low 20 bits.
            let kind = round % 3;
            let pool = [40u64, 400, 4000, 1 << 40][(round / 3) % 4];
            let mut draw = |len: usize| {
                let mut v: Vec<u64> = (0..len)
                    .map(|_| {
                        let r = (rng.next_u64() % pool).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        match kind {
                            0 => r,
                            1 => (r & !0xfff) | (r >> 62),
                            _ => (r & !0xf_ffff) | 0x5_a5a5,
                        }
                    })
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            // Sizes from 1 to about 2,600: bitmaps at every fold level meet, some too far apart in size to be
            // compared, and some sets have none.
            let la = 1 + (round * 37) % 1300 * (1 + round % 2);
            let lb = 1 + (round * 53) % 900 * (1 + (round / 2) % 3);
            let (x, y) = (draw(la), draw(lb));
            let (sx, sy) = (
                SplitSet::from_sorted(&x, Dispatch::detect()),
                SplitSet::from_sorted(&y, Dispatch::detect()),
            );
            let n = intersection_size(&x, &y);
            let bound = sx.bitmap_bound(&sy, Dispatch::detect());
            assert_eq!(bound, sy.bitmap_bound(&sx, Dispatch::detect()));
            if let Some(b) = bound {
                assert!(
                    b >= n,
                    "round {round}: bound {b} below the intersection {n}"
                );
                assert!(x.len().min(y.len()) >= BITMAP_MIN_IDS);
                // Each popcount path gives the same count.
                let (small, large) = if sx.bits.len() <= sy.bits.len() {
                    (&sx.bits, &sy.bits)
                } else {
                    (&sy.bits, &sx.bits)
                };
                let generic = shared_bits_generic(small, large);
                assert_eq!(shared_bits(small, large, Dispatch::detect()), generic);
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("popcnt") {
                    // SAFETY: POPCNT was detected just now.
                    assert_eq!(unsafe { shared_bits_popcnt(small, large) }, generic);
                }
                if kind == 0 && b < required_overlap(0.5, x.len(), y.len()) {
                    rejected += 1;
                }
            } else {
                assert!(
                    x.len().min(y.len()) < BITMAP_MIN_IDS
                        || sx.bits.len().max(sy.bits.len())
                            >= sx.bits.len().min(sy.bits.len()) << FOLDS
                );
            }
            // The answer with the bitmap is the whole ids' answer, at and around the intersection.
            for need in [0, n.saturating_sub(1), n, n + 1, n / 2] {
                assert_eq!(
                    sx.intersection_at_least(&sy, need, Dispatch::detect()),
                    intersection_at_least(&x, &y, need),
                    "round {round} need {need}"
                );
            }
        }
        assert!(rejected > 100, "{rejected}");
        // A set against itself, every id in one bit: the bound is the excess alone.
        let same: Vec<u64> = (0..500u64).map(|i| (i << 20) | 0x5_a5a5).collect();
        let s = SplitSet::from_sorted(&same, Dispatch::detect());
        assert_eq!(s.bitmap_bound(&s, Dispatch::detect()), Some(500));
        assert_eq!(
            s.intersection_at_least(&s, 500, Dispatch::detect()),
            Some(500)
        );
    }

    #[test]
    fn jaccard_basics() {
        assert_eq!(jaccard::<u64>(&[], &[]), 0.0);
        assert_eq!(jaccard(&[1u64, 2, 3], &[2, 3, 4]), 0.5);
        assert_eq!(jaccard(&[1u64], &[]), 0.0);
    }
}
